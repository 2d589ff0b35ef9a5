"""The S3 source against a real S3 endpoint (moto's server mode, its own process, TLS from its own CA).

What is asserted: the catalogue answers the tree as a folder of the same files would, from one
listing; reads are ranged GETs checked against the listed ETag; an object changed since the
listing is named; multipart uploads left unfinished are listed; planning the real SQL Server corpus
(Ola Hallengren's layout) and a real pgBackRest repository from S3 gives the plans the same files
give from a folder, reading at most 64 KiB of each SQL Server backup.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LABELS
from tests.unit.sources.conftest import Bucket
from tests.unit.sources.s3_helpers import LeavingOut, lay_out, ola_layout
from verification.config import S3Settings, Settings
from verification.errors import SourceError
from verification.sources import LocalSource
from verification.sources.s3 import HEAD_BYTES, SMALL_BYTES, USER_AGENT, S3Source
from verification.sources.s3_url import is_s3_url, parse_s3_url

KiB = 1024
# What the SQL Server header reader reads of one file: its head and its trailer (mtf.HEAD_BYTES + TAIL_BYTES).
HEADER_BYTES = 48 * KiB


def tree(root: Path) -> Path:
    """A small repository-like tree: nested folders, an empty file, a file bigger than a head."""
    files = {"backup/demo1/backup.info": b"[backrest]\nx=1\n", "backup/demo1/L1/backup.manifest": b"m" * 100,
             "archive/demo1/15-1/0000000100000000/seg-a": b"", "top.txt": b"hello",
             "big/blob.bin": bytes(range(256)) * 400, "small.bin": bytes(range(256)) * 80}
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(body)
    return root


def same_times(local: Path, source: S3Source) -> None:
    """The folder's files get the objects' LastModified: 'the same files' down to their times."""
    for path in source.paths():
        stamp = source.modified(path)
        assert stamp is not None
        os.utime(local / path, (stamp.timestamp(), stamp.timestamp()))


def answers(source: Any, paths: list[str]) -> list[Any]:
    return [(p, source.exists(p), source.is_dir(p), source.list_dir(p)) for p in paths]


# -- URLs ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "bucket", "prefix", "shown"), [
    ("s3://backups", "backups", "", "s3://backups"),
    ("s3://backups/", "backups", "", "s3://backups"),
    ("s3://backups/sql/prod", "backups", "sql/prod/", "s3://backups/sql/prod"),
    ("S3://backups/sql/prod/", "backups", "sql/prod/", "s3://backups/sql/prod"),
    ("s3://Legacy_Bucket.1/a b/$x", "Legacy_Bucket.1", "a b/$x/", "s3://Legacy_Bucket.1/a b/$x"),
])
def test_an_s3_url_names_a_bucket_and_a_folder(url: str, bucket: str, prefix: str, shown: str) -> None:
    assert is_s3_url(url)
    parsed = parse_s3_url(url)
    assert (parsed.bucket, parsed.prefix, str(parsed)) == (bucket, prefix, shown)
    assert parsed.of("FULL/x.bak") == f"s3://{bucket}/{prefix}FULL/x.bak"


@pytest.mark.parametrize(("url", "message"), [
    ("s3://", "malformed S3 URL s3://: no bucket name (expected s3://bucket/prefix)"),
    ("s3:///backups/sql", "malformed S3 URL s3:///backups/sql: no bucket name"),
    ("s3://ab/x", "malformed S3 URL s3://ab/x: 'ab' is not a valid bucket name"),
    ("s3://-bucket/x", "'-bucket' is not a valid bucket name"),
    ("s3://my bucket/x", "'my bucket' is not a valid bucket name"),
    ("s3://a..b/x", "'a..b' is not a valid bucket name"),
    ("s3://192.168.1.10/x", "'192.168.1.10' is not a valid bucket name"),
    ("s3://backups/sql//prod", "the prefix 'sql//prod' has an empty, '.' or '..' segment"),
    ("s3://backups/sql/../etc", "the prefix 'sql/../etc' has an empty, '.' or '..' segment"),
    ("s3://backups/sql?versionId=3", "'?' and '#' (a query or a fragment) are not part of an s3://bucket/prefix URL"),
    ("s3://backups/a\nb", "the prefix holds a control character"),
])
def test_a_malformed_url_is_refused_before_any_request(url: str, message: str) -> None:
    with pytest.raises(SourceError) as raised:
        S3Source(url, S3Settings(endpoint_url="https://127.0.0.1:9"))  # nothing listens there: never asked
    assert str(raised.value).startswith(f"malformed S3 URL {url}: ") and message in str(raised.value)


def test_credentials_written_into_the_url_are_refused_and_not_repeated() -> None:
    with pytest.raises(SourceError) as raised:
        parse_s3_url("s3://AKIAEXAMPLE:wJalrXUtnFEMI@backups/sql")
    assert str(raised.value) == ("malformed S3 URL s3://********@backups/sql: credentials are not taken from the "
                                 "URL; set s3.access_key_id and s3.secret_access_key, or use the AWS credential chain")
    assert not is_s3_url("/srv/backups") and not is_s3_url("s3-backups/x") and not is_s3_url("S3:/x")


# -- the catalogue ---------------------------------------------------------------------------------

def test_the_catalogue_answers_as_the_same_folder_would_without_a_request(s3: Bucket, tmp_path: Path) -> None:
    local = LocalSource(tree(tmp_path / "repo"))
    s3.upload(local.root, "pg")
    s3.put("pg/backup/demo1/empty-folder/")  # a folder marker, as consoles make: a folder, no file
    (local.root / "backup/demo1/empty-folder").mkdir()
    source = S3Source(s3.url("pg/"))
    listed = source.stats
    paths = ["", "backup", "backup/demo1", "backup/demo1/L1", "backup/demo1/empty-folder", "backup/demo1/backup.info",
             "archive/demo1/15-1/0000000100000000", "top.txt", "missing", "backup/missing/x", "big", "big/"]
    assert answers(source, paths) == answers(local, paths)
    assert [(p, source.size(p)) for p in source.paths()] == [(p, local.size(p)) for p in source.paths()]
    assert source.paths() == sorted(p.relative_to(local.root).as_posix() for p in local.root.rglob("*") if p.is_file())
    assert source.modified("missing") is None and source.modified("top.txt") is not None
    assert source.describe() == f"s3://{s3.name}/pg" and source.url("top.txt") == f"s3://{s3.name}/pg/top.txt"
    assert source.incomplete_uploads() == [] and local.incomplete_uploads() == []
    assert source.stats == listed, "a question about the tree made a request"
    # Listing: the prefix, then each folder found (delimited), each leaf listed whole, and the uploads.
    assert set(listed.requests) == {"ListObjectsV2", "ListMultipartUploads"} and listed.bytes_read == 0


@pytest.mark.parametrize("text", ["Wed, 25 Nov 2026 01:33:02 GMT", "2026-11-25T01:33:02.000Z", "2026-11-25T01:33:02Z",
                                  "2026-11-25T02:33:02+01:00", "1795656782", "Wednesday, 25-Nov-26 01:33:02 GMT",
                                  "2026-11-25T01:33:02.123456Z"])
def test_timestamps_are_parsed_as_botocore_parses_them(text: str) -> None:
    import botocore.utils

    from verification.sources.s3 import parse_timestamp

    assert parse_timestamp(text) == botocore.utils.parse_timestamp(text)
    assert parse_timestamp(text).utcoffset() == botocore.utils.parse_timestamp(text).utcoffset()


def test_listed_and_read_times_and_the_user_agent_sent(s3: Bucket) -> None:
    import botocore

    s3.put("pg/a.bin", b"x" * 100)
    source = S3Source(s3.url("pg"))
    sent: list[str] = []
    source.client.meta.events.register("before-send.s3", lambda request, **_: sent.append(request.headers["User-Agent"]))
    head = s3.client.head_object(Bucket=s3.name, Key="pg/a.bin")  # boto3's own parsing, to compare with
    assert source.modified("a.bin") == head["LastModified"]
    assert source.client.get_object(Bucket=s3.name, Key="pg/a.bin")["LastModified"] == head["LastModified"]
    assert source.read_bytes("a.bin") == b"x" * 100
    assert sent == [f"{USER_AGENT} Botocore/{botocore.__version__}".encode()] * 2
    assert USER_AGENT.startswith("restoreproof/")


@pytest.mark.parametrize("name", ["../secret.txt", "backup/../../secret.txt", "/etc/passwd", "backup//x"])
def test_a_name_leading_out_of_the_source_is_refused_naming_it(s3: Bucket, tmp_path: Path, name: str) -> None:
    s3.upload(tree(tmp_path / "repo"), "pg")
    source = S3Source(s3.url("pg"))
    for read in (source.exists, source.is_dir, source.list_dir, source.read_bytes, source.size):
        with pytest.raises(SourceError, match=rf"^path {name!r} leaves the source s3://{s3.name}/pg$"):
            read(name)


def test_reads_are_ranged_gets_and_small_reads_at_the_start_share_one(s3: Bucket, tmp_path: Path) -> None:
    root = tree(tmp_path / "repo")
    s3.upload(root, "")
    source = S3Source(s3.url())
    blob = (root / "big/blob.bin").read_bytes()
    before = source.stats
    assert source.read_bytes("big/blob.bin", 0, 8) == blob[:8]
    assert source.read_bytes("big/blob.bin", 0, 16) == blob[:16]
    assert source.read_bytes("big/blob.bin", 100, HEAD_BYTES - 100) == blob[100:HEAD_BYTES]
    after_head = source.stats
    assert after_head.requests["GetObject"] - before.requests["GetObject"] == 1  # one GET of the head
    assert after_head.bytes_by_path["big/blob.bin"] == HEAD_BYTES
    assert source.read_bytes("big/blob.bin", 40_000, 5_000) == blob[40_000:45_000]
    assert source.read_bytes("big/blob.bin", len(blob) - 10, 1_000) == blob[-10:]  # cut at the end
    assert source.read_bytes("big/blob.bin", len(blob), 10) == b""  # past the end: no request
    assert source.read_bytes("backup/demo1/backup.info") == (root / "backup/demo1/backup.info").read_bytes()
    assert source.read_bytes("archive/demo1/15-1/0000000100000000/seg-a") == b""  # empty: no request
    small = (root / "small.bin").read_bytes()  # 20 KiB: fetched whole by its first read, then kept
    assert source.read_bytes("small.bin", 0, 16) == small[:16]
    assert source.read_bytes("small.bin", len(small) - 100, 100) == small[-100:]
    stats = source.stats
    assert stats.requests["GetObject"] - before.requests["GetObject"] == 5
    assert stats.bytes_by_path == {"big/blob.bin": HEAD_BYTES + 5_000 + 10, "backup/demo1/backup.info": 15,
                                   "small.bin": len(small)}
    # A whole small file is one GET without a Range.
    assert stats.whole_reads == {"backup/demo1/backup.info": 1, "small.bin": 1}
    assert stats.bytes_read == sum(stats.bytes_by_path.values())
    with pytest.raises(SourceError, match=rf"^s3://{s3.name}/backup/nope does not exist \(not in the listing"):
        source.read_bytes("backup/nope")
    with pytest.raises(SourceError, match=r"^s3://.*/backup/demo1 does not exist \(a folder, not an object\)$"):
        source.size("backup/demo1")


def test_a_whole_object_read_is_checked_against_s3s_checksum_and_a_ranged_read_gets_none(s3: Bucket) -> None:
    from botocore.httpchecksum import StreamingChecksumBody

    small, big = b"s" * (20 * KiB), os.urandom(100 * KiB)
    s3.put("sql/small.trn", small, ChecksumAlgorithm="CRC32")
    s3.put("sql/big.bak", big, ChecksumAlgorithm="CRC32")
    source = S3Source(s3.url("sql"))
    sent: list[dict[str, str]] = []
    bodies: list[tuple[Any, Any]] = []
    source.client.meta.events.register("before-send.s3.GetObject", lambda request, **_: sent.append(
        {name.lower(): (value.decode() if isinstance(value, bytes) else value) for name, value in request.headers.items()}))
    source.client.meta.events.register("after-call.s3.GetObject", lambda parsed, **_: bodies.append(
        (parsed["Body"], parsed.get("ChecksumCRC32"))))
    assert source.read_bytes("small.trn", 0, 16) == small[:16]  # a small object: fetched whole
    assert source.read_bytes("big.bak", 50_000, 100) == big[50_000:50_100]
    whole, ranged = sent
    assert whole["x-amz-checksum-mode"] == "ENABLED" and "range" not in whole
    assert ranged["range"] == "bytes=50000-50099"  # botocore asks on every GET; S3 gives none for a range
    listed = {path: source.listed(path).etag for path in ("small.trn", "big.bak")}
    assert (whole["if-match"], ranged["if-match"]) == (listed["small.trn"], listed["big.bak"])
    # botocore checks the whole object's body against the CRC32 S3 gave as it is read; not a range's.
    assert isinstance(bodies[0][0], StreamingChecksumBody)
    assert bodies[0][1] == base64.b64encode(zlib.crc32(small).to_bytes(4, "big")).decode()
    assert not isinstance(bodies[1][0], StreamingChecksumBody) and bodies[1][1] is None


def test_an_object_changed_since_the_listing_is_never_read_as_the_same_file(s3: Bucket, tmp_path: Path) -> None:
    s3.upload(tree(tmp_path / "repo"), "pg")
    source = S3Source(s3.url("pg"))
    listed = source.object_info("big/blob.bin")
    s3.put("pg/big/blob.bin", b"rewritten")
    url = f"s3://{s3.name}/pg/big/blob.bin"
    with pytest.raises(SourceError, match=rf"^{url} changed since the source was listed \(its ETag is no longer "
                                          r"the one listed; GetObject: PreconditionFailed, HTTP 412\)$"):
        source.read_bytes("big/blob.bin", 20_000, 100)
    s3.client.delete_object(Bucket=s3.name, Key="pg/top.txt")
    with pytest.raises(SourceError) as raised:
        source.check_unchanged(["big/blob.bin", "top.txt", "backup/demo1/backup.info"])
    now = s3.client.head_object(Bucket=s3.name, Key="pg/big/blob.bin")
    assert str(raised.value) == (
        f"2 object(s) of s3://{s3.name}/pg changed since the source was listed: {url}: size 102400 bytes when "
        f"listed, 9 now, ETag {listed.etag} when listed, {now['ETag']} now; s3://{s3.name}/pg/top.txt: gone since "
        "the source was listed")
    s3.put("pg/backup/demo1/L1/backup.manifest", b"n" * 100)  # same size, other bytes
    with pytest.raises(SourceError, match=rf"^s3://{s3.name}/pg/backup/demo1/L1/backup.manifest changed since the "
                                          r"source was listed: ETag .+ when listed, .+ now$"):
        source.object_info("backup/demo1/L1/backup.manifest")  # a checksum only of the object listed
    fresh = source.check_unchanged(["backup/demo1/backup.info"])
    assert fresh["backup/demo1/backup.info"].etag == source.object_info("backup/demo1/backup.info").etag


def http_date(moment: Any) -> str:
    from email.utils import format_datetime

    return format_datetime(moment.replace(microsecond=0), usegmt=True)


def test_a_store_that_gives_no_etag_is_read_held_to_the_listed_time_and_a_change_is_still_found(
        s3: Bucket, tmp_path: Path) -> None:
    s3.upload(tree(tmp_path / "repo"), "pg")
    blob = bytes(range(256)) * 400
    url = f"s3://{s3.name}/pg/big/blob.bin"
    with LeavingOut(s3.endpoint, elements={"ETag"}, headers={"ETag"}) as store:
        source = S3Source(s3.url("pg"), S3Settings(endpoint_url=store.url))
        listed = source.listed("big/blob.bin")
        assert listed.etag is None
        assert source.fingerprint("big/blob.bin") is None  # nothing tells two versions of one second apart
        assert source.read_bytes("big/blob.bin", 20_000, 100) == blob[20_000:20_100]
        # Held to the listed LastModified instead of an ETag.
        gets = [asked for method, path, asked in store.requests
                if method == "GET" and path.startswith(f"/{s3.name}/pg/big/blob.bin")]
        assert len(gets) == 1 and "If-Match" not in gets[0]
        assert gets[0]["If-Unmodified-Since"] == http_date(listed.last_modified)
        assert source.check_unchanged(["big/blob.bin"])["big/blob.bin"].etag is None
        time.sleep(1.1)  # a later second: rewritten with as many bytes, only its LastModified tells
        s3.put("pg/big/blob.bin", blob[::-1])
        now = s3.client.head_object(Bucket=s3.name, Key="pg/big/blob.bin")["LastModified"]
        with pytest.raises(SourceError) as raised:
            source.read_bytes("big/blob.bin", 30_000, 100)
        assert str(raised.value) == (
            f"{url} changed since the source was listed (modified after its listed LastModified "
            f"{listed.last_modified.replace(microsecond=0).isoformat()}, the store having listed no ETag; GetObject "
            "with If-Unmodified-Since: PreconditionFailed, HTTP 412)")
        with pytest.raises(SourceError) as raised:
            source.check_unchanged(["big/blob.bin", "top.txt"])
        assert str(raised.value) == (
            f"1 object(s) of s3://{s3.name}/pg changed since the source was listed: {url}: LastModified "
            f"{listed.last_modified.replace(microsecond=0).isoformat()} when listed, "
            f"{now.replace(microsecond=0).isoformat()} now (the store gives no ETag)")


@pytest.mark.parametrize("left_out", ["Size", "LastModified"])
def test_a_listing_without_a_field_it_needs_is_an_error_naming_the_object(s3: Bucket, left_out: str) -> None:
    s3.put("pg/one.bak", b"TAPE")
    with LeavingOut(s3.endpoint, elements={left_out}) as store, pytest.raises(SourceError) as raised:
        S3Source(s3.url("pg"), S3Settings(endpoint_url=store.url))
    assert str(raised.value) == (f"s3://{s3.name}/pg/one.bak: the S3 endpoint's ListObjectsV2 response gives no "
                                 f"{left_out} for the object; restoreproof cannot read an object without its "
                                 f"{left_out}")


def test_a_head_without_a_field_it_needs_is_an_error_naming_the_object(s3: Bucket) -> None:
    s3.put("pg/one.bak", b"TAPE")
    with LeavingOut(s3.endpoint, headers={"Last-Modified"}) as store:
        source = S3Source(s3.url("pg"), S3Settings(endpoint_url=store.url))
        with pytest.raises(SourceError) as raised:
            source.check_unchanged(["one.bak"])
    assert str(raised.value) == (f"s3://{s3.name}/pg/one.bak: the S3 endpoint's HeadObject response gives no "
                                 "LastModified for the object; restoreproof cannot read an object without its "
                                 "LastModified")


def test_object_info_gives_the_checksum_s3_keeps(s3: Bucket) -> None:
    body = b"backup bytes" * 1000
    s3.put("sql/a.bak", body, ChecksumAlgorithm="SHA256")
    s3.put("sql/b.bak", b"x")
    source = S3Source(s3.url("sql"))
    info = source.object_info("a.bak")
    assert info.checksum_algorithm == "SHA256"
    assert info.checksum == base64.b64encode(hashlib.sha256(body).digest()).decode()
    assert (info.size, info.key, info.url) == (len(body), "sql/a.bak", f"s3://{s3.name}/sql/a.bak")
    assert info.etag.strip('"') == hashlib.md5(body).hexdigest()
    heads = source.stats.requests["HeadObject"]
    assert source.object_info("a.bak") == info and source.stats.requests["HeadObject"] == heads  # kept
    plain = source.object_info("b.bak")
    # botocore sends a CRC32 with every upload unless told otherwise: S3 keeps it.
    assert plain.checksum_algorithm in (None, "CRC32")


def test_unfinished_multipart_uploads_under_the_prefix_are_listed(s3: Bucket) -> None:
    s3.put("sql/SRV/db/FULL/SRV_db_FULL_20261124_010000.bak", b"TAPE")
    started = s3.client.create_multipart_upload(Bucket=s3.name, Key="sql/SRV/db/FULL/SRV_db_FULL_20261125_010000.bak")
    s3.client.upload_part(Bucket=s3.name, Key="sql/SRV/db/FULL/SRV_db_FULL_20261125_010000.bak", PartNumber=1,
                          UploadId=started["UploadId"], Body=b"p" * 1000)
    s3.client.create_multipart_upload(Bucket=s3.name, Key="elsewhere/x.bak")  # not under the prefix
    source = S3Source(s3.url("sql"))
    (upload,) = source.incomplete_uploads()
    assert upload.path == "SRV/db/FULL/SRV_db_FULL_20261125_010000.bak" and upload.upload_id == started["UploadId"]
    assert upload.initiated is not None and upload.initiated.tzinfo is not None
    assert not source.exists(upload.path)  # never an object, never read


def test_several_thousand_objects_are_listed_in_parallel_with_only_the_pages_needed(
        s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ola's layout: 2 servers x 10 databases x FULL/DIFF/LOG; one LOG folder needs three pages (a
    # thousand keys each).
    keys = [f"ola/SRV{s}/db{d}/{kind}/SRV{s}_db{d}_{kind}_{n:05d}.trn"
            for s in range(2) for d in range(10) for kind in ("FULL", "DIFF", "LOG")
            for n in range(2_100 if (s, d, kind) == (0, 0, "LOG") else 10)]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda key: s3.put(key, b"x"), keys))
    in_flight, most, lock = [0], [0], threading.Lock()
    listing = S3Source._list

    def watched(self: S3Source, prefix: str, delimited: bool) -> Any:
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        try:
            return listing(self, prefix, delimited)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(S3Source, "_list", watched)
    source = S3Source(s3.url("ola"), S3Settings(threads=8))
    assert len(source.paths()) == len(keys) == 2_690
    assert source.list_dir("SRV0/db0") == ["DIFF", "FULL", "LOG"]
    # Delimited: the prefix, 2 servers, 20 databases; then 60 folders listed whole (one of them 3 pages).
    assert source.stats.requests == {"ListObjectsV2": 1 + 2 + 20 + 59 + 3, "ListMultipartUploads": 1}
    assert most[0] > 1, "the folders were listed one after another"


def test_a_key_that_is_no_path_is_set_aside_by_name(s3: Bucket) -> None:
    s3.put("sql/db/FULL/a.bak", b"TAPE")
    s3.put("sql/db//b.bak", b"TAPE")  # an empty segment: no folder of a tree can hold it
    s3.put("sql/db/./c.bak", b"TAPE")
    source = S3Source(s3.url("sql"))
    assert source.paths() == ["db/FULL/a.bak"] and source.list_dir("db") == ["FULL"]
    assert source.skipped == ["sql/db/./c.bak", "sql/db//b.bak"]


# -- archive storage classes -----------------------------------------------------------------------

def moto_restores(s3: Bucket, transition: dict[str, Any] | None) -> None:
    """How moto's server moves an object's restore along (None: at once, its default): its state manager."""
    import ssl
    import urllib.request

    assert s3.endpoint.ca_file is not None
    path, body = (("set-transition", {"model_name": "s3::keyrestore", "transition": transition}) if transition
                  else ("unset-transition", {"model_name": "s3::keyrestore"}))
    request = urllib.request.Request(f"{s3.endpoint.url}/moto-api/state-manager/{path}", method="POST",
                                     data=json.dumps(body).encode())
    urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(s3.endpoint.ca_file))).read()


def archived_message(url: str, storage_class: str, state: str) -> str:
    return (f"{url} is in the archive storage class {storage_class} and {state}: it cannot be read until it is "
            "restored (S3 RestoreObject, e.g. `aws s3api restore-object`) and the restore has completed")


def test_objects_in_archive_storage_classes_are_named_with_their_class_and_never_read(s3: Bucket) -> None:
    from verification.errors import ArchivedObjectError

    body = b"backup bytes " * 100
    for storage_class in ("STANDARD", "GLACIER", "DEEP_ARCHIVE", "GLACIER_IR", "INTELLIGENT_TIERING"):
        s3.put(f"sql/{storage_class}.bak", body, StorageClass=storage_class)
    s3.put("sql/restored.bak", body, StorageClass="DEEP_ARCHIVE")
    s3.client.restore_object(Bucket=s3.name, Key="sql/restored.bak", RestoreRequest={"Days": 2})
    # The listing names each object's class: what the source goes by.
    listed = {o["Key"]: o["StorageClass"] for o in s3.client.list_objects_v2(Bucket=s3.name)["Contents"]}
    assert listed["sql/GLACIER.bak"] == "GLACIER" and listed["sql/GLACIER_IR.bak"] == "GLACIER_IR"
    source = S3Source(s3.url("sql"))
    assert {path: source.listed(path).storage_class for path in source.paths()} == {
        "STANDARD.bak": "STANDARD", "GLACIER.bak": "GLACIER", "DEEP_ARCHIVE.bak": "DEEP_ARCHIVE",
        "GLACIER_IR.bak": "GLACIER_IR", "INTELLIGENT_TIERING.bak": "INTELLIGENT_TIERING",
        "restored.bak": "DEEP_ARCHIVE"}
    url = f"s3://{s3.name}/sql"
    assert source.archived == {
        "DEEP_ARCHIVE.bak": archived_message(f"{url}/DEEP_ARCHIVE.bak", "DEEP_ARCHIVE", "has not been restored"),
        "GLACIER.bak": archived_message(f"{url}/GLACIER.bak", "GLACIER", "has not been restored")}
    # One HEAD per object in an archive class (is a restored copy there?), none for the others.
    assert source.stats.requests["HeadObject"] == 3
    for path, storage_class in (("GLACIER.bak", "GLACIER"), ("DEEP_ARCHIVE.bak", "DEEP_ARCHIVE")):
        with pytest.raises(ArchivedObjectError) as raised:
            source.read_bytes(path, 0, 8)
        assert (str(raised.value), raised.value.storage_class) == (source.archived[path], storage_class)
        assert "access denied" not in str(raised.value)
    assert "GetObject" not in source.stats.requests  # refused here, not asked of S3
    # Instant Retrieval, the other classes and a restored copy read as any object does.
    assert [source.read_bytes(p) for p in ("GLACIER_IR.bak", "INTELLIGENT_TIERING.bak", "restored.bak",
                                           "STANDARD.bak")] == [body] * 4
    # Still files of the tree: a backup that exists and cannot be read now is not a missing one.
    assert source.exists("GLACIER.bak") and source.size("GLACIER.bak") == len(body)
    assert source.list_dir("") == sorted(listed_key.removeprefix("sql/") for listed_key in listed)


def test_an_object_archived_after_the_listing_says_so_when_read(s3: Bucket) -> None:
    from verification.errors import ArchivedObjectError

    s3.put("sql/a.bak", b"TAPE" * 10)
    source = S3Source(s3.url("sql"))
    # A lifecycle rule moved it after the listing: same bytes, same ETag, another class.
    s3.client.copy_object(Bucket=s3.name, Key="sql/a.bak", CopySource={"Bucket": s3.name, "Key": "sql/a.bak"},
                          StorageClass="GLACIER", MetadataDirective="REPLACE")
    url = f"s3://{s3.name}/sql/a.bak"
    with pytest.raises(ArchivedObjectError) as raised:
        source.read_bytes("a.bak")
    assert str(raised.value) == archived_message(url, "GLACIER", "is not restored (GetObject: InvalidObjectState, "
                                                                  "HTTP 403)")
    assert raised.value.storage_class == "GLACIER"


@pytest.mark.parametrize("storage_class", ["GLACIER", "DEEP_ARCHIVE"])
def test_an_object_moved_to_an_archive_class_since_the_plan_is_a_change_naming_it(s3: Bucket,
                                                                                  storage_class: str) -> None:
    s3.put("pg/backup/full.gz", b"F" * 4000)
    s3.put("pg/backup/ir.gz", b"I" * 4000)
    s3.put("pg/backup/same.gz", b"S" * 4000)
    source = S3Source(s3.url("pg"))
    listed = source.listed("backup/full.gz")
    assert listed.storage_class == "STANDARD"
    # A lifecycle rule moved them after the listing: same bytes, same ETag, same size, another class.
    for key, moved_to in (("pg/backup/full.gz", storage_class), ("pg/backup/ir.gz", "GLACIER_IR")):
        s3.client.copy_object(Bucket=s3.name, Key=key, CopySource={"Bucket": s3.name, "Key": key},
                              StorageClass=moved_to, MetadataDirective="REPLACE")
    head = s3.client.head_object(Bucket=s3.name, Key="pg/backup/full.gz")
    assert (head["ETag"], head["ContentLength"], head["StorageClass"]) == (listed.etag, 4000, storage_class)
    url = f"s3://{s3.name}/pg/backup/full.gz"
    said = (f"moved to storage class {storage_class} since the plan (archived objects cannot be read until "
            "restored)")
    with pytest.raises(SourceError) as raised:
        source.check_unchanged(["backup/full.gz", "backup/ir.gz", "backup/same.gz"])
    # Instant Retrieval is read as any class: no change to speak of.
    assert str(raised.value) == (f"1 object(s) of s3://{s3.name}/pg changed since the source was listed: "
                                 f"{url}: {said}")
    assert set(source.check_unchanged(["backup/ir.gz", "backup/same.gz"])) == {"backup/ir.gz", "backup/same.gz"}


def test_an_object_whose_restore_is_in_progress_is_not_read_until_it_completes(s3: Bucket) -> None:
    from verification.errors import ArchivedObjectError

    seconds = 3.0  # how long moto's restore stays in progress, from the first time it is asked
    put = time.monotonic()
    s3.put("pg/archive/000000010000000000000001", b"W" * 64, StorageClass="GLACIER")
    s3.client.restore_object(Bucket=s3.name, Key="pg/archive/000000010000000000000001", RestoreRequest={"Days": 1})
    moto_restores(s3, {"progression": "time", "seconds": seconds})
    try:
        time.sleep(max(0.0, put + seconds + 0.1 - time.monotonic()))
        source = S3Source(s3.url("pg"))
        url = f"s3://{s3.name}/pg/archive/000000010000000000000001"
        why = archived_message(url, "GLACIER", "is being restored (the restore is still in progress)")
        assert source.archived == {"archive/000000010000000000000001": why}
        with pytest.raises(ArchivedObjectError, match=r"restore is still in progress"):
            source.read_bytes("archive/000000010000000000000001")
        time.sleep(seconds + 0.2)
        # The restore completed: a new listing reads the restored copy.
        again = S3Source(s3.url("pg"))
        assert again.archived == {} and again.read_bytes("archive/000000010000000000000001") == b"W" * 64
    finally:
        moto_restores(s3, None)


@pytest.mark.parametrize(("header", "said"), [
    (None, "has not been restored"),
    ('ongoing-request="true"', "is being restored (the restore is still in progress)"),
    ('ongoing-request="false", expiry-date="Fri, 27 Nov 2026 00:00:00 GMT"', None),
    ('ongoing-request = "false"', None),
    ("something else", "gives a restore status restoreproof does not know ('something else')"),
])
def test_what_a_restore_header_says(header: str | None, said: str | None) -> None:
    from verification.sources.s3 import restore_state

    assert restore_state(header) == said


# -- planning from S3 equals planning from a folder ------------------------------------------------

def plans_of(settings: Settings, where: str) -> tuple[str, Any, dict[str, Any]]:
    from verification.pipeline import plan_source

    engine, source, planned = plan_source(settings, where)
    data = json.loads(json.dumps({"plans": [dataclasses.asdict(p) for p in planned.plans],
                                  "unreadable": [dataclasses.asdict(u) for u in planned.unreadable]}, default=str))
    return engine.name, source, data


def test_the_sql_server_corpus_in_olas_layout_plans_the_same_from_s3(s3: Bucket, mssql_corpus: Path,
                                                                     tmp_path: Path) -> None:
    layout = ola_layout(mssql_corpus)
    layout["README.txt"] = mssql_corpus / "README.md"  # not a backup: listed with its first bytes, both ways
    folder = lay_out(layout, tmp_path / "ola")
    s3.upload(folder, "sqlbackups", layout)
    settings = Settings()
    engine, source, from_s3 = plans_of(settings, s3.url("sqlbackups"))
    assert isinstance(source, S3Source) and engine == "mssql"
    same_times(folder, source)
    local_engine, _, from_folder = plans_of(settings, str(folder))
    assert (engine, from_s3) == (local_engine, from_folder)
    databases = {p["database"] for p in from_s3["plans"]}
    assert {"StopAt", "db1", "doublediff", "CGE100LAP-42\\SQL2008R2SP2/RestoreTimeStripe"} <= databases
    assert len(databases) == 22
    unread = {u["path"]: u["kind"] for u in from_s3["unreadable"]}
    assert unread["README.txt"] == "not-a-backup"
    assert sorted(kind for path, kind in unread.items() if "SharePoint" in path) == ["needs-server"] * 2
    stats = source.stats
    sizes = {path: source.size(path) for path in source.paths()}
    # Headers only: at most 64 KiB of each object (its head and its trailer; an object of 64 KiB at
    # most in one GET, whole), every object read, none bigger read whole.
    assert set(stats.bytes_by_path) == set(sizes)
    assert max(stats.bytes_by_path.values()) <= 64 * KiB
    assert all(stats.bytes_by_path[p] <= HEADER_BYTES < size for p, size in sizes.items() if size > SMALL_BYTES)
    assert {p for p, size in sizes.items() if size <= SMALL_BYTES} == set(stats.whole_reads)
    assert set(stats.whole_reads.values()) == {1}
    small = len(stats.whole_reads)
    assert 20 < small < len(sizes) - 20  # the corpus has both kinds
    # A natively compressed object is known by its head alone: one GET; any other, its head and its end.
    compressed = sum(1 for kind in unread.values() if kind == "needs-server")
    assert compressed == 2
    assert stats.requests["GetObject"] == small + compressed + 2 * (len(sizes) - small - compressed)
    assert "HeadObject" not in stats.requests


def test_archived_sql_server_backups_are_named_unread_and_keep_the_run_from_passing(
        s3: Bucket, mssql_corpus: Path, tmp_path: Path) -> None:
    """The differential (the first file found, so detection reads past it) and the newest log of the
    chain in GLACIER: each named with its class, never read, never "corrupt"; the rest is planned."""
    from typer.testing import CliRunner

    from verification.cli import app
    from verification.config import load_settings
    from verification.pipeline import run_verification

    layout = {k: v for k, v in ola_layout(mssql_corpus).items() if k.startswith("SQL2008/RestoreTimeClean/")}
    archived = ["SQL2008/RestoreTimeClean/DIFF/SQL2008_RestoreTimeClean_DIFF_20261124_002600.bak",
                "SQL2008/RestoreTimeClean/LOG/SQL2008_RestoreTimeClean_LOG_20261124_002900.trn"]
    for key, file in layout.items():
        s3.put(f"rtc/{key}", file.read_bytes(), StorageClass="GLACIER" if key in archived else "STANDARD")
    engine, source, planned = plans_of(Settings(), s3.url("rtc"))
    assert engine == "mssql"
    assert [(u["path"], u["kind"], u["database"], u["reason"]) for u in planned["unreadable"]] == [
        (path, "archived", None, archived_message(f"{s3.url('rtc')}/{path}", "GLACIER", "has not been restored"))
        for path in archived]
    assert not set(archived) & set(source.stats.bytes_by_path)  # never read
    (plan,) = planned["plans"]
    assert plan["chain"]["status"] == "complete" and not set(archived) & set(plan["files"])
    # `plan` says so too: a complete chain, and files nobody could read (exit 2, not 0).
    said = CliRunner().invoke(app, ["plan", s3.url("rtc")])
    assert said.exit_code == 2, said.output
    assert (f"archived: {archived[1]}: {s3.url('rtc')}/{archived[1]} is in the archive storage class GLACIER and "
            "has not been restored") in said.stdout  # a result of the plan
    settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports",
                             results_url=f"sqlite:///{tmp_path / 'r.db'}")
    # Uploaded now, both are newer than the chain's end (2016): the latest point may be in them.
    assert [u["files"] for u in plan["chain"]["unread"]] == [[path] for path in archived]
    assert all("may be newer than the chain's last backup" in u["message"] for u in plan["chain"]["unread"])
    report = run_verification(settings, s3.url("rtc"), target_kind="offline").report
    assert report.verdict == "error"
    assert [(u.path, str(u.kind)) for u in report.unreadable] == [(path, "archived") for path in archived]
    (database,) = report.databases
    assert database.verdict == "error" and database.reasons[0].startswith(f"not judged: {archived[0]} could not")


def test_a_log_archived_mid_chain_leaves_the_database_in_error_never_failed(
        s3: Bucket, mssql_corpus: Path, tmp_path: Path) -> None:
    """A real gap: the middle log of a real chain in GLACIER. The chain is broken, but the missing log is
    in a file nobody could read, so nothing proves the backups wrong: error, naming it, not failed."""
    from verification.config import load_settings
    from verification.pipeline import run_verification

    layout = {k: v for k, v in ola_layout(mssql_corpus).items() if k.startswith("SQL2008/RestoreTimeClean/")}
    middle = "SQL2008/RestoreTimeClean/LOG/SQL2008_RestoreTimeClean_LOG_20261124_002800.trn"  # 2nd after the diff
    assert layout[middle].name == "RestoreTimeClean2_2.trn"
    for key, file in layout.items():
        s3.put(f"gap/{key}", file.read_bytes(), StorageClass="GLACIER" if key == middle else "STANDARD")
    _, _, planned = plans_of(Settings(), s3.url("gap"))
    (plan,) = planned["plans"]
    assert plan["chain"]["status"] == "broken"
    assert [u["files"] for u in plan["chain"]["unread"]] == [[middle]]
    settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports",
                             results_url=f"sqlite:///{tmp_path / 'r.db'}")
    (database,) = run_verification(settings, s3.url("gap"), target_kind="offline").report.databases
    assert database.verdict == "error"
    first = database.reasons[0]
    assert first.startswith(f"not judged: {middle} could not be read (archived: {s3.url('gap')}/{middle} is in the "
                            "archive storage class GLACIER and has not been restored")
    assert first.endswith(") and may hold the backups its chain lacks")
    assert any(r.startswith("chain broken:") for r in database.reasons)


def test_a_pgbackrest_repository_plans_the_same_from_s3(s3: Bucket, captured_repo: Path) -> None:
    s3.upload(captured_repo, "pgbackrest/repo1")
    settings = Settings()
    engine, source, from_s3 = plans_of(settings, s3.url("pgbackrest/repo1"))
    assert engine == "postgres" and isinstance(source, S3Source)
    same_times(captured_repo, source)
    assert plans_of(settings, str(captured_repo))[::2] == (engine, from_s3)
    (plan,) = from_s3["plans"]
    assert plan["database"] == "demo1" and plan["chain"]["status"] == "complete"
    assert [b["type"] for b in plan["chain"]["backups"]] == ["full", "diff", "incr"]
    # Read whole, once each, nothing else but the listing: the info files present (whether they are encrypted is
    # told from their content), and the chain's manifests (each loaded as pgBackRest loads it).
    assert source.stats.whole_reads == {
        "backup/demo1/backup.info": 1, "backup/demo1/backup.info.copy": 1, "archive/demo1/archive.info": 1,
        **{f"backup/demo1/{label}/backup.manifest": 1 for label in LABELS}}
    assert set(source.stats.requests) == {"ListObjectsV2", "ListMultipartUploads", "GetObject"}


# -- settings --------------------------------------------------------------------------------------

def test_explicit_settings_reach_the_endpoint_without_the_aws_environment(s3: Bucket, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    s3.upload(tree(tmp_path / "repo"), "pg")
    from tests.unit.sources.conftest import isolate_aws
    from verification.demo.s3_endpoint import DEMO_ACCESS_KEY, DEMO_SECRET_KEY

    isolate_aws(monkeypatch, tmp_path)
    monkeypatch.setenv("RESTOREPROOF_S3__ENDPOINT_URL", s3.endpoint.url)
    monkeypatch.setenv("RESTOREPROOF_S3__CA_BUNDLE", str(s3.endpoint.ca_file))
    monkeypatch.setenv("RESTOREPROOF_S3__ACCESS_KEY_ID", DEMO_ACCESS_KEY)
    monkeypatch.setenv("RESTOREPROOF_S3__SECRET_ACCESS_KEY", DEMO_SECRET_KEY)
    monkeypatch.setenv("RESTOREPROOF_S3__REGION", "eu-west-1")
    monkeypatch.setenv("RESTOREPROOF_S3__ADDRESSING_STYLE", "path")
    monkeypatch.setenv("RESTOREPROOF_S3__THREADS", "3")
    from verification.config import load_settings
    from verification.pipeline import open_source
    from verification.redaction import configured_secrets

    settings = load_settings()
    assert settings.s3.threads == 3 and settings.s3.addressing_style == "path"
    assert {DEMO_ACCESS_KEY, DEMO_SECRET_KEY} <= set(configured_secrets(settings))
    source = open_source(s3.url("pg"), settings)
    assert isinstance(source, S3Source) and source.list_dir("") == ["archive", "backup", "big", "small.bin", "top.txt"]
    assert source.client.meta.region_name == "eu-west-1" and source.parallel_reads == 3
    assert set(source.secrets()) == {DEMO_ACCESS_KEY, DEMO_SECRET_KEY}
    assert isinstance(open_source(str(tmp_path / "repo"), settings), LocalSource)


def test_half_a_key_pair_is_a_configuration_error() -> None:
    from verification.config import load_settings
    from verification.errors import ConfigError

    with pytest.raises(ConfigError, match=r"s3: Value error, give both s3.access_key_id and s3.secret_access_key"):
        load_settings(None, s3={"access_key_id": "AKIAONLYHALF"})
    with pytest.raises(ConfigError, match=r"s3.endpoint_url: Value error, must be an http:// or https:// URL"):
        load_settings(None, s3={"endpoint_url": "127.0.0.1:9000"})


def test_an_s3_source_passes_through_unchanged_wherever_a_source_is_named(s3: Bucket, captured_repo: Path) -> None:
    from typer.testing import CliRunner

    from verification.cli import app
    from verification.orchestration import NightlyParams

    url = s3.url("pgbackrest/repo1")
    assert NightlyParams.from_mapping({"source": url}).request().source == url
    s3.upload(captured_repo, "pgbackrest/repo1")
    s3.client.create_multipart_upload(Bucket=s3.name, Key="pgbackrest/repo1/backup/demo1/half.manifest")
    result = CliRunner().invoke(app, ["plan", url, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["source"] == url and data["databases"][0]["chain"]["status"] == "complete"
    assert [u["path"] for u in data["incomplete_uploads"]] == ["backup/demo1/half.manifest"]
    assert "incomplete upload: backup/demo1/half.manifest (multipart upload" in result.stderr


def test_a_run_from_s3_reports_its_url_and_unfinished_uploads(s3: Bucket, captured_repo: Path,
                                                              tmp_path: Path) -> None:
    from verification.config import load_settings
    from verification.pipeline import run_verification

    s3.upload(captured_repo, "repo")
    started = s3.client.create_multipart_upload(Bucket=s3.name, Key="repo/backup/demo1/20261125-010000F/x.pgbr")
    settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports",
                             results_url=f"sqlite:///{tmp_path / 'r.db'}")
    run = run_verification(settings, s3.url("repo"), target_kind="offline")
    report = json.loads(run.json_path.read_text())
    assert report["source"] == s3.url("repo") and report["verdict"] == "error"  # offline: nothing restored
    assert [(u["path"], u["upload_id"]) for u in report["incomplete_uploads"]] == [
        ("backup/demo1/20261125-010000F/x.pgbr", started["UploadId"])]
    assert "incomplete_uploads" not in report["host"]
    html = run.html_path.read_text()
    assert "Unfinished multipart uploads" in html and started["UploadId"] in html
    assert run.run.incomplete_uploads == run.report.incomplete_uploads


# -- errors: each names the URL and what is wrong, leaves nothing running, and keeps keys out -------

KNOWN_KEY, KNOWN_SECRET = "AKIARESTOREPROOFKEY1", "Sup3r/Secret+Key-That-Must-Not-Leak"


def known_keys(**extra: Any) -> S3Settings:
    from pydantic import SecretStr

    return S3Settings(access_key_id=SecretStr(KNOWN_KEY), secret_access_key=SecretStr(KNOWN_SECRET), **extra)


def connections_to(port: int) -> int:
    import psutil

    return sum(1 for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port)


def failing(url: str, settings: S3Settings, port: int, caplog: pytest.LogCaptureFixture) -> str:
    """The message of opening `url`, after checking nothing was left behind and no key was said."""
    import logging

    before = connections_to(port)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SourceError) as raised:
        S3Source(url, settings)
    message = str(raised.value)
    assert [t.name for t in threading.enumerate() if t.name.startswith("restoreproof-s3")] == []
    assert connections_to(port) <= before, "the failed source kept a connection open"
    written = message + repr(raised.value) + caplog.text
    assert KNOWN_KEY not in written and KNOWN_SECRET not in written
    return message


def test_a_missing_bucket(s3: Bucket, caplog: pytest.LogCaptureFixture) -> None:
    message = failing("s3://no-such-bucket-here/sql", known_keys(), s3.endpoint.port, caplog)
    assert message.startswith(f"s3://no-such-bucket-here/sql: the bucket 'no-such-bucket-here' does not exist at "
                              f"{s3.endpoint.url} (ListObjectsV2: NoSuchBucket, HTTP 404)")


def test_a_missing_prefix(s3: Bucket, caplog: pytest.LogCaptureFixture) -> None:
    s3.put("sql/x.bak", b"x")
    s3.client.create_multipart_upload(Bucket=s3.name, Key="nothing/here/a.bak")
    message = failing(s3.url("nothing/here"), known_keys(), s3.endpoint.port, caplog)
    assert message == (f"s3://{s3.name}/nothing/here holds no objects: the prefix does not exist or is empty "
                       "(1 unfinished multipart uploads are under it)")
    assert failing(s3.url("sq"), known_keys(), s3.endpoint.port, caplog).endswith("the prefix does not exist or is empty")


def test_an_unreachable_endpoint_fails_fast(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    from tests.unit.sources.conftest import isolate_aws
    from verification.demo.s3_endpoint import _free_port

    isolate_aws(monkeypatch, tmp_path)
    port = _free_port()
    sent: list[str] = []
    counting = S3Source._count_request

    def count(self: S3Source, event_name: str, **kw: Any) -> None:  # a before-send handler answers None
        sent.append(event_name)
        counting(self, event_name, **kw)

    monkeypatch.setattr(S3Source, "_count_request", count)
    started = time.monotonic()
    message = failing("s3://backups/sql", known_keys(endpoint_url=f"https://127.0.0.1:{port}", region="us-east-1"),
                      port, caplog)
    assert time.monotonic() - started < 15
    assert message == (f"s3://backups/sql: cannot reach the S3 endpoint https://127.0.0.1:{port}: could not connect "
                       "(ListObjectsV2, 3 attempts); check s3.endpoint_url (or AWS_ENDPOINT_URL) and the network")
    assert sent.count("before-send.s3.ListObjectsV2") == 3  # max_attempts is every attempt, the first included


def test_an_endpoint_that_never_answers_fails_within_its_timeouts(caplog: pytest.LogCaptureFixture,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    import socket

    from tests.unit.sources.conftest import isolate_aws

    isolate_aws(monkeypatch, tmp_path)
    with socket.socket() as silent:  # accepts connections (the kernel does) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        started = time.monotonic()
        message = failing("s3://backups/sql", known_keys(endpoint_url=f"https://127.0.0.1:{port}", region="us-east-1",
                                                         connect_timeout=1, read_timeout=1, max_attempts=2),
                          port, caplog)
        assert time.monotonic() - started < 12
    assert message.startswith(f"s3://backups/sql: cannot reach the S3 endpoint https://127.0.0.1:{port}: ")
    assert message.endswith("(ListObjectsV2, 2 attempts); check s3.endpoint_url (or AWS_ENDPOINT_URL) and the network")


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_a_certificate_not_trusted(s3: Bucket, caplog: pytest.LogCaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_CA_BUNDLE")
    s3.put("sql/x.bak", b"x")
    message = failing(s3.url("sql"), known_keys(), s3.endpoint.port, caplog)
    assert message.startswith(f"s3://{s3.name}/sql: the TLS certificate of {s3.endpoint.url} is not trusted or not "
                              "valid (")
    assert "certificate verify failed" in message
    assert message.endswith("give the CA that signed it in s3.ca_bundle (or AWS_CA_BUNDLE), or s3.verify_tls: false "
                            "for a test endpoint")
    # Told the CA, it is trusted; told not to verify, it is read too.
    assert S3Source(s3.url("sql"), S3Settings(ca_bundle=s3.endpoint.ca_file)).paths() == ["x.bak"]
    assert S3Source(s3.url("sql"), S3Settings(verify_tls=False)).paths() == ["x.bak"]


def test_a_ca_bundle_that_is_not_there(s3: Bucket, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=rf"^s3.ca_bundle {tmp_path}/ca.pem does not exist or is not a file$"):
        S3Source(s3.url("sql"), S3Settings(ca_bundle=tmp_path / "ca.pem"))


def test_no_credentials_and_an_unknown_profile(s3: Bucket, caplog: pytest.LogCaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    message = failing(s3.url("sql"), S3Settings(), s3.endpoint.port, caplog)
    assert message == (f"s3://{s3.name}/sql: no S3 credentials found: set s3.access_key_id and s3.secret_access_key, "
                       "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (s3.profile, AWS_PROFILE)")
    message = failing(s3.url("sql"), S3Settings(profile="nightly"), s3.endpoint.port, caplog)
    assert message == (f"s3://{s3.name}/sql: the AWS profile 'nightly' is not configured (s3.profile or AWS_PROFILE; "
                       "~/.aws/config)")


@pytest.fixture(scope="module")
def locked() -> Any:
    """An endpoint of its own that checks every request against IAM (moto's /moto-api/reset-auth): a
    bucket with one object, and a user whose keys are real but allowed nothing."""
    import boto3
    import requests

    from verification.demo.s3_endpoint import LocalS3Endpoint

    with LocalS3Endpoint() as endpoint:
        common = {"endpoint_url": endpoint.url, "verify": str(endpoint.ca_file), "region_name": "us-east-1",
                  "aws_access_key_id": "admin", "aws_secret_access_key": "admin-secret"}
        boto3.client("s3", **common).create_bucket(Bucket="locked-backups")
        boto3.client("s3", **common).put_object(Bucket="locked-backups", Key="sql/x.bak", Body=b"x")
        iam = boto3.client("iam", **common)
        iam.create_user(UserName="nightly")
        key = iam.create_access_key(UserName="nightly")["AccessKey"]
        # A read-only policy as often written: list the bucket, get objects, nothing about uploads.
        iam.create_user(UserName="reader")
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": "arn:aws:s3:::locked-backups"},
                {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::locked-backups/*"}]}))
        key["reader"] = iam.create_access_key(UserName="reader")["AccessKey"]
        answer = requests.post(f"{endpoint.url}/moto-api/reset-auth", data=b"0", verify=str(endpoint.ca_file), timeout=10)
        assert answer.status_code == 200, answer.text
        yield endpoint, key


@pytest.mark.parametrize(("keys", "code", "because"), [
    ("user", "AccessDenied", "the credentials used are not allowed to do this"),
    ("unknown", "InvalidAccessKeyId", "the endpoint does not know the access key"),
    ("wrong-secret", "SignatureDoesNotMatch", "the secret key does not match the access key"),
])
def test_access_denied(locked: Any, keys: str, code: str, because: str, caplog: pytest.LogCaptureFixture,
                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pydantic import SecretStr

    from tests.unit.sources.conftest import isolate_aws

    isolate_aws(monkeypatch, tmp_path)
    endpoint, key = locked
    pair = {"user": (key["AccessKeyId"], key["SecretAccessKey"]), "unknown": ("AKIANOTKNOWNANYWHERE", "nope-secret-1"),
            "wrong-secret": (key["AccessKeyId"], "this-is-not-the-secret")}[keys]
    monkeypatch.setattr(f"{__name__}.KNOWN_KEY", pair[0])
    monkeypatch.setattr(f"{__name__}.KNOWN_SECRET", pair[1])
    settings = S3Settings(endpoint_url=endpoint.url, ca_bundle=endpoint.ca_file, region="us-east-1",
                          access_key_id=SecretStr(pair[0]), secret_access_key=SecretStr(pair[1]))
    message = failing("s3://locked-backups/sql", settings, endpoint.port, caplog)
    # The prefix's own listing runs first, in the caller's thread: it is the request that says so.
    assert message == (f"access denied to s3://locked-backups/sql (ListObjectsV2: {code}, HTTP 403): {because}; check "
                       "the keys (s3.access_key_id, AWS_ACCESS_KEY_ID, the profile) and the bucket's policy")


def test_the_cli_says_an_s3_error_with_exit_2_and_no_key(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from verification.cli import app

    monkeypatch.setenv("RESTOREPROOF_S3__ACCESS_KEY_ID", KNOWN_KEY)
    monkeypatch.setenv("RESTOREPROOF_S3__SECRET_ACCESS_KEY", KNOWN_SECRET)
    result = CliRunner().invoke(app, ["plan", "s3://no-such-bucket-here/sql"])
    assert result.exit_code == 2
    assert "the bucket 'no-such-bucket-here' does not exist" in result.stderr
    assert KNOWN_KEY not in result.output + result.stderr and KNOWN_SECRET not in result.output + result.stderr


def test_whatever_an_endpoint_says_is_scrubbed_of_the_keys_signed_with() -> None:
    from botocore.exceptions import ClientError

    from verification.redaction import Redactor
    from verification.sources.s3_errors import translate

    said = ClientError({"Error": {"Code": "SlowDown", "Message": f"too fast for {KNOWN_KEY} ({KNOWN_SECRET})"},
                        "ResponseMetadata": {"HTTPStatusCode": 503}}, "GetObject")
    error = translate(said, url="s3://backups/x.bak", operation="GetObject", endpoint="https://s3.example",
                      scrub=Redactor(secrets=[KNOWN_SECRET, KNOWN_KEY]), attempts=3)
    assert str(error) == "s3://backups/x.bak: GetObject failed (SlowDown, HTTP 503: too fast for ******** (********))"
    assert error.code == "SlowDown"


def test_a_policy_without_the_uploads_listing_still_reads_the_backups_and_says_what_it_did_not_see(
        locked: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pydantic import SecretStr

    from tests.unit.sources.conftest import isolate_aws

    isolate_aws(monkeypatch, tmp_path)
    endpoint, key = locked
    reader = key["reader"]
    source = S3Source("s3://locked-backups/sql", S3Settings(
        endpoint_url=endpoint.url, ca_bundle=endpoint.ca_file, region="us-east-1",
        access_key_id=SecretStr(reader["AccessKeyId"]), secret_access_key=SecretStr(reader["SecretAccessKey"])))
    assert source.paths() == ["x.bak"] and source.read_bytes("x.bak") == b"x"
    assert source.incomplete_uploads() == []
    assert source.uploads_unlisted == (
        "unfinished multipart uploads under s3://locked-backups/sql not listed: ListMultipartUploads was refused "
        "(AccessDenied); what failed uploads left is not known (it needs s3:ListBucketMultipartUploads)")
    # A run says it too (the plan goes on: the object is a damaged backup, named as such).
    from verification.config import load_settings
    from verification.pipeline import run_verification

    settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports",
                             results_url=f"sqlite:///{tmp_path / 'r.db'}", s3=source.settings.model_dump())
    said: list[str] = []
    run = run_verification(settings, "s3://locked-backups/sql", target_kind="offline", progress=said.append)
    assert f"warning: {source.uploads_unlisted}" in said
    assert [(u.path, u.kind) for u in run.report.unreadable] == [("x.bak", "corrupt")]
    written = [f.read_bytes().decode(errors="replace") for f in (tmp_path / "reports").rglob("*") if f.is_file()]
    assert len(written) >= 3  # report.json, report.html, junit.xml, ...
    for text in [*written, *said]:
        assert reader["SecretAccessKey"] not in text and reader["AccessKeyId"] not in text


def test_an_offline_verification_checks_the_same_pages_from_s3(s3: Bucket, mssql_corpus: Path,
                                                                tmp_path: Path) -> None:
    """Beyond planning: SQL Server's page verification reads whole backups through the source (ranged
    GETs), and says the same of them from S3 as from the folder."""
    from verification.config import load_settings
    from verification.pipeline import run_verification

    layout = {k: v for k, v in ola_layout(mssql_corpus).items() if k.startswith("SQL2008/RestoreTimeClean/")}
    assert len(layout) == 8
    folder = lay_out(layout, tmp_path / "ola")
    s3.upload(folder, "rtc", layout)
    results = []
    for where in (s3.url("rtc"), str(folder)):
        settings = load_settings(None, state_dir=tmp_path / "state", report_dir=tmp_path / "reports",
                                 results_url=f"sqlite:///{tmp_path / 'r.db'}")
        report = run_verification(settings, where, target_kind="offline").report
        (entry,) = report.databases
        results.append((entry.verdict, entry.reasons, [(c.name, c.status, c.summary) for c in entry.checks]))
    assert results[0] == results[1]
    verdict, reasons, checks = results[0]
    assert [(str(name), str(status)) for name, status, _ in checks] == [("page_verification", "passed")]
    assert verdict == "error" and any("not restored" in reason for reason in reasons)
    assert checks[0][2].startswith("no damaged page; 224 pages in 2 file(s): 211 checksums verified")
