"""restoreproof's own infrastructure failing under a real run: the target's disk and memory, the results
store, several runs at once. None of these is a fault of the backups: a database they stop is "error"
naming the cause, never "failed" and never "passed", and nothing is left behind.
"""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from tests.integration.conftest import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def reasons(run, database: str) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(run.database(database)["reasons"])


# --- the target's resources ----------------------------------------------------------------------

def test_a_target_whose_data_volume_fills_up_is_an_error_saying_the_disk_is_full(demo, restoreproof, monkeypatch):
    # demo1's restore is about 100 MB: a 32 MiB data volume (a tmpfs of that size) fills up mid-restore.
    monkeypatch.setenv("RESTOREPROOF_DOCKER__DATA_SIZE", "32m")
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    db = run.database("demo1")
    assert db["verdict"] == "error", db["reasons"]
    assert run.exit_code == 2 and run.report["verdict"] == "error"
    first = db["reasons"][0]
    assert first.startswith("the target's disk is full: the data volume restoreproof-"), first
    assert "holds 32 MiB (docker.data_size)" in first and "0 bytes available" in first, first
    # pgBackRest's own words follow: its worker could not write the restored file.
    assert "pgbackrest restore of backup" in reasons(run, "demo1")
    assert "unable to write '/var/lib/restoreproof/data/" in reasons(run, "demo1")
    assert leftovers(run.report["run_id"]) == []


def test_a_target_out_of_memory_is_an_error_saying_it_was_oom_killed(demo, restoreproof, monkeypatch):
    # 32 MiB: pgBackRest restores, then the server's startup process is killed by the kernel's OOM killer
    # while it replays WAL into shared buffers (at 64 MiB it is a backend of pg_amcheck, which without the
    # memory check made pg_amcheck say "corruption", and the database "failed").
    # Or, as often on a busy machine, the kernel keeps dropping and reading back the processes' code
    # instead of killing one, and everything in the target crawls (it once ran past the test's 15
    # minutes, the recovery's budget being 30): the memory watch then stops the target after
    # docker.starved_after, 20 s here.
    monkeypatch.setenv("RESTOREPROOF_DOCKER__MEMORY", "32m")
    monkeypatch.setenv("RESTOREPROOF_DOCKER__STARVED_AFTER", "20")
    started = time.monotonic()
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    assert time.monotonic() - started < 300
    db = run.database("demo1")
    assert db["verdict"] == "error", db["reasons"]
    assert run.exit_code == 2 and run.report["verdict"] == "error"
    first = db["reasons"][0]
    assert first.startswith("the target ran out of memory: container restoreproof-"), first
    assert ("OOM-killed (limit 32 MiB, docker.memory): the kernel's OOM killer struck" in first
            or "starved (limit 32 MiB, docker.memory): it stayed at its memory limit for" in first), first
    said = reasons(run, "demo1")
    # What the kernel killed is said in the tools' own words (the server's, or a command's exit 137), or,
    # when it killed the postmaster itself (nothing is left to log it), the server said as stopped;
    # never as a timeout and never as a fault of the backups.
    assert ("was terminated by signal 9: Killed" in said or "was killed (exit 137)" in said
            or "the restored server did not come online, for a reason not shown to be a fault of the backups: "
               "server stopped" in said), said
    assert "did not finish" not in said, said
    assert not [r for r in db["reasons"] if "corruption" in r and not r.startswith("not taken as a verdict")]
    assert leftovers(run.report["run_id"]) == []


def test_the_restored_server_killed_while_it_recovers_is_an_error_at_once(demo, restoreproof, monkeypatch):
    # The postmaster SIGKILLed once pg_ctl has returned, as the wait for the end of recovery begins: its
    # parent gone, only the target's PID 1 can reap it. A PID 1 that reaps nothing (the image's `sleep`
    # before targets got an init) left it a zombie, `kill -0` found it "alive", and the wait ran out
    # its 30 minutes (postgres.recovery_timeout): a CI run once hung here past its 15.
    from verification.engines.postgres.engine import WAIT_ONLINE
    from verification.targets.docker import DockerTarget

    real = DockerTarget.run
    killed = []

    def run(self, argv, *, timeout, env=None):  # type: ignore[no-untyped-def]
        if argv[:3] == ["bash", "-c", WAIT_ONLINE]:
            data = argv[7]
            kill = real(self, ["bash", "-c", 'kill -KILL "$(head -1 "$1/postmaster.pid")"', "kill", data], timeout=30)
            assert kill.ok, kill.output
            killed.append(data)
        return real(self, argv, timeout=timeout, env=env)

    monkeypatch.setattr(DockerTarget, "run", run)
    monkeypatch.setenv("RESTOREPROOF_POSTGRES__RECOVERY_TIMEOUT", "90")  # so that the bug fails fast
    started = time.monotonic()
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    assert time.monotonic() - started < 240
    assert killed == ["/var/lib/restoreproof/data"]
    db = run.database("demo1")
    assert run.exit_code == 2 and db["verdict"] == "error", db["reasons"]
    said = reasons(run, "demo1")
    assert "the restored server did not come online, for a reason not shown to be a fault of the backups" in said, said
    assert "did not finish starting and recovering within" not in said, said
    assert leftovers(run.report["run_id"]) == []


