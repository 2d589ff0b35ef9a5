"""PostgreSQL/pgBackRest faults made on a copy of the demo's real repository, one test each.

WAL is replaced the way a careless operator or a broken copy job would: the segment keeps its
name, and its file name carries the SHA-1 of its own (new) content, as pgBackRest writes it, so
`pgbackrest verify` finds nothing wrong. Only the restored server's own log can tell.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.integration.conftest import leftovers
from verification.engines.postgres.serverlog import parse_pg_timestamp

pytestmark = [pytest.mark.integration, pytest.mark.faults]

SEGMENT_BYTES = 16 * 1024 * 1024


def segment_file(repo: Path, stanza: str, name: str) -> Path:
    (found,) = (repo / "archive" / stanza).rglob(f"{name}-*")
    return found


def put_segment(repo: Path, stanza: str, name: str, content: bytes) -> Path:
    """Replace a segment's file by one holding `content`, named as pgBackRest names it."""
    old = segment_file(repo, stanza, name)
    old.unlink()
    new = old.with_name(f"{name}-{hashlib.sha1(content).hexdigest()}.gz")
    new.write_bytes(gzip.compress(content, compresslevel=1))
    return new


def planned_wal(restoreproof, repo: Path, stanza: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    plan = restoreproof("plan", repo, "--engine", "postgres")
    assert plan.exit_code == 0, plan.stderr
    return next(d for d in plan.report["databases"] if d["database"] == stanza)["chain"]["wal"]


def rewrite_backup_info(repo: Path, stanza: str, edit) -> None:  # type: ignore[no-untyped-def]
    """Edit backup.info (and its copy) and sign it again with pgBackRest's own checksum (SHA-1 of
    the sections as JSON), so pgBackRest accepts the file as it would one it wrote itself."""
    path = repo / "backup" / stanza / "backup.info"
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if header := re.fullmatch(r"\[(.+)\]", line):
            current = header.group(1)
            continue
        if line.strip() and not line.startswith("backrest-checksum="):
            key, value = line.split("=", 1)
            sections.setdefault(current, []).append((key, edit(current, key, value)))
    body = ",".join(f'"{name}":{{' + ",".join(f'"{k}":{v}' for k, v in items) + "}"
                    for name, items in sections.items())
    checksum = hashlib.sha1(("{" + body + "}").encode()).hexdigest()
    text = "\n\n".join(f"[{name}]\n" + "\n".join(f"{k}={v}" for k, v in items) for name, items in sections.items())
    text += f'\n\n[backrest]\nbackrest-checksum="{checksum}"\n'
    for target in (path, path.with_name("backup.info.copy")):
        target.write_text(text)


def assert_failed_naming(run, stanza: str, *needles: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    db = run.database(stanza)
    assert db["verdict"] == "failed", db["reasons"]
    assert run.exit_code == 1, run.stderr
    assert run.report["verdict"] == "failed"
    text = "\n".join(db["reasons"])
    for needle in needles:
        assert needle in text, f"{needle!r} not in the reasons:\n{text}"
    return db


# --- WAL replayed by the restored server -------------------------------------------------------

def test_a_segment_of_another_cluster_ends_redo_early_and_fails(pg_repo, restoreproof):
    last = planned_wal(restoreproof, pg_repo, "demo1")["last"]
    # A segment of demo2 (another system) under demo1's name, named by its own SHA-1: valid to
    # pgBackRest. The clusters' WAL need not have reached the same segment, and it does not matter:
    # PostgreSQL checks the system identifier in a segment's first page before anything else.
    demo2 = sorted((pg_repo / "archive" / "demo2").rglob("0000000100000000000000??-*.gz"))
    same_name = [f for f in demo2 if f.name.startswith(last)]
    put_segment(pg_repo, "demo1", last, gzip.decompress((same_name or demo2)[-1].read_bytes()))

    run = restoreproof("verify", pg_repo, "-d", "demo1")
    db = assert_failed_naming(run, "demo1", last, "WAL file is from different database system")
    assert any(r.startswith("recovery did not reach the planned end") for r in db["reasons"]), db["reasons"]
    assert {c["name"]: c["status"] for c in db["checks"]}["pgbackrest_verify"] == "passed"
    assert run.report is not None and leftovers(run.report["run_id"]) == []


def test_a_zeroed_segment_ends_redo_early_and_fails(pg_repo, restoreproof):
    last = planned_wal(restoreproof, pg_repo, "demo1")["last"]
    put_segment(pg_repo, "demo1", last, bytes(SEGMENT_BYTES))
    run = restoreproof("verify", pg_repo, "-d", "demo1")
    db = assert_failed_naming(run, "demo1", last, "recovery did not reach the planned end")
    assert any("invalid" in r or "never restored" in r for r in db["reasons"]), db["reasons"]


def test_a_truncated_segment_file_fails_naming_the_segment(pg_repo, restoreproof):
    last = planned_wal(restoreproof, pg_repo, "demo1")["last"]
    victim = segment_file(pg_repo, "demo1", last)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    run = restoreproof("verify", pg_repo, "-d", "demo1")
    assert_failed_naming(run, "demo1", last)


def test_a_missing_segment_in_the_middle_of_a_longer_range_breaks_the_chain_before_any_restore(
        pg_repo, restoreproof, demo):
    markers = demo.manifest["stanzas"]["demo1"]["markers"]
    at = parse_pg_timestamp(markers["pitr-before"]).isoformat()
    wal = restoreproof("plan", pg_repo, "--at", at).database("demo1")["chain"]["wal"]
    assert wal["segments"] >= 3, wal
    first = int(wal["first"], 16)
    middle = f"{first + 1:024X}"
    segment_file(pg_repo, "demo1", middle).unlink()
    run = restoreproof("verify", pg_repo, "-d", "demo1", "--at", at)
    db = assert_failed_naming(run, "demo1", middle, "missing 1 segment(s)")
    assert db["chain"]["status"] == "broken"
    assert run.report["target_kind"] is None  # nothing was started for a chain that cannot restore


# --- the repository's own files ----------------------------------------------------------------

def test_a_history_file_that_does_not_descend_from_the_backup_breaks_the_chain(pg_repo, restoreproof):
    folder = segment_file(pg_repo, "demo1", "000000010000000000000001").parent
    # Timeline 2 claims to have left timeline 1 long before the backups were taken.
    (folder.parent / "00000002.history").write_text("1\t0/1000000\tno recovery target specified\n")
    (folder / f"000000020000000000000002-{'0' * 40}.gz").write_bytes(gzip.compress(b"x"))
    run = restoreproof("verify", pg_repo, "-d", "demo1")
    db = assert_failed_naming(run, "demo1", "00000002.history", "timeline 2 left timeline 1 at 0/1000000, at or "
                                                                 "before the backup's start")
    assert db["chain"]["status"] == "broken"


def test_an_unreadable_history_file_fails_that_stanza_and_names_the_file(pg_repo, restoreproof):
    archive_id = segment_file(pg_repo, "demo1", "000000010000000000000001").parent.parent
    (archive_id / "00000002.history").write_bytes(b"\xff\xfe\x00garbage\x00")
    run = restoreproof("verify", pg_repo, "-d", "demo1")
    assert_failed_naming(run, "demo1", "archive/demo1/15-1/00000002.history")
    assert any(u["path"] == "archive/demo1/15-1/00000002.history" and u["kind"] == "corrupt"
               for u in run.report["unreadable"])


def test_a_stanza_whose_info_files_are_gone_still_appears_failed(pg_repo, restoreproof):
    for name in ("backup.info", "backup.info.copy"):
        (pg_repo / "backup" / "demo2" / name).unlink()
    run = restoreproof("verify", pg_repo, "-d", "demo2")
    assert_failed_naming(run, "demo2", "backup/demo2/backup.info", "missing")


def test_a_foreign_file_in_the_wal_archive_is_listed_and_fails_the_run(pg_repo, restoreproof):
    folder = segment_file(pg_repo, "demo1", "000000010000000000000001").parent
    (folder / "00000001000000000000000E.tmp").write_bytes(b"half-copied segment")
    run = restoreproof("plan", pg_repo)
    assert run.exit_code == 1
    assert run.report["unreadable"] == [{
        "path": "archive/demo1/15-1/0000000100000000/00000001000000000000000E.tmp", "kind": "corrupt",
        "reason": "not a WAL segment, backup history or partial file name pgBackRest writes (<segment>-<sha1>[.ext])",
        "database": "demo1"}]


def test_a_missing_manifest_breaks_the_chain_naming_it(pg_repo, restoreproof):
    newest = sorted((pg_repo / "backup" / "demo1").glob("*I"))[-1]
    for name in ("backup.manifest", "backup.manifest.copy"):
        (newest / name).unlink()
    run = restoreproof("verify", pg_repo, "-d", "demo1")
    db = assert_failed_naming(run, "demo1", f"backup/demo1/{newest.name}/backup.manifest")
    assert db["chain"]["status"] == "broken"


def test_a_newest_backup_flagged_in_error_fails_although_the_older_chain_restores(pg_repo, restoreproof):
    newest = sorted((pg_repo / "backup" / "demo1").glob("*I"))[-1].name

    def flag(section: str, key: str, value: str) -> str:
        return value.replace('"backup-error":false', '"backup-error":true') if key == newest else value

    rewrite_backup_info(pg_repo, "demo1", flag)
    run = restoreproof("verify", pg_repo, "-d", "demo1")
    db = assert_failed_naming(run, "demo1", newest, "flagged in error")
    assert db["reasons"][0].startswith(f"incr backup {newest}")  # said first, not buried
    assert db["chain"]["status"] == "complete"
    assert db["chain"]["backups"][-1]["type"] == "diff"  # the older chain was still restored and proven
    # What the older chain's restore proved is still said, after the defect.
    assert any(r.startswith("server log: redo done at") for r in db["reasons"]), db["reasons"]


def test_a_flipped_byte_in_a_backed_up_data_file_fails_naming_the_file(pg_repo, restoreproof):
    incr = sorted((pg_repo / "backup" / "demo1").glob("*I"))[-1]
    victim = max((incr / "pg_data" / "base").rglob("*.gz"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    run = restoreproof("verify", pg_repo, "-d", "demo1")
    assert_failed_naming(run, "demo1", victim.relative_to(pg_repo).as_posix())


# --- restoreproof's own infrastructure ---------------------------------------------------------

class DockerEngineProxy:
    """A Unix socket that forwards to the real Docker engine until `cut()`: to the run, the engine
    goes away in the middle of a restore, as when dockerd restarts."""

    def __init__(self, path: Path, upstream: str = "/var/run/docker.sock") -> None:
        self.upstream = upstream
        self.sockets: list[socket.socket] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(64)
        self.url = f"unix://{path}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # cut
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.upstream)
            self.sockets += [client, engine]
            for a, b in ((client, engine), (engine, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()


def test_the_docker_engine_gone_mid_restore_is_an_error_and_reap_removes_what_is_left(
        pg_repo, restoreproof, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from verification.cli import app
    from verification.targets.labels import RUN_LABEL

    # Unique to this process: the same test run elsewhere on this machine must not share the socket.
    proxy = DockerEngineProxy(Path("/tmp") / f"restoreproof-proxy-{os.getpid()}-{tmp_path.name[:30]}.sock")
    monkeypatch.setenv("DOCKER_HOST", proxy.url)
    # The proxy never comes back: the teardown's wait for the engine (docker.engine_wait) is kept short.
    monkeypatch.setenv("RESTOREPROOF_DOCKER__ENGINE_WAIT", "2")

    def cut_once_restoring() -> None:
        import docker

        real = docker.DockerClient(base_url="unix:///var/run/docker.sock")
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                for container in real.containers.list(filters={"label": RUN_LABEL, "status": "running"}):
                    # This test's own target only (it mounts this test's repository): on an engine
                    # shared with other runs, theirs restore too.
                    if not any(m.get("Source") == str(pg_repo) for m in container.attrs.get("Mounts", [])):
                        continue
                    with contextlib.suppress(Exception):
                        # This test's own target (its copy of the repository mounted), not another run's on
                        # the shared engine.
                        if not any(m.get("Source") == str(pg_repo) for m in container.attrs["Mounts"]):
                            continue
                        commands = [p[-1] for p in container.top()["Processes"]]
                        # The restore has begun (pgBackRest's restore itself, not a folder named so, or the
                        # server recovering).
                        if any(re.search(r"\bpgbackrest .* restore$", c) or "postgres -D" in c for c in commands):
                            proxy.cut()
                            return
                time.sleep(0.05)
        finally:
            real.close()

    cutter = threading.Thread(target=cut_once_restoring, daemon=True)
    cutter.start()
    try:
        run = restoreproof("verify", pg_repo, "-d", "demo1", "--target", "docker")
    finally:
        proxy.cut()
        cutter.join(timeout=5)
        Path(proxy.url.removeprefix("unix://")).unlink(missing_ok=True)
    monkeypatch.delenv("DOCKER_HOST")
    db = run.database("demo1")
    assert db["verdict"] == "error", db["reasons"]
    assert run.exit_code == 2
    assert any("the Docker engine became unreachable" in r for r in db["reasons"]), db["reasons"]
    left = leftovers(run.report["run_id"])
    assert left, "the target was removed although the engine was gone: the cut came too late to test anything"
    # Once the engine answers again, the labels let `reap` find and remove exactly what was left.
    # --force: the run ran inside this test's own process, which its labels name and which still runs, so
    # without it the reaper keeps them ("worker W pid P is running"), as it must for a live worker.
    reaped = CliRunner().invoke(app, ["reap", "--run", run.report["run_id"], "--force"])
    assert reaped.exit_code == 0, reaped.output
    for name in left:
        assert f"removed {'volume' if name.endswith('-data') else 'container'} {name}" in reaped.stdout
    assert leftovers(run.report["run_id"]) == []
