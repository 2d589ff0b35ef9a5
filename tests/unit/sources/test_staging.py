"""Stage mode against a real S3 endpoint (moto's server mode, its own process, TLS from its own CA).

What is asserted: exactly the files asked for are staged, laid out as the source lays them out and
readable by a target's own user; every GET the download makes carries If-Match with the ETag listed
when the plan was made; each staged file has its listed size, and its S3 checksum where S3 keeps a
full-object one (what was not checked is said, with why); an object rewritten, deleted or not
matching its checksum between plan and staging is an error naming its URL, and leaves nothing; the
staged folder is recorded for `restoreproof reap` until it is removed; the staged source reads the
staged files without a request. And what staging relies on: a plan's `files` list every file its
restore reads, for both engines.
"""

from __future__ import annotations

import base64
import os
import stat
import zlib
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.unit.sources.conftest import Bucket
from tests.unit.sources.s3_helpers import LeavingOut, lay_out, ola_layout
from verification.config import S3Settings, Settings
from verification.errors import SourceError
from verification.model import PhaseName, PhaseStatus
from verification.phase_events import PhaseBytes, PhaseEvent, listening
from verification.sources.s3 import S3Source
from verification.sources.staging import (
    NOT_CHECKED_COMPOSITE,
    NOT_CHECKED_NONE,
    PART_BYTES,
    StagedSource,
    Stager,
)
from verification.targets.local import leftovers_dir, reap_local

MiB = 1024 * 1024


def wrong_crc32() -> str:
    """A CRC32 of other bytes, as S3 writes checksums (base64 of the big-endian value)."""
    return base64.b64encode(zlib.crc32(b"other bytes").to_bytes(4, "big")).decode()


@pytest.fixture
def repo(s3: Bucket) -> dict[str, bytes]:
    """Objects under s3://<bucket>/repo: small ones (one GET each), one in ranged parts, one with
    SHA-256, one that is no part of any plan, one empty."""
    bodies = {"backup/db/backup.info": b"[backrest]\n", "backup/db/L1/pg_data/base/1/1234.gz": os.urandom(70_000),
              "backup/db/L1/big.gz": os.urandom(PART_BYTES + 3 * MiB), "archive/db/15-1/seg-1": b"",
              "archive/db/15-1/seg-2": b"w" * 5000, "elsewhere/not-planned": b"n" * 10}
    for key, body in bodies.items():
        s3.put(f"repo/{key}", body)
    s3.put("repo/backup/db/L1/sha.gz", b"s" * 3000, ChecksumAlgorithm="SHA256")
    bodies["backup/db/L1/sha.gz"] = b"s" * 3000
    return bodies


def stager(s3: Bucket, tmp_path: Path, prefix: str = "repo") -> tuple[Stager, S3Source]:
    source = S3Source(s3.url(prefix))
    return Stager(source, tmp_path / "state" / "staging", leftovers_dir(tmp_path / "state")), source


def if_match_of_every_get(source: S3Source) -> list[tuple[str, str | None]]:
    """(key, If-Match) of each GetObject the source's client sends from now on."""
    seen: list[tuple[str, str | None]] = []

    def record(request: Any, **_: Any) -> None:
        value = request.headers.get("If-Match")
        seen.append((request.url.split("/repo/", 1)[-1], value.decode() if isinstance(value, bytes) else value))

    source.client.meta.events.register("before-send.s3.GetObject", record)
    return seen