# --- the results store ---------------------------------------------------------------------------

def _stop_before_publication(monkeypatch, server, back_after: float | None = None) -> None:  # type: ignore[no-untyped-def]
    """The store's server stopped just as the run publishes (everything verified and recorded), and
    started again `back_after` seconds later (never, if None)."""
    import threading

    from verification import pipeline

    real = pipeline.publish

    def publish(settings, run_id):  # type: ignore[no-untyped-def]
        server.stop()
        if back_after is not None:
            threading.Timer(back_after, server.start).start()
        return real(settings, run_id)

    monkeypatch.setattr(pipeline, "publish", publish)


def _store_rows(url: str, run_id: str) -> tuple[str, list[tuple[str, str]]]:
    from verification.results import ResultStore

    store = ResultStore(url)
    try:
        run, entries = store.run_with_reports(run_id)
        return run.verdict, [(e.database, str(e.verdict)) for e in entries]
    finally:
        store.close()


def test_the_results_store_gone_at_publication_fails_the_run_naming_it_and_the_reports_are_complete(
        demo, restoreproof, results_postgres, isolated, monkeypatch, caplog):
    import json
    import logging

    caplog.set_level(logging.WARNING, logger="verification.results.store")
    monkeypatch.setenv("RESTOREPROOF_RESULTS_URL", results_postgres.url)
    for key, value in {"ATTEMPTS": "3", "FIRST_WAIT": "0.5", "MAX_WAIT": "1"}.items():
        monkeypatch.setenv(f"RESTOREPROOF_RESULTS_RETRY__{key}", value)
    _stop_before_publication(monkeypatch, results_postgres)
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    assert run.exit_code == 2 and run.report is None, run.stdout
    said = " ".join(run.stderr.split())  # as printed, folded to the terminal's width
    (folder,) = (isolated / "reports").glob("2*")
    run_id = folder.name
    host = quote(str(results_postgres.folder), safe="")  # as SQLAlchemy renders a URL's query
    assert f"run {run_id} verified (passed) but not recorded: the results store postgresql+psycopg://postgres:" \
           f"********@/restoreproof?host={host}&port=5432 did not answer (opening the store) after 3 tries" in said, said
    assert f'OperationalError: connection is bad: connection to server on socket "{results_postgres.folder}/' \
           '.s.PGSQL.5432" failed: No such file or directory; its reports are complete on disk: ' \
           f"{folder}/report.json, {folder}/report.html" in said, said
    assert results_postgres.PASSWORD not in run.stderr + run.stdout
    # Publication's 3 tries (the run's lease, released after it, is tried as often, and said apart).
    assert len([r for r in caplog.records if "(opening the store: " in r.getMessage()]) == 2
    # Every output of the run is on disk, as a recorded run's would be, and says the store lacks it.
    report = json.loads((folder / "report.json").read_text())
    assert report["verdict"] == "passed" and [(d["database"], d["verdict"]) for d in report["databases"]] == [
        ("demo1", "passed")]
    assert report["not_verified"] == [] and report["finished_at"]
    (warning,) = [w for w in report["warnings"] if "not recorded in the results store" in w]
    assert "postgres:********@" in warning and "index.html does not list it" in warning
    assert "demo1" in (folder / "report.html").read_text()
    assert 'name="demo1"' in (folder / "junit.xml").read_text()
    assert "restoreproof_" in (folder / "metrics.prom").read_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "report.json" in json.dumps(manifest)
    assert not (isolated / "reports" / "index.html").exists()
    assert leftovers(run_id) == []
    # Once it is back, the store holds what it was given before it went: the run, not finished.
    results_postgres.start()
    assert _store_rows(results_postgres.url, run_id) == ("running", [("demo1", "passed")])


def test_the_results_store_back_within_its_retries_publishes_the_run(
        demo, restoreproof, results_postgres, isolated, monkeypatch, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="verification.results.store")
    monkeypatch.setenv("RESTOREPROOF_RESULTS_URL", results_postgres.url)
    for key, value in {"ATTEMPTS": "10", "FIRST_WAIT": "0.5", "MAX_WAIT": "2"}.items():
        monkeypatch.setenv(f"RESTOREPROOF_RESULTS_RETRY__{key}", value)
    _stop_before_publication(monkeypatch, results_postgres, back_after=3.0)
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    assert run.exit_code == 0, run.stderr
    assert run.report["verdict"] == "passed" and not run.report["warnings"]
    tries = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert tries and all("postgres:********@/restoreproof" in t for t in tries), tries
    run_id = run.report["run_id"]
    assert _store_rows(results_postgres.url, run_id) == ("passed", [("demo1", "passed")])
    assert run_id in (isolated / "reports" / "index.html").read_text()
    assert leftovers(run_id) == []


