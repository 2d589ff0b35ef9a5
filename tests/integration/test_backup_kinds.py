"""Every kind of backup pgBackRest makes, on real clusters, verifies to "passed" when healthy.

Each stanza is its own small cluster (initdb with checksums, archiving to one repository), backed
up the way one kind of user does it; the newest backup of each is what "latest" restores.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.integration.conftest import leftovers, shared_repository
from verification.cli import app
from verification.demo.source import DATA, _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client

pytestmark = pytest.mark.integration

IMAGE = "restoreproof/postgres:15"
CONF = "/etc/pgbackrest.conf"


def _rows(cluster: _SourceCluster, n: int) -> None:
    cluster.psql(f"insert into t (note) select 'row ' || g from generate_series(1, {n}) g")


def offline(cluster: _SourceCluster) -> None:
    """Online full, then the server stopped and backed up with --no-online (no WAL range recorded)."""
    cluster.backup("full")
    _rows(cluster, 500)
    cluster.sh(f"pg_ctl stop -w -m fast -D {DATA} >/dev/null && "
               f"pgbackrest --stanza={cluster.stanza} --no-online --type=full backup && "
               f"pg_ctl start -w -D {DATA} -l /var/lib/restoreproof/source.log >/dev/null")


def bundled_annotated(cluster: _SourceCluster) -> None:
    """File bundling (repo1-bundle) and annotations, full then incr."""
    cluster.sh(f"printf 'repo1-bundle=y\\n' >> {CONF}", user="root")
    cluster.sh(f"pgbackrest --stanza={cluster.stanza} --type=full --annotation=source=nightly backup")
    _rows(cluster, 500)
    cluster.sh(f"pgbackrest --stanza={cluster.stanza} --type=incr --annotation=ticket=OPS-1 backup")


def archive_copy(cluster: _SourceCluster) -> None:
    """--archive-copy: the backup's own WAL copied into it too; then diff."""
    cluster.sh(f"pgbackrest --stanza={cluster.stanza} --type=full --archive-copy backup")
    _rows(cluster, 500)
    cluster.backup("diff")


STANDBY = "/var/lib/restoreproof/standby"


def from_standby(cluster: _SourceCluster) -> None:
    """backup-standby: a physical standby of the primary, in the same container on its own port,
    streaming from it; two fulls (an older one for --point older-full) and an incr, their files copied
    from the standby (pg2), the primary (pg1) starting and stopping each."""
    cluster.sh(f"pg_basebackup -h /tmp -D {STANDBY} -R -X stream -c fast && "
               f"printf 'port = 5433\\n' >> {STANDBY}/postgresql.conf && "
               f"pg_ctl start -w -D {STANDBY} -l /var/lib/restoreproof/standby.log >/dev/null")
    cluster.sh(f"printf 'pg2-path={STANDBY}\\npg2-port=5433\\npg2-socket-path=/tmp\\nbackup-standby=y\\n' >> {CONF}",
               user="root")
    for kind in ("full", "full", "incr"):
        said = cluster.sh(f"pgbackrest --stanza={cluster.stanza} --type={kind} --log-level-console=info backup")
        # pgBackRest waits for the standby to replay to the backup's start before copying from it.
        assert "replay on the standby reached" in said, said
        _rows(cluster, 500)
    # Gone before the repository is read: `check` and the restores that follow know the primary only.
    cluster.sh(f"pg_ctl stop -w -m fast -D {STANDBY} >/dev/null && rm -rf {STANDBY}")
    cluster.sh(f"sed -i '/^pg2-/d; /^backup-standby=/d' {CONF} && chown postgres: {CONF}", user="root")


def quiet(cluster: _SourceCluster) -> None:
    """Two fulls and nothing written after the first: no transaction follows its end."""
    cluster.backup("full")
    cluster.backup("full")


