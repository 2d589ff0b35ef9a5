"""The header cache on the real SQL Server corpus, from a folder and from a real S3 endpoint (moto's
server mode, its own process): a warm plan equals the cold one and reads nothing it may keep; a file
changed since is read again, damaged or repaired; a damaged cache, a stale entry or another parser's
entry is never trusted."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engines.mssql.mtf_append import append_sets, set_ranges
from tests.unit.sources.conftest import Bucket, s3, s3_endpoint  # noqa: F401 (pytest fixtures)
from tests.unit.sources.s3_helpers import ola_layout
from tests.unit.sources.test_s3 import plans_of
from verification.config import S3Settings, Settings
from verification.engines.mssql import header_cache
from verification.engines.mssql.catalog import Catalog, read_file, scan, walk
from verification.engines.mssql.header_cache import CACHE_FILE, HeaderCache, decode, encode
from verification.sources import LocalSource, local
from verification.sources.base import Fingerprint
from verification.sources.s3 import S3Source

KiB = 1024
# What the corpus holds that is not a readable backup: two text files and two natively compressed
# backups. From a folder these are read every time (a local fingerprint vouches for good headers only).
NOT_KEPT_LOCALLY = {"MANIFEST.tsv", "README.md", "history/compressed/SharePoint_Config_a.bak",
                    "history/compressed/SharePoint_Config_b.bak"}


def settings_in(folder: Path, **mssql: Any) -> Settings:
    return Settings(state_dir=folder / "state", mssql=mssql)


def scanned(settings: Settings, source: Any) -> Catalog:
    cache = HeaderCache.for_source(settings, source)
    try:
        return scan(source, settings.exclude, cache if cache.enabled else None)
    finally:
        cache.close()


def entries(settings: Settings) -> dict[str, str]:
    """path -> fingerprint of every entry in the cache file."""
    with sqlite3.connect(settings.state_dir / CACHE_FILE) as db:
        return dict(db.execute("SELECT path, fingerprint FROM entries").fetchall())


def upload_ola(bucket: Bucket, corpus: Path, prefix: str = "sql") -> dict[str, Path]:
    layout = ola_layout(corpus)
    bucket.upload(corpus, prefix, layout)
    return layout


# -- from a folder ---------------------------------------------------------------------------------

def test_the_corpus_planned_with_a_warm_cache_equals_the_cold_plan(mssql_corpus: Path, tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    engine, _, cold = plans_of(settings, str(mssql_corpus))
    assert engine == "mssql" and (settings.state_dir / CACHE_FILE).stat().st_mode & 0o777 == 0o600
    _, _, warm = plans_of(settings, str(mssql_corpus))
    assert warm == cold and len(cold["plans"]) > 20
    # Only what a local fingerprint may vouch for was kept: every readable backup, nothing else.
    source = LocalSource(mssql_corpus)
    catalog = scanned(settings, source)
    paths = walk(source)
    assert (catalog.files_cached, catalog.files_read) == (len(paths) - len(NOT_KEPT_LOCALLY), len(NOT_KEPT_LOCALLY))
    assert set(entries(settings)) == set(paths) - NOT_KEPT_LOCALLY
    assert catalog.bytes_read < 200 * KiB  # the four files read again, their heads and trailers only
    off = scan(source)
    assert (off.files_cached, off.files_read, catalog.unreadable) == (0, len(paths), off.unreadable)


def test_an_entry_round_trips_to_what_the_read_gave(mssql_corpus: Path) -> None:
    source = LocalSource(mssql_corpus)
    for path in walk(source):
        result = read_file(source, path)
        again = decode(encode(result))
        assert again is not None and again.cached and again.bytes_read == 0
        assert (again.headers, again.unreadable, again.not_backup) == (result.headers, result.unreadable,
                                                                        result.not_backup), path
        # to the fields that take no part in ==
        assert [h.bytes_read for h in again.headers] == [h.bytes_read for h in result.headers]


def test_a_file_of_whole_sets_and_a_cut_one_round_trips(mssql_corpus: Path, tmp_path: Path) -> None:
    # An append cut short: the whole sets and why the rest is not read, both kept.
    full, log = ((mssql_corpus / rel).read_bytes() for rel in ("OlaMsFilter/Simple/test_FULL_20160629_141300.bak",
                                                              "OlaMsFilter/Simple/test_LOG_20160629_141310.trn"))
    both = append_sets(full, log, adopt_media=True)
    (tmp_path / "media.bak").write_bytes(both[:set_ranges(both)[1][0] + 4096])
    result = read_file(LocalSource(tmp_path), "media.bak")
    assert len(result.headers) == 1 and result.unreadable is not None
    again = decode(encode(result))
    assert again is not None and (again.headers, again.unreadable) == (result.headers, result.unreadable)


@pytest.mark.parametrize("payload", ['{"headers": [], "unreadable": null, "not_backup": false}', "{}", "[1, 2",
                                     '{"headers": [{"path": 7}], "unreadable": null, "not_backup": false}'])
def test_an_entry_that_does_not_parse_is_not_an_answer(payload: str) -> None:
    assert decode(payload) is None


def test_a_local_file_rewritten_with_its_size_and_times_kept_is_read_again(mssql_copy: Any, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "SETTLED_SECONDS", 0.0)  # the copy was just made
    root = mssql_copy("sql2008-backups/StopAt")
    settings = settings_in(tmp_path)
    source = LocalSource(root)
    first = scanned(settings, source)
    assert first.files_cached == 0 and first.files_read == len(walk(source))
    victim = root / "sql2008-backups/StopAt/StopAt_1.trn"
    stamp, data = victim.stat(), bytearray(victim.read_bytes())
    time.sleep(0.05)  # past the file system's clock tick (SETTLED_SECONDS is what covers it in real runs)
    data[0x30] ^= 0xFF  # the TAPE block's header: its checksum no longer matches
    victim.write_bytes(bytes(data))
    os.utime(victim, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # size and modification time as they were
    assert (victim.stat().st_size, victim.stat().st_mtime_ns) == (stamp.st_size, stamp.st_mtime_ns)
    second = scanned(settings, source)
    assert second.files_read == 1 and second.files_cached == len(walk(source)) - 1
    (damaged,) = second.unreadable
    assert damaged.path == "sql2008-backups/StopAt/StopAt_1.trn" and damaged.kind == "corrupt"
    assert "TAPE block header checksum" in damaged.reason
    # A damaged local file is not kept: it is read again, and found repaired once it is.
    assert "sql2008-backups/StopAt/StopAt_1.trn" not in entries(settings)
    time.sleep(0.05)
    data[0x30] ^= 0xFF
    victim.write_bytes(bytes(data))
    third = scanned(settings, source)
    assert third.files_read == 1 and third.unreadable == [] and third.databases == first.databases


def test_a_local_file_cut_in_its_last_set_is_read_again_every_run(mssql_corpus: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Its whole sets are read, but the file is not read well: a local fingerprint cannot vouch for it.
    monkeypatch.setattr(local, "SETTLED_SECONDS", 0.0)
    full, log = ((mssql_corpus / rel).read_bytes() for rel in ("OlaMsFilter/Simple/test_FULL_20160629_141300.bak",
                                                              "OlaMsFilter/Simple/test_LOG_20160629_141310.trn"))
    both = append_sets(full, log, adopt_media=True)
    root = tmp_path / "source"
    root.mkdir()
    (root / "media.bak").write_bytes(both[:set_ranges(both)[1][0] + 4096])
    settings = settings_in(tmp_path)
    first = scanned(settings, LocalSource(root))
    assert [u.kind for u in first.unreadable] == ["corrupt"] and len(first.databases) == 1
    assert entries(settings) == {}
    second = scanned(settings, LocalSource(root))
    assert (second.files_read, second.files_cached) == (1, 0)


def test_a_file_changed_a_moment_ago_gives_no_fingerprint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "new.bak").write_bytes(b"TAPE")
    source = LocalSource(tmp_path)
    assert source.fingerprint("new.bak") is None and source.fingerprint("gone.bak") is None
    monkeypatch.setattr(local, "SETTLED_SECONDS", 0.0)
    found = source.fingerprint("new.bak")
    assert found is not None and not found.reliable and found.value.startswith("size=4;mtime=")
    assert source.identity() == f"file://{tmp_path.resolve()}"


def test_object_store_mode_keeps_local_folders_out_and_off_keeps_nothing(mssql_corpus: Path, tmp_path: Path) -> None:
    source = LocalSource(mssql_corpus)
    for mode in ("object-store", "off"):
        settings = settings_in(tmp_path / mode, header_cache=mode)
        scanned(settings, source)
        assert scanned(settings, source).files_cached == 0
    assert entries(settings_in(tmp_path / "object-store")) == {}
    assert not (tmp_path / "off" / "state" / CACHE_FILE).exists()


# -- the cache file itself -------------------------------------------------------------------------

def test_a_damaged_cache_file_is_said_removed_and_made_again(mssql_corpus: Path, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_in(tmp_path)
    source = LocalSource(mssql_corpus)
    cold = scanned(settings, source)
    file = settings.state_dir / CACHE_FILE
    file.write_bytes(b"this is no SQLite database " * 200)
    with caplog.at_level(logging.WARNING, logger="verification.engines.mssql.header_cache"):
        rebuilt = scanned(settings, source)
    assert f"header cache {file} is not a readable SQLite database (file is not a database)" in caplog.text
    assert (rebuilt.files_cached, rebuilt.databases, rebuilt.unreadable) == (0, cold.databases, cold.unreadable)
    assert scanned(settings, source).files_cached == len(walk(source)) - len(NOT_KEPT_LOCALLY)


def test_a_damaged_entry_is_read_again(mssql_corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_in(tmp_path)
    source = LocalSource(mssql_corpus)
    cold = scanned(settings, source)
    with sqlite3.connect(settings.state_dir / CACHE_FILE) as db:
        db.execute("UPDATE entries SET payload = '{\"headers\": [{\"path\": 1}]}' WHERE path = 'DoubleDiffing/difftest-full.bak'")
    with caplog.at_level(logging.WARNING, logger="verification.engines.mssql.header_cache"):
        warm = scanned(settings, source)
    assert "the entry of DoubleDiffing/difftest-full.bak in file://" in caplog.text and "does not parse" in caplog.text
    assert warm.files_read == len(NOT_KEPT_LOCALLY) + 1 and warm.databases == cold.databases
    assert scanned(settings, source).files_read == len(NOT_KEPT_LOCALLY)  # the entry was written anew


def test_another_parser_versions_entries_are_never_trusted(mssql_corpus: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_in(tmp_path)
    source = LocalSource(mssql_corpus)
    with monkeypatch.context() as other:
        other.setattr(header_cache, "PARSER_VERSION", "another-parser")
        scanned(settings, source)
        assert scanned(settings, source).files_cached > 100
    assert scanned(settings, source).files_cached == 0  # every entry read again by this parser...
    with sqlite3.connect(settings.state_dir / CACHE_FILE) as db:
        assert {version for (version,) in db.execute("SELECT parser FROM entries")} == {header_cache.PARSER_VERSION}
    assert len(header_cache.PARSER_VERSION) == 20


def test_a_file_that_changed_while_it_was_read_is_not_kept(mssql_corpus: Path, tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    source = LocalSource(mssql_corpus)
    path = "DoubleDiffing/difftest-full.bak"
    before = source.fingerprint(path)
    assert before is not None
    result = read_file(source, path)
    cache = HeaderCache.for_source(settings, source)
    cache.put(path, before, result, Fingerprint(before.value + ";then another", reliable=False))
    cache.put(path, None, result, None)  # no fingerprint (just written): nothing to key it by
    cache.finish([path])
    assert entries(settings) == {}
    cache = HeaderCache.for_source(settings, source)
    cache.put(path, before, result, source.fingerprint(path))
    cache.finish([path])
    assert entries(settings) == {path: before.value}


def test_the_version_is_a_digest_of_the_parsers_code() -> None:
    assert header_cache._parser_version() == header_cache.PARSER_VERSION


def test_runs_at_once_share_the_file(mssql_corpus: Path, tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    found: list[Catalog] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            found.append(scanned(settings, LocalSource(mssql_corpus)))
        except BaseException as exc:  # pragma: no cover - said below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [] and len(found) == 4
    assert all(c.databases == found[0].databases for c in found)
    assert scanned(settings, LocalSource(mssql_corpus)).files_read == len(NOT_KEPT_LOCALLY)


def test_a_source_unused_for_a_month_is_forgotten(mssql_corpus: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "SETTLED_SECONDS", 0.0)
    settings = settings_in(tmp_path)
    scanned(settings, LocalSource(mssql_corpus))
    with sqlite3.connect(settings.state_dir / CACHE_FILE) as db:
        db.execute("UPDATE sources SET used = used - 31 * 86400")
    other = tmp_path / "other"
    shutil.copytree(mssql_corpus / "DoubleDiffing", other)
    scanned(settings, LocalSource(other))
    with sqlite3.connect(settings.state_dir / CACHE_FILE) as db:
        assert db.execute("SELECT identity FROM sources").fetchall() == [(f"file://{other.resolve()}",)]
    assert set(entries(settings)) == {p.name for p in other.iterdir()}


def test_a_cache_that_cannot_be_made_is_a_warning(mssql_corpus: Path, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "state").write_text("a file where the state folder should be")
    with caplog.at_level(logging.WARNING, logger="verification.engines.mssql.header_cache"):
        catalog = scanned(settings_in(tmp_path), LocalSource(mssql_corpus))
    assert "cannot be made" in caplog.text and "headers are read from the files" in caplog.text
    assert catalog.files_read == len(walk(LocalSource(mssql_corpus))) and catalog.databases


# -- from S3 ---------------------------------------------------------------------------------------

def test_a_second_plan_from_s3_makes_no_get_and_gives_the_same_plan(s3: Bucket, mssql_corpus: Path,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    layout = upload_ola(s3, mssql_corpus)
    settings = settings_in(tmp_path)
    engine, cold_source, cold = plans_of(settings, s3.url("sql"))
    assert engine == "mssql" and isinstance(cold_source, S3Source)
    assert set(cold_source.stats.bytes_by_path) == set(layout)
    engine, warm_source, warm = plans_of(settings, s3.url("sql"))
    assert (engine, warm) == ("mssql", cold)
    # Engine detection and planning answered from the listing and the cache: not one GET.
    assert set(warm_source.stats.requests) == {"ListObjectsV2", "ListMultipartUploads"}
    assert warm_source.stats.bytes_read == 0
    # From S3 every result is kept (an ETag changes with the bytes), the compressed backups too.
    assert set(entries(settings)) == set(layout)
    _, _, without = plans_of(settings_in(tmp_path / "off", header_cache="off"), s3.url("sql"))
    assert without == cold


def test_an_object_rewritten_is_read_again_damaged_then_repaired(s3: Bucket, mssql_corpus: Path,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    layout = upload_ola(s3, mssql_corpus)
    settings = settings_in(tmp_path)
    _, _, cold = plans_of(settings, s3.url("sql"))
    key = next(k for k in sorted(layout) if k.startswith("JUMPBOX$SQL2008R2/StopAt/LOG/"))
    original = layout[key].read_bytes()
    damaged = bytearray(original)
    damaged[0x30] ^= 0xFF
    s3.put(f"sql/{key}", bytes(damaged))
    _, source, after = plans_of(settings, s3.url("sql"))
    assert set(source.stats.bytes_by_path) == {key}  # the new ETag alone was read
    assert [u["path"] for u in after["unreadable"] if u["kind"] == "corrupt"] == [key]
    assert after != cold
    _, source, again = plans_of(settings, s3.url("sql"))  # the damage is kept, as damage: no GET
    assert again == after and source.stats.bytes_read == 0
    s3.put(f"sql/{key}", original)
    _, source, repaired = plans_of(settings, s3.url("sql"))
    assert set(source.stats.bytes_by_path) == {key} and repaired == cold


def test_a_night_reads_only_the_new_objects_and_forgets_the_deleted(s3: Bucket, mssql_corpus: Path,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    layout = upload_ola(s3, mssql_corpus)
    settings = settings_in(tmp_path)
    plans_of(settings, s3.url("sql"))
    gone = sorted(layout)[0]
    s3.client.delete_object(Bucket=s3.name, Key=f"sql/{gone}")
    new = gone.replace(".bak", "_copy.bak").replace(".trn", "_copy.trn")
    s3.put(f"sql/{new}", layout[gone].read_bytes())
    _, source, _ = plans_of(settings, s3.url("sql"))
    assert set(source.stats.bytes_by_path) == {new}
    assert set(entries(settings)) == set(layout) - {gone} | {new}


def test_the_cache_holds_no_key(s3: Bucket, mssql_corpus: Path, tmp_path: Path,  # noqa: F811
                                monkeypatch: pytest.MonkeyPatch) -> None:
    from verification.demo.s3_endpoint import DEMO_ACCESS_KEY, DEMO_SECRET_KEY

    upload_ola(s3, mssql_corpus)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    settings = Settings(state_dir=tmp_path / "state", s3=S3Settings(access_key_id=DEMO_ACCESS_KEY,
                                                                    secret_access_key=DEMO_SECRET_KEY))
    plans_of(settings, s3.url("sql"))
    written = b"".join(p.read_bytes() for p in (tmp_path / "state").iterdir())
    assert b"StopAt" in written and DEMO_SECRET_KEY.encode() not in written and DEMO_ACCESS_KEY.encode() not in written


def test_an_s3_fingerprint_is_the_listed_etag_and_size(s3: Bucket) -> None:  # noqa: F811
    s3.put("sql/a.bak", b"TAPE" * 100)
    source = S3Source(s3.url("sql"))
    found = source.fingerprint("a.bak")
    assert found is not None and found.reliable
    assert found.value == f"etag={s3.client.head_object(Bucket=s3.name, Key='sql/a.bak')['ETag']};size=400"
    assert source.fingerprint("missing.bak") is None
    assert source.identity() == f"{s3.endpoint.url} s3://{s3.name}/sql"