# --- several runs at once on one store -----------------------------------------------------------

CONCURRENT = 3


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_runs_at_once_on_one_store_lose_nothing_and_never_meet_a_lock(backend, mssql_copy, isolated, request):
    """Three `verify` processes started together on one state folder (its default SQLite store) or one
    PostgreSQL store, and one report folder: each records its run and both databases, none fails on a
    lock, and the store and the folder's index hold all three runs afterwards."""
    import json
    import os
    import subprocess
    import sys

    from verification.results import ResultStore

    root = mssql_copy("RestoreTimeClean", "DoubleDiffing")
    env = {**os.environ, "XDG_STATE_HOME": str(isolated / "state"), "RESTOREPROOF_PREDICTION__PROBES": "never"}
    url = f"sqlite:///{isolated / 'state' / 'restoreproof' / 'results.db'}"
    if backend == "postgresql":
        url = env["RESTOREPROOF_RESULTS_URL"] = request.getfixturevalue("results_postgres").url
    reports = isolated / "reports"
    # Offline: every step that writes the store (start, plans, each database's entry, finish, the index)
    # runs at full speed, nothing restored in between, so the runs' writes overlap as much as they can.
    runs = [subprocess.Popen([sys.executable, "-m", "verification.cli", "verify", str(root), "--engine", "mssql",
                              "--target", "offline", "--json", "--report-dir", str(reports)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(CONCURRENT)]
    finished = [run.communicate(timeout=300) for run in runs]
    said = [json.loads(out) for out, _ in finished]
    for run, (_, err) in zip(runs, finished, strict=True):
        assert run.returncode == 3, err  # offline, nothing wrong found: the code of its own (not a pass)
        assert "locked" not in err.lower() and "did not answer" not in err, err
    run_ids = sorted(report["run_id"] for report in said)
    assert len(set(run_ids)) == CONCURRENT
    store = ResultStore(url)
    try:
        for run_id in run_ids:
            row, entries = store.run_with_reports(run_id)
            assert row.verdict == "error" and row.finished_at is not None
            assert sorted((e.database, str(e.verdict)) for e in entries) == [
                ("RestoreTimeClean", "error"), ("doublediff", "error")]
            assert len(store.plans(run_id)) == 2
        assert sorted(r.run_id for r in store.recent_runs()) == run_ids
    finally:
        store.close()
    index = (reports / "index.html").read_text()
    assert all(run_id in index for run_id in run_ids)
    for run_id in run_ids:
        assert json.loads((reports / run_id / "report.json").read_text())["verdict"] == "error"


# --- the Docker engine restarted -----------------------------------------------------------------
# A private engine (tests/faults/conftest.py PrivateEngine), never the shared one: SIGTERM and started
# again, as `systemctl restart docker` does. The shared engine's containers are not touched.

def _verify_on(engine, repository, reports, isolated):  # type: ignore[no-untyped-def]
    """`restoreproof verify` of both stanzas as a process on `engine`, its progress lines on stderr."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DOCKER_HOST": engine.url, "XDG_STATE_HOME": str(isolated / "state"),
           "RESTOREPROOF_PREDICTION__PROBES": "never", "COLUMNS": "400"}
    return subprocess.Popen([sys.executable, "-m", "verification.cli", "verify", str(repository), "--target", "docker",
                             "--report-dir", str(reports)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _report(reports):  # type: ignore[no-untyped-def]
    import json

    (folder,) = [f for f in reports.iterdir() if f.is_dir() and f.name[0].isdigit()]
    return json.loads((folder / "report.json").read_text())


def test_the_docker_engine_restarted_mid_restore_errs_that_database_and_the_next_is_verified(
        demo, private_engine, isolated, monkeypatch):
    import re
    import threading

    from verification.targets.labels import DATABASE_LABEL, RUN_LABEL

    monkeypatch.setenv("DOCKER_HOST", private_engine.url)  # for `leftovers`
    restarted: list[str] = []

    def restart_once_restoring() -> None:
        client = private_engine.client()
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and not restarted:
                try:
                    running = client.containers.list(filters={"label": RUN_LABEL})
                except Exception:  # a container gone between the listing and its inspection
                    time.sleep(0.05)
                    continue
                for container in running:
                    try:
                        commands = [process[-1] for process in container.top()["Processes"]]  # CMD
                    except Exception:
                        continue
                    # pgBackRest's restore itself ("pgbackrest --stanza=... restore"), not a folder named so.
                    if any(re.search(r"\bpgbackrest .* restore$", c) for c in commands):
                        restarted.append(container.labels[DATABASE_LABEL])
                        client.close()
                        private_engine.restart(down=3.0)
                        return
                time.sleep(0.05)
        finally:
            client.close()

    watcher = threading.Thread(target=restart_once_restoring, daemon=True)
    watcher.start()
    reports = isolated / "reports"
    run = _verify_on(private_engine, demo.repository, reports, isolated)
    _, err = run.communicate(timeout=600)
    watcher.join(timeout=60)
    assert restarted, f"no restore was seen to restart the engine in the middle of:\n{err}"
    (in_flight,) = restarted
    report = _report(reports)
    verdicts = {d["database"]: d for d in report["databases"]}
    db = verdicts[in_flight]
    assert db["verdict"] == "error", db["reasons"]
    assert any(r.startswith("target: the Docker engine became unreachable while running pgbackrest in container "
                            f"restoreproof-{report['run_id'].lower()}-{in_flight}") for r in db["reasons"]), db["reasons"]
    # Its target, stopped by the engine's shutdown, was removed once the engine was back: nothing to reap.
    assert not [r for r in db["reasons"] if "was not removed" in r], db["reasons"]
    assert f"the Docker engine did not answer (removing restoreproof-{report['run_id'].lower()}-{in_flight}" in err
    (other,) = set(verdicts) - {in_flight}
    assert verdicts[other]["verdict"] == "passed", verdicts[other]["reasons"]
    assert run.returncode == 2 and report["verdict"] == "error"
    assert leftovers(report["run_id"]) == []


def test_the_docker_engine_down_when_the_next_target_starts_is_waited_for_and_the_run_passes(
        demo, private_engine, isolated, monkeypatch):
    import threading

    monkeypatch.setenv("DOCKER_HOST", private_engine.url)
    reports = isolated / "reports"
    run = _verify_on(private_engine, demo.repository, reports, isolated)
    assert run.stderr is not None
    said, restart = [], None
    for line in run.stderr:
        said.append(line)
        # The first database is verified and recorded (its target gone), the next one's not started.
        if restart is None and line.rstrip().endswith(": passed"):
            restart = threading.Thread(target=private_engine.restart, args=(5.0,))
            restart.start()
    run.wait(timeout=60)
    assert restart is not None, "".join(said)
    restart.join(timeout=120)
    err = "".join(said)
    report = _report(reports)
    assert [d["verdict"] for d in report["databases"]] == ["passed", "passed"], err
    assert run.returncode == 0, err
    second = report["databases"][1]["database"]
    assert f"the Docker engine did not answer (starting restoreproof-{report['run_id'].lower()}-{second}" in err, err
    assert leftovers(report["run_id"]) == []


# --- the target's tools ---------------------------------------------------------------------------

@pytest.fixture
def image_without(request):  # type: ignore[no-untyped-def]
    """The target image less one program (as an image of another PostgreSQL version lacks it), made by
    removing it from a container of the real image and committing that; removed afterwards."""
    import docker
    from verification.config import Settings

    client = docker.from_env()
    base = Settings().docker.postgres_image
    program = request.param
    container = client.containers.run(base, ["rm", f"/usr/lib/postgresql/15/bin/{program}"], detach=True,
                                      user="root", labels={"restoreproof.test": "image-without"})
    try:
        assert container.wait(timeout=60)["StatusCode"] == 0
        tag = f"restoreproof/postgres:15-without-{program.replace('_', '-')}"
        container.commit(repository=tag.split(":")[0], tag=tag.split(":")[1], changes=['CMD ["sleep", "infinity"]'])
    finally:
        container.remove(force=True)
    try:
        yield tag
    finally:
        client.images.remove(tag, force=True)
        client.close()


@pytest.mark.parametrize("image_without", ["pg_amcheck", "pg_checksums"], indirect=True)
def test_a_check_whose_program_is_missing_in_the_target_is_an_error_not_corruption(
        demo, restoreproof, monkeypatch, image_without):
    monkeypatch.setenv("RESTOREPROOF_DOCKER__POSTGRES_IMAGE", image_without)
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    db = run.database("demo1")
    assert (run.exit_code, db["verdict"]) == (2, "error"), db["reasons"]
    program = "pg_amcheck" if "amcheck" in image_without else "pg_checksums"
    check = next(c for c in db["checks"] if c["name"] == program)
    assert check["status"] == "error"
    assert check["summary"].startswith(f"{program} could not run: {program} was not found in the target (exit 127: ")
    assert "corruption" not in reasons(run, "demo1") and "bad" not in reasons(run, "demo1")
    assert leftovers(run.report["run_id"]) == []