def tablespace_zst(cluster: _SourceCluster) -> None:
    """A table and its index in a tablespace outside the data folder; zstd compression, two processes and
    hard links between backups (repo1-hardlink): options production sets, none changing what is restored."""
    cluster.sh("mkdir -p /var/lib/restoreproof/ts1", user="root")
    cluster.sh("chown postgres:postgres /var/lib/restoreproof/ts1", user="root")
    cluster.psql("create tablespace ts1 location '/var/lib/restoreproof/ts1'")
    cluster.psql("create table moved (id int primary key, note text) tablespace ts1")
    cluster.psql("create index moved_note on moved (note) tablespace ts1")
    cluster.psql("insert into moved select g, 'moved ' || g from generate_series(1, 2000) g")
    cluster.sh(f"printf 'compress-type=zst\\nprocess-max=2\\nrepo1-hardlink=y\\n' >> {CONF}", user="root")
    cluster.backup("full")
    cluster.psql("insert into moved select g, 'moved ' || g from generate_series(2001, 2500) g")
    cluster.backup("incr")


def outside_config(cluster: _SourceCluster) -> None:
    """Debian's layout: postgresql.conf, pg_hba.conf and pg_ident.conf outside the data folder, so no backup
    holds them; max_prepared_transactions 5 there, and a prepared transaction left pending across the
    backups (an orphan of a distributed transaction manager)."""
    etc = "/var/lib/restoreproof/etc"
    lines = f"max_prepared_transactions = 5\nhba_file = '{etc}/pg_hba.conf'\nident_file = '{etc}/pg_ident.conf'\n"
    cluster.sh(f"pg_ctl stop -w -m fast -D {DATA} >/dev/null && mkdir -p {etc} && "
               f"mv {DATA}/postgresql.conf {DATA}/pg_hba.conf {DATA}/pg_ident.conf {etc}/ && "
               f'printf "%s" "$LINES" >> {etc}/postgresql.conf && '
               f"pg_ctl start -w -D {DATA} -o '-c config_file={etc}/postgresql.conf' "
               "-l /var/lib/restoreproof/source.log >/dev/null", env={"LINES": lines})
    cluster.sh("psql -X -q -v ON_ERROR_STOP=1 -h /tmp -d postgres -c \"begin; insert into t (note) "
               "values ('prepared'); prepare transaction 'orphan';\"")
    cluster.backup("full")
    _rows(cluster, 500)
    cluster.backup("incr")


def locales(cluster: _SourceCluster) -> None:
    """A cluster made under en_US.UTF-8 (as most hosts' default locale makes it) and a database of its own
    under de_DE.UTF-8, each with a text index ordered by its collation."""
    cluster.psql("create index t_note on t (note)")
    cluster.sh("createdb -h /tmp --template=template0 --locale=de_DE.UTF-8 kunden")
    cluster.sh("psql -X -q -v ON_ERROR_STOP=1 -h /tmp -d kunden -c \"create table k (name text primary key); "
               "insert into k select 'Kunde ' || g || ' äöü' from generate_series(1, 2000) g\"")
    cluster.backup("full")
    _rows(cluster, 500)
    cluster.backup("diff")


KINDS: dict[str, Callable[[_SourceCluster], None]] = {
    "offline": offline, "bundled": bundled_annotated, "archivecopy": archive_copy, "quiet": quiet,
    "tablespace": tablespace_zst, "standby": from_standby, "etcconf": outside_config,
    "locales": locales}
# Written after the kind's backups, before the WAL is switched for the last time.
AFTER = {"quiet": 0}
# More initdb options, by kind.
INITDB = {"locales": "--locale=en_US.UTF-8"}


def _make(repo: Path, stanza: str, run_id: str) -> None:
    cluster = _SourceCluster(docker_client(), ensure_image(IMAGE), stanza, repo, run_id)
    try:
        cluster.setup(INITDB.get(stanza, ""))
        cluster.psql("create table t (id bigserial primary key, at timestamptz not null default clock_timestamp(), "
                     "note text not null)")
        _rows(cluster, 1000)
        KINDS[stanza](cluster)
        if AFTER.get(stanza, 100):
            _rows(cluster, AFTER.get(stanza, 100))
        cluster.finish()
    finally:
        cluster.remove()


@pytest.fixture(scope="module")
def kinds_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_repository(tmp_path_factory, "kinds", KINDS, _make)