def nothing_left(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert list((state / "staging").iterdir()) == [], "a staged folder was left"
    assert list(leftovers_dir(state).iterdir()) == [], "a leftovers record was left"


def test_exactly_the_files_asked_for_are_staged_as_the_source_lays_them_out(s3: Bucket, repo: dict[str, bytes],
                                                                            tmp_path: Path) -> None:
    staging, source = stager(s3, tmp_path)
    planned = [path for path in repo if not path.startswith("elsewhere/")]
    gets = if_match_of_every_get(source)
    said: list[str] = []
    copy = staging.stage(planned, "run-1", "db", said.append)
    try:
        staged = sorted(str(p.relative_to(copy.root)) for p in copy.root.rglob("*") if p.is_file())
        assert staged == sorted(planned)
        for path in planned:
            assert (copy.root / path).read_bytes() == repo[path]
            assert stat.S_IMODE((copy.root / path).stat().st_mode) == 0o644  # a target's own user reads it
        assert {stat.S_IMODE(p.stat().st_mode) for p in [copy.root, *copy.root.rglob("*")] if p.is_dir()} == {0o755}
        assert stat.S_IMODE(copy.root.parent.stat().st_mode) == 0o711  # passed through, not listed
        assert copy.bytes == sum(len(repo[p]) for p in planned) == sum(source.size(p) for p in planned)
        assert said == [f"db: downloading {len(planned)} objects ({copy.bytes / MiB:.1f} MiB) from "
                        f"{s3.url('repo')} into {copy.root}"]
        # Every GET (whole objects and the big one's parts alike) held to the ETag listed.
        listed = {source.listed(p).key.removeprefix("repo/"): source.listed(p).etag for p in planned}
        assert sorted({key for key, _ in gets}) == sorted(listed)
        assert all(etag == listed[key] for key, etag in gets)
        assert sum(1 for key, _ in gets if key == "backup/db/L1/big.gz") == 2  # in ranged parts
        phase = copy.phase()
        assert (phase.name, phase.status, phase.bytes) == (PhaseName.DOWNLOAD, PhaseStatus.MEASURED, copy.bytes)
        assert phase.seconds is not None and phase.seconds > 0
        assert phase.details["objects"] == len(planned) and phase.details["source"] == s3.url("repo")
        # boto3 uploads with a CRC32 by default; the SHA-256 object keeps its own; the big one's value
        # came from a HEAD (its parts' responses carry none).
        assert phase.details["checked"] == {"if_match_etag": 6, "size": 6, "checksum": {"CRC32": 5, "SHA256": 1},
                                            "checksum_not_checked": {}}
        assert phase.details["requests"] == {"GetObject": 7, "HeadObject": 1}
        # Recorded for the reaper, with the run and the database, until removed.
        (record,) = leftovers_dir(tmp_path / "state").iterdir()
        assert f'"folder": "{copy.root}"' in record.read_text() and '"run_id": "run-1"' in record.read_text()
    finally:
        copy.remove()
    assert not copy.root.exists()
    nothing_left(tmp_path)


def test_a_killed_runs_staged_copy_is_removed_by_the_reaper(s3: Bucket, repo: dict[str, bytes],
                                                            tmp_path: Path) -> None:
    staging, _ = stager(s3, tmp_path)
    copy = staging.stage(["backup/db/backup.info"], "run-killed", "db")
    # The run dies here without removing it: `restoreproof reap` finds it in the leftovers.
    assert reap_local(tmp_path / "state", "another-run") == [] and copy.root.exists()
    assert reap_local(tmp_path / "state", "run-killed") == [str(copy.root)]
    nothing_left(tmp_path)


def test_the_staged_source_reads_staged_files_locally_and_the_rest_from_s3(s3: Bucket, repo: dict[str, bytes],
                                                                          tmp_path: Path) -> None:
    staging, source = stager(s3, tmp_path)
    copy = staging.stage(["backup/db/L1/pg_data/base/1/1234.gz"], "run-1", "db")
    try:
        staged = StagedSource(source, copy)
        requests = source.stats.total_requests
        body = repo["backup/db/L1/pg_data/base/1/1234.gz"]
        assert staged.read_bytes("backup/db/L1/pg_data/base/1/1234.gz", 100, 50) == body[100:150]
        handle = staged.open_binary("backup/db/L1/pg_data/base/1/1234.gz")
        assert handle is not None
        with handle:
            assert handle.read() == body
        assert staged.list_dir("backup/db") == ["L1", "backup.info"] and staged.size("backup/db/backup.info") == 11
        assert source.stats.total_requests == requests  # none of it a request
        assert staged.open_binary("elsewhere/not-planned") is None
        assert staged.read_bytes("elsewhere/not-planned") == b"n" * 10  # from S3: a GET
        assert source.stats.total_requests == requests + 1
        assert staged.describe() == f"{s3.url('repo')} (staged in {copy.root})"
        assert staged.parallel_reads == source.threads
    finally:
        copy.remove()


@pytest.mark.parametrize("which", ["backup/db/backup.info", "backup/db/L1/big.gz"], ids=["whole", "in parts"])
def test_an_object_rewritten_since_the_plan_is_an_error_naming_it(s3: Bucket, repo: dict[str, bytes],
                                                                  tmp_path: Path, which: str) -> None:
    staging, _ = stager(s3, tmp_path)
    s3.put(f"repo/{which}", repo[which][:-1] + b"!")  # the same size, other bytes
    with pytest.raises(SourceError) as raised:
        staging.stage(list(repo), "run-1", "db")
    assert str(raised.value) == (f"{s3.url('repo')}/{which} changed since the source was listed (its ETag is no "
                                 "longer the one listed; GetObject with If-Match: PreconditionFailed, HTTP 412); "
                                 "not staged")
    nothing_left(tmp_path)


def test_objects_a_store_lists_without_an_etag_are_held_to_their_listed_time(s3: Bucket, repo: dict[str, bytes],
                                                                            tmp_path: Path) -> None:
    import time
    from email.utils import format_datetime

    with LeavingOut(s3.endpoint, elements={"ETag"}, headers={"ETag"}) as store:
        source = S3Source(s3.url("repo"), S3Settings(endpoint_url=store.url))
        staging = Stager(source, tmp_path / "state" / "staging", leftovers_dir(tmp_path / "state"))
        planned = [path for path in repo if not path.startswith("elsewhere/")]
        copy = staging.stage(planned, "run-1", "db")
        try:
            assert all((copy.root / path).read_bytes() == repo[path] for path in planned)
            assert copy.checks == {"if_match_etag": 0, "if_unmodified_since": 6, "size": 6,
                                   "checksum": {"CRC32": 5, "SHA256": 1}, "checksum_not_checked": {}}
        finally:
            copy.remove()
        # Every GET, the big object's ranged parts too, held to the time each object was listed with.
        gets = [(path.split("/repo/", 1)[1].split("?")[0], asked) for method, path, asked in store.requests
                if method == "GET" and "/repo/" in path]
        assert sorted({key for key, _ in gets}) == sorted(planned)
        for key, asked in gets:
            listed = source.listed(key).last_modified.replace(microsecond=0)
            assert "If-Match" not in asked and asked["If-Unmodified-Since"] == format_datetime(listed, usegmt=True)
        time.sleep(1.1)  # a later second: the same size, other bytes
        which = "backup/db/L1/big.gz"
        s3.put(f"repo/{which}", repo[which][:-1] + b"!")
        with pytest.raises(SourceError) as raised:
            staging.stage(planned, "run-2", "db")
    assert str(raised.value) == (
        f"{s3.url('repo')}/{which} changed since the source was listed (modified after its listed LastModified "
        f"{source.listed(which).last_modified.replace(microsecond=0).isoformat()}, the store having listed no ETag; "
        "GetObject with If-Unmodified-Since: PreconditionFailed, HTTP 412); not staged")
    nothing_left(tmp_path)


def test_an_object_deleted_since_the_plan_is_an_error_naming_it(s3: Bucket, repo: dict[str, bytes],
                                                                tmp_path: Path) -> None:
    staging, _ = stager(s3, tmp_path)
    s3.client.delete_object(Bucket=s3.name, Key="repo/archive/db/15-1/seg-2")
    with pytest.raises(SourceError, match=rf"^{s3.url('repo')}/archive/db/15-1/seg-2: gone since the source was "
                                          r"listed \(GetObject: NoSuchKey, HTTP 404\)$"):
        staging.stage(list(repo), "run-1", "db")
    nothing_left(tmp_path)


def test_an_object_archived_since_the_plan_is_an_error_naming_it_and_its_class(s3: Bucket, repo: dict[str, bytes],
                                                                               tmp_path: Path) -> None:
    staging, _ = stager(s3, tmp_path)
    key = "repo/archive/db/15-1/seg-2"  # a lifecycle rule moved it: same bytes, same ETag
    s3.client.copy_object(Bucket=s3.name, Key=key, CopySource={"Bucket": s3.name, "Key": key},
                          StorageClass="DEEP_ARCHIVE", MetadataDirective="REPLACE")
    with pytest.raises(SourceError) as raised:
        staging.stage(list(repo), "run-1", "db")
    assert str(raised.value) == (f"{s3.url('repo')}/archive/db/15-1/seg-2 is in the archive storage class "
                                 "DEEP_ARCHIVE and is not restored (GetObject: InvalidObjectState, HTTP 403): it "
                                 "cannot be read until it is restored (S3 RestoreObject) and the restore has completed")
    nothing_left(tmp_path)


@pytest.mark.parametrize("size", [5000, PART_BYTES + MiB], ids=["whole: botocore's check", "in parts: ours"])
def test_bytes_that_do_not_match_the_checksum_s3_keeps_are_an_error(s3: Bucket, tmp_path: Path, size: int) -> None:
    """moto keeps the checksum it is given without checking it against the body (S3 itself refuses it
    with BadDigest): what it then serves is an object whose bytes do not match its checksum, as bit rot
    in the store, or a corrupted transfer, would give."""
    body = os.urandom(size)
    s3.put("repo/rotten.gz", body, ChecksumAlgorithm="CRC32", ChecksumCRC32=wrong_crc32())
    computed = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    staging, _ = stager(s3, tmp_path)
    with pytest.raises(SourceError) as raised:
        staging.stage(["rotten.gz"], "run-1", "db")
    assert str(raised.value) == (f"{s3.url('repo')}/rotten.gz: the bytes downloaded do not match the CRC32 checksum "
                                 f"S3 keeps for the object ({wrong_crc32()} kept, {computed} computed); not staged")
    nothing_left(tmp_path)


def test_after_a_staged_file_fails_its_checksum_no_other_is_read_for_its_own(s3: Bucket, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # In parts, so the check is ours (botocore checks a whole object's body itself), and first in line.
    s3.put("repo/rotten.gz", os.urandom(PART_BYTES + MiB), ChecksumAlgorithm="CRC32", ChecksumCRC32=wrong_crc32())
    good = [f"wal/{index:02d}.gz" for index in range(6)]
    for path in good:
        s3.put(f"repo/{path}", os.urandom(2000), ChecksumAlgorithm="CRC32")
    source = S3Source(s3.url("repo"), S3Settings(threads=1))
    staging = Stager(source, tmp_path / "state" / "staging", leftovers_dir(tmp_path / "state"))
    checked: list[str] = []
    verify = Stager._verify

    def watched(staged: Path, *args: Any) -> Any:
        checked.append(staged.name)
        return verify(staged, *args)

    monkeypatch.setattr(Stager, "_verify", staticmethod(watched))
    with pytest.raises(SourceError, match=r"rotten.gz: the bytes downloaded do not match the CRC32 checksum"):
        staging.stage(["rotten.gz", *good], "run-1", "db")
    assert checked == ["rotten.gz"]  # the failure is said at once: none of the files after it is read again
    nothing_left(tmp_path)


def test_what_is_not_checked_is_said_with_why(s3: Bucket, tmp_path: Path) -> None:
    key = "repo/multi.gz"
    started = s3.client.create_multipart_upload(Bucket=s3.name, Key=key, ChecksumAlgorithm="CRC32")
    parts = []
    for number, body in ((1, b"a" * 5 * MiB), (2, b"b" * 100)):
        made = s3.client.upload_part(Bucket=s3.name, Key=key, UploadId=started["UploadId"], PartNumber=number,
                                     Body=body, ChecksumAlgorithm="CRC32")
        parts.append({"PartNumber": number, "ETag": made["ETag"], "ChecksumCRC32": made["ChecksumCRC32"]})
    s3.client.complete_multipart_upload(Bucket=s3.name, Key=key, UploadId=started["UploadId"],
                                        MultipartUpload={"Parts": parts})
    # No checksum at all: what S3 keeps for an upload that sent none (botocore sends one unless told).
    bare = boto3.client("s3", config=Config(request_checksum_calculation="when_required"))
    bare.put_object(Bucket=s3.name, Key="repo/bare.gz", Body=b"x" * 100)
    staging, _ = stager(s3, tmp_path)
    copy = staging.stage(["multi.gz", "bare.gz"], "run-1", "db")
    try:
        assert (copy.root / "multi.gz").read_bytes() == b"a" * 5 * MiB + b"b" * 100
        assert copy.checks == {"if_match_etag": 2, "size": 2, "checksum": {},
                               "checksum_not_checked": {NOT_CHECKED_COMPOSITE: 1, NOT_CHECKED_NONE: 1}}
    finally:
        copy.remove()


def test_a_path_leading_out_of_the_staging_folder_is_refused(s3: Bucket, repo: dict[str, bytes],
                                                              tmp_path: Path) -> None:
    staging, _ = stager(s3, tmp_path)
    with pytest.raises(SourceError, match=r"path '\.\./x' leaves the source"):
        staging.stage(["../x"], "run-1", "db")


def test_a_path_leaving_the_staged_copy_removes_the_copy_and_its_record(s3: Bucket, repo: dict[str, bytes],
                                                                        tmp_path: Path) -> None:
    # The listing never holds such a key (the source refuses it first); the copy's own guard is the
    # second line, and what it refused leaves nothing behind.
    staging, _ = stager(s3, tmp_path)
    with pytest.raises(SourceError, match=r"path 'backup/\.\./\.\./x' leaves the staging folder "):
        staging._make_folder("run-1", "db", ["backup/db/backup.info", "backup/../../x"], 0)
    nothing_left(tmp_path)


def test_a_configured_staging_folder_keeps_its_own_mode(s3: Bucket, repo: dict[str, bytes], tmp_path: Path) -> None:
    shared = tmp_path / "scratch"
    shared.mkdir()
    shared.chmod(0o1777)  # like /var/tmp
    source = S3Source(s3.url("repo"))
    copy = Stager(source, shared, leftovers_dir(tmp_path / "state")).stage(["backup/db/backup.info"], "run-1", "db")
    try:
        assert copy.root.parent == shared
        assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    finally:
        copy.remove()
    assert list(shared.iterdir()) == []


# -- what staging relies on: a plan lists every file its restore reads ---------------------------------

def test_a_pgbackrest_plan_lists_every_file_its_restore_reads(captured_repo: Path) -> None:
    """pgbackrest restore reads backup.info and each backup of the chain (manifest and files); recovery
    reads archive.info, the WAL range and the history files: all in `files`, nothing else."""
    from tests.conftest import LABELS, STANZA
    from verification.engines.postgres.engine import PostgresEngine
    from verification.engines.postgres.wal import parse_segment
    from verification.sources import LocalSource

    (plan,) = PostgresEngine(Settings()).plan(LocalSource(captured_repo), None).plans
    assert plan.chain.wal is not None
    first, last = (parse_segment(name, 16 * MiB).number for name in (plan.chain.wal.first, plan.chain.wal.last))
    segments = sorted(p.relative_to(captured_repo).as_posix()
                      for p in (captured_repo / "archive" / STANZA / "15-1" / "0000000100000000").iterdir()
                      # segments only: a backup history file (…00000028.backup) is never read by recovery
                      if ".backup" not in p.name and first <= parse_segment(p.name[:24], 16 * MiB).number <= last)
    expected = [f"backup/{STANZA}/backup.info", f"archive/{STANZA}/archive.info",
                *(f"backup/{STANZA}/{label}/backup.manifest" for label in LABELS), *segments]
    assert plan.files == expected and len(segments) == plan.chain.wal.segments


def test_a_sql_server_plan_lists_every_file_its_restore_reads(mssql_corpus: Path, tmp_path: Path) -> None:
    """RESTORE ... FROM DISK names every family of every backup set of the chain: each is in `files`."""
    from verification.engines.mssql.engine import MssqlEngine, media_sets
    from verification.model import ChainStatus
    from verification.sources import LocalSource

    folder = lay_out(ola_layout(mssql_corpus), tmp_path / "ola")
    plans = MssqlEngine(Settings()).plan(LocalSource(folder), None).plans
    complete = [plan for plan in plans if plan.chain.status is ChainStatus.COMPLETE]
    assert len(complete) > 10
    for plan in complete:
        restored = [backup.path for group in media_sets(plan.chain.backups) for backup in group]
        assert sorted(p for p in restored if p) == sorted(plan.files), plan.database
    striped = [plan for plan in complete if any(b.family and not b.family.startswith("1/1") for b in plan.chain.backups)]
    assert striped, "the corpus has striped backups: each family is a file of the plan"


def test_a_download_tells_its_bytes_as_they_arrive_and_its_total_at_the_end(s3: Bucket, repo: dict[str, bytes],
                                                                            tmp_path: Path) -> None:
    staging, _ = stager(s3, tmp_path)
    planned = [path for path in repo if not path.startswith("elsewhere/")]
    told: list[PhaseEvent] = []
    with listening(told.append):
        copy = staging.stage(planned, "run-1", "db", None)
    try:
        moved = [event for event in told if isinstance(event, PhaseBytes)]
        assert moved, told
        assert {(e.database, e.phase, e.total) for e in moved} == {("db", PhaseName.DOWNLOAD, copy.bytes)}
        assert moved[-1].done == copy.bytes  # told once more at the end, whole
        assert [e.done for e in moved] == sorted(e.done for e in moved)
    finally:
        copy.remove()