def test_each_kind_of_backup_verifies_to_passed(kinds_repo: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["verify", str(kinds_repo), "--json", "--report-dir", str(tmp_path)],
                                catch_exceptions=False)
    report = json.loads(result.stdout)
    verdicts = {d["database"]: (d["verdict"], d["reasons"]) for d in report["databases"]}
    assert {name: verdict for name, (verdict, _) in verdicts.items()} == dict.fromkeys(KINDS, "passed"), verdicts
    assert result.exit_code == 0
    by_name = {d["database"]: d for d in report["databases"]}
    offline_db = by_name["offline"]
    assert offline_db["chain"]["wal"] is None
    assert any(r.startswith('server log: "database system was shut down at ') for r in offline_db["reasons"])
    assert [b["type"] for b in by_name["bundled"]["chain"]["backups"]] == ["full", "incr"]
    assert [b["type"] for b in by_name["archivecopy"]["chain"]["backups"]] == ["full", "diff"]
    assert [b["type"] for b in by_name["tablespace"]["chain"]["backups"]] == ["full", "incr"]
    assert any(path.suffix == ".zst" for path in (kinds_repo / "archive" / "tablespace").rglob("0000*"))
    standby = by_name["standby"]["chain"]
    assert [b["type"] for b in standby["backups"]] == ["full", "incr"]
    labels = ", ".join(f"{b['type']} {b['label']}" for b in standby["backups"])
    assert {"rule": "copied-from-standby", "passed": True, "detail": (
        f"{labels} copied from a standby (option-backup-standby in backup/standby/backup.info), begun and ended on "
        "the primary (backup_label, WAL range and backup-lsn-stop are the primary's)")} in standby["rules"]
    assert leftovers(report["run_id"]) == []


def test_the_plan_names_what_a_bundled_backup_needs_of_the_target_s_pgbackrest(kinds_repo: Path) -> None:
    result = CliRunner().invoke(app, ["plan", str(kinds_repo), "--json"], catch_exceptions=False)
    needs = {p["database"]: p["needs"] for p in json.loads(result.stdout)["databases"]}
    (bundle,) = needs.pop("bundled")
    assert bundle["tool"] == "pgBackRest" and bundle["version"] == "2.39"
    assert re.fullmatch(r"file bundling: \[backup\] backup-bundle in backup/bundled/\d{8}-\d{6}F/backup.manifest",
                        bundle["why"]), bundle
    assert needs == {name: [] for name in KINDS if name != "bundled"}


def test_a_point_after_an_offline_backup_is_refused_at_plan_as_an_error(kinds_repo: Path) -> None:
    info = (kinds_repo / "backup" / "offline" / "backup.info").read_text()
    # Just after the offline full ended: no WAL range leads there from it.
    stop = max(int(part.split(":")[1]) for part in info.replace(",", "\n").splitlines()
               if part.startswith('"backup-timestamp-stop"'))
    from datetime import UTC, datetime

    at = datetime.fromtimestamp(stop + 1, UTC).isoformat()
    result = CliRunner().invoke(app, ["plan", str(kinds_repo), "--at", at, "--json"], catch_exceptions=False)
    assert result.exit_code == 2, result.stdout
    planned = json.loads(result.stdout)
    text = json.dumps(next(p for p in planned["databases"] if p["database"] == "offline"))
    assert '"refused"' in text and "point-after-offline-backup" in text


def test_a_point_after_the_archives_end_is_refused_before_any_restore(kinds_repo: Path, tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    newest = max(p.stat().st_mtime for p in (kinds_repo / "archive" / "bundled").rglob("0000*"))
    at = (datetime.fromtimestamp(newest, UTC) + timedelta(minutes=10)).isoformat()
    result = CliRunner().invoke(app, ["verify", str(kinds_repo), "-d", "bundled", "--at", at, "--json",
                                      "--report-dir", str(tmp_path)], catch_exceptions=False)
    db = json.loads(result.stdout)["databases"][0]
    assert (result.exit_code, db["verdict"], db["chain"]["status"]) == (2, "error", "refused"), db["reasons"]
    # (Ten minutes after it, beyond the two clocks' tolerance: perhaps after now too, said as such.)
    assert db["reasons"][0].startswith(f"not restored: the point {at} is after ")
    assert not any(p["name"] == "transfer" and p["status"] == "measured" for p in db["phases"])


@pytest.mark.parametrize("stanza", ["quiet", "standby"])
def test_an_older_full_is_restored_to_its_consistent_point(kinds_repo: Path, tmp_path: Path, stanza: str) -> None:
    """On a quiet database no transaction follows the full; a standby's full ends where the primary ended it."""
    result = CliRunner().invoke(app, ["verify", str(kinds_repo), "-d", stanza, "--point", "older-full", "--json",
                                      "--report-dir", str(tmp_path)], catch_exceptions=False)
    db = json.loads(result.stdout)["databases"][0]
    assert (result.exit_code, db["verdict"]) == (0, "passed"), db["reasons"]
    (full,) = db["chain"]["backups"]
    assert full["type"] == "full"
    assert f'server log: "consistent recovery state reached at {full["stop_lsn"]}", backup {full["label"]}\'s end ' \
        "(backup-lsn-stop)" in "\n".join(db["reasons"]), db["reasons"]


def test_a_time_with_no_transaction_after_it_is_an_error_never_failed(kinds_repo: Path, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    info = (kinds_repo / "backup" / "quiet" / "backup.info").read_text()
    first_end = min(int(part.split(":")[1]) for part in info.replace(",", "\n").splitlines()
                    if part.startswith('"backup-timestamp-stop"'))
    at = datetime.fromtimestamp(first_end, UTC).isoformat()
    result = CliRunner().invoke(app, ["verify", str(kinds_repo), "-d", "quiet", "--at", at, "--json",
                                      "--report-dir", str(tmp_path)], catch_exceptions=False)
    db = json.loads(result.stdout)["databases"][0]
    assert (result.exit_code, db["verdict"]) == (2, "error"), db["reasons"]
    assert any(r.startswith(f"the archive holds no transaction after {at}") for r in db["reasons"]), db["reasons"]


def test_a_random_point_on_a_quiet_database_is_proven_as_the_archive_s_end(kinds_repo: Path,
                                                                          tmp_path: Path) -> None:
    from datetime import UTC, datetime

    info = (kinds_repo / "backup" / "quiet" / "backup.info").read_text()
    stops = sorted(int(part.split(":")[1]) for part in info.replace(",", "\n").splitlines()
                   if part.startswith('"backup-timestamp-stop"'))
    result = CliRunner().invoke(app, ["verify", str(kinds_repo), "-d", "quiet", "--point", "random", "--seed", "7",
                                      "--json", "--report-dir", str(tmp_path)], catch_exceptions=False)
    db = json.loads(result.stdout)["databases"][0]
    at = db["restore_point"]["target"]
    # The moment lies after the first full's end, where nothing was written: the server refuses it.
    assert stops[0] <= datetime.fromisoformat(at).timestamp() <= stops[-1], (at, stops)
    assert (result.exit_code, db["verdict"]) == (0, "passed"), db["reasons"]
    said = (f'random: {at}; the archive holds no transaction after {at} (server: "recovery ended before configured '
            f"recovery target was reached\"), so the state at {at} is the archive's end: recovery continued to the "
            "end and is proven as latest")
    assert said in db["reasons"], db["reasons"]
    assert db["restore_point"]["detail"].startswith(said)
    # Proven as latest: every segment to the archive's end, its last record read with pg_waldump.
    assert any(r.startswith("server log: redo done at ") and "the plan's last segment is" in r for r in db["reasons"])
    assert any(r.startswith("WAL read with pg_waldump from ") and "redo done at" in r for r in db["reasons"])
    phases = {p["name"]: p for p in db["phases"]}
    assert len(phases["server_start"]["details"]["starts_seconds"]) == 2
    assert "both starts are counted" in phases["redo"]["details"]["note"]
    assert {"server.log", "server-to-end.log"} <= set(db["evidence"]), db["evidence"]
    assert datetime.fromisoformat(db["restore_point"]["achieved"]) <= datetime.fromisoformat(at).astimezone(UTC)
