"""Every supported PostgreSQL major, end to end: a real repository written by that major's image (its own
PostgreSQL and pgBackRest), one stanza per way of writing it the pgBackRest has, verified by `restoreproof
verify` with no image setting, to "passed" with every check passed, the report naming both versions. A major
whose server comes from a PyPI wheel (14, 16: not Debian's build) is used only when named, so its image is
given by docker.postgres_images.

- plain: an older full, then full, diff, incr, and WAL archived between and after them;
- bundled: repo1-bundle=y, full then incr (pgBackRest 2.39 on; the option was internal in 2.36 to 2.38);
- block: repo1-block=y with bundling, full, diff and incr, rows updated in place between them so the
  later backups store changed blocks only (pgBackRest 2.46 on; beta in 2.45).

Which majors: RESTOREPROOF_TEST_PG_VERSIONS, "all" (`make test-versions`) or a list ("13,17"); unset (as in
`make test`), the oldest, 15 and the newest of verification/images/postgres/SUITES.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.integration.conftest import leftovers, shared_repository
from verification.cli import app
from verification.demo.source import DEFAULT_PG_VERSION, POSTGRES_IMAGE, _SourceCluster
from verification.images import ensure_image, image_labels, image_name, suites, wheels
from verification.targets.docker import docker_client

pytestmark = pytest.mark.integration

VERSIONS_ENV = "RESTOREPROOF_TEST_PG_VERSIONS"
CONF = "/etc/pgbackrest.conf"
TOOL_LABEL = "restoreproof.pgbackrest-version"
# The first pgBackRest with each option as a user's option (src/build/config/config.yaml of each release).
BUNDLING = (2, 39)
BLOCK_INCREMENTAL = (2, 46)
# The first PostgreSQL with the pg_amcheck program.
PG_AMCHECK = 14


def majors() -> list[str]:
    supported = sorted(suites(POSTGRES_IMAGE), key=int)
    asked = os.environ.get(VERSIONS_ENV, "").strip()
    if asked == "all":
        return supported
    if asked:
        # A major with no image is kept: its repository fails to be made, naming the ones there are.
        return [major.strip() for major in asked.replace(" ", ",").split(",") if major.strip()]
    return sorted({supported[0], DEFAULT_PG_VERSION, supported[-1]}, key=int)


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def kinds_of(pgbackrest: str) -> tuple[str, ...]:
    """The ways of writing a repository this pgBackRest has."""
    kinds = ["plain"]
    if version(pgbackrest) >= BUNDLING:
        kinds.append("bundled")
    if version(pgbackrest) >= BLOCK_INCREMENTAL:
        kinds.append("block")
    return tuple(kinds)


def test_the_ways_of_writing_follow_the_pgbackrest_releases() -> None:
    assert kinds_of("2.33") == ("plain",)
    assert kinds_of("2.45") == ("plain", "bundled")
    assert kinds_of("2.55.1") == kinds_of("2.60") == ("plain", "bundled", "block")


def _rows(cluster: _SourceCluster, n: int) -> None:
    cluster.psql(f"insert into t (note) select 'row ' || g from generate_series(1, {n}) g")


def _update(cluster: _SourceCluster, every: int) -> None:
    """Rows changed in place, here and there in the table's file: a block incremental stores those blocks."""
    cluster.psql(f"update t set note = note || ' changed' where id % {every} = 0")


def plain(cluster: _SourceCluster) -> None:
    cluster.backup("full")  # an older full, for --point older-full
    _rows(cluster, 500)
    cluster.backup("full")
    _rows(cluster, 500)
    cluster.backup("diff")
    _rows(cluster, 500)
    cluster.backup("incr")


def bundled(cluster: _SourceCluster) -> None:
    cluster.sh(f"printf 'repo1-bundle=y\\n' >> {CONF}", user="root")
    cluster.backup("full")
    _rows(cluster, 500)
    cluster.backup("incr")


def block(cluster: _SourceCluster) -> None:
    cluster.sh(f"printf 'repo1-bundle=y\\nrepo1-block=y\\n' >> {CONF}", user="root")
    cluster.backup("full")
    _update(cluster, 97)
    cluster.backup("diff")
    _update(cluster, 89)
    cluster.backup("incr")


WAYS: dict[str, Callable[[_SourceCluster], None]] = {"plain": plain, "bundled": bundled, "block": block}
BACKUPS = {"plain": ["full", "diff", "incr"], "bundled": ["full", "incr"], "block": ["full", "diff", "incr"]}


def _maker(image: str) -> Callable[[Path, str, str], None]:
    def make(repo: Path, stanza: str, run_id: str) -> None:
        cluster = _SourceCluster(docker_client(), image, stanza, repo, run_id)
        try:
            cluster.setup()
            cluster.psql("create table t (id bigserial primary key, at timestamptz not null "
                         "default clock_timestamp(), note text not null)")
            # Over 16 KiB of table: pgBackRest keeps a block map only of files at least that large.
            _rows(cluster, 2000)
            WAYS[stanza](cluster)
            _rows(cluster, 100)
            cluster.finish()
        finally:
            cluster.remove()
    return make


@dataclass(frozen=True)
class Verified:
    major: str
    pgbackrest: str
    image: str
    repo: Path
    kinds: tuple[str, ...]
    exit_code: int
    report: dict[str, Any]
    run_dir: Path

    def database(self, name: str) -> dict[str, Any]:
        return next(db for db in self.report["databases"] if db["database"] == name)


@pytest.fixture(scope="module", params=majors(), ids=lambda major: f"pg{major}")
def verified(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Verified:
    """The major's repository, made by its own image, verified once with no image setting."""
    major: str = request.param
    image = ensure_image(image_name(POSTGRES_IMAGE, major))
    pgbackrest = image_labels(image)[TOOL_LABEL]
    kinds = kinds_of(pgbackrest)
    repo = shared_repository(tmp_path_factory, f"pg{major}", kinds, _maker(image))
    reports = tmp_path_factory.mktemp(f"pg{major}-reports")
    with pytest.MonkeyPatch.context() as patch:
        # This module's own results store (the per-test state folder is not made yet at module scope).
        patch.setenv("XDG_STATE_HOME", str(reports / "state"))
        for name in ("RESTOREPROOF_DOCKER__POSTGRES_IMAGE", "RESTOREPROOF_DOCKER__POSTGRES_IMAGES"):
            patch.delenv(name, raising=False)
        if major in wheels(POSTGRES_IMAGE):
            patch.setenv("RESTOREPROOF_DOCKER__POSTGRES_IMAGES", json.dumps({major: image}))
        result = CliRunner().invoke(app, ["verify", str(repo), "--json", "--report-dir", str(reports)],
                                    catch_exceptions=False)
    report = json.loads(result.stdout)
    run_dir = next(reports.rglob("report.json")).parent
    return Verified(major, pgbackrest, image, repo, kinds, result.exit_code, report, run_dir)


def _manifest(repo: Path, stanza: str, kind: str) -> str:
    """The text of the stanza's newest backup of `kind`'s manifest."""
    suffix = {"full": "F", "diff": "D", "incr": "I"}[kind]
    label = max(p for p in (repo / "backup" / stanza).iterdir() if p.name.endswith(suffix))
    return (label / "backup.manifest").read_text()


def test_the_repository_is_written_each_way_its_pgbackrest_has(verified: Verified) -> None:
    for stanza in verified.kinds:
        for kind in BACKUPS[stanza]:
            manifest = _manifest(verified.repo, stanza, kind)
            assert f'backrest-version="{verified.pgbackrest}"' in manifest, (stanza, kind)
            assert f'db-version="{verified.major}"' in manifest, (stanza, kind)
    if "bundled" in verified.kinds:
        # Files in bundles: the manifest names each file's bundle.
        assert '"bni":' in _manifest(verified.repo, "bundled", "incr")
    if "block" in verified.kinds:
        # The incr stored changed blocks: a file with a block map.
        assert '"bim":' in _manifest(verified.repo, "block", "incr")


def integrity_checks(major: str) -> set[str]:
    """The integrity checks a verification of `major` makes: pg_amcheck (a program from PostgreSQL 14 on),
    before it amcheck's own functions (the check named amcheck); the pages' checksums; the repository."""
    return {"pg_amcheck" if int(major) >= PG_AMCHECK else "amcheck", "pg_checksums", "pgbackrest_verify"}


def test_each_way_verifies_to_passed_with_every_check_passed(verified: Verified) -> None:
    databases = {db["database"]: db for db in verified.report["databases"]}
    got = {name: (db["verdict"], {check["name"]: check["status"] for check in db["checks"]})
           for name, db in databases.items()}
    # Every check the run made passed, and at least the integrity checks were made.
    expected = {name: ("passed", dict.fromkeys(set(checks) | integrity_checks(verified.major), "passed"))
                for name, (_, checks) in got.items()}
    # Said whole (a dict in the message would be cut short): each reason and each check not passed.
    why = "\n".join(f"{name}: {said}" for name, db in databases.items() if got[name] != expected[name]
                    for said in db["reasons"] + [f"{check['name']} {check['status']}: {check['summary']}"
                                                 for check in db["checks"] if check["status"] != "passed"])
    assert (sorted(got), got) == (sorted(verified.kinds), expected), why
    for stanza in verified.kinds:
        # The chain is the backups the newest one references: a diff whose every file changed again
        # before the incr is not among them.
        types = [b["type"] for b in databases[stanza]["chain"]["backups"]]
        assert types in (BACKUPS[stanza], [BACKUPS[stanza][0], BACKUPS[stanza][-1]]), (stanza, types)
    assert verified.exit_code == 0
    assert leftovers(verified.report["run_id"]) == []


def test_the_report_names_the_versions_that_wrote_and_restored_each_backup(verified: Verified) -> None:
    for stanza in verified.kinds:
        db = verified.database(stanza)
        said = json.loads((verified.run_dir / "evidence" / db["evidence"]["versions.json"]).read_text())
        assert said["written_by"] == {"PostgreSQL": verified.major, "pgBackRest": verified.pgbackrest}
        assert said["target"]["image"] == verified.image
        assert said["postgres"].startswith(f"postgres (PostgreSQL) {verified.major}.")
        assert said["pgbackrest"] == f"pgBackRest {verified.pgbackrest}"


def test_an_older_full_s_own_consistent_point_is_reached_on_every_version(verified: Verified,
                                                                           tmp_path: Path) -> None:
    """The point a full backup ends at is its stop LSN: backup.info says it from pgBackRest 2.38, the
    manifest before that (2.33 here), and either way the restore is proven to reach it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        if verified.major in wheels(POSTGRES_IMAGE):
            patch.setenv("RESTOREPROOF_DOCKER__POSTGRES_IMAGES", json.dumps({verified.major: verified.image}))
        result = CliRunner().invoke(app, ["verify", str(verified.repo), "-d", "plain", "--point", "older-full",
                                          "--json", "--report-dir", str(tmp_path)], catch_exceptions=False)
    (db,) = json.loads(result.stdout)["databases"]
    full = db["chain"]["backups"][-1]
    assert full["type"] == "full" and full["stop_lsn"], full
    assert db["verdict"] == "passed", db["reasons"]
    assert f"backup {full['label']}'s consistent point ({full['stop_lsn']})" in db["restore_point"]["detail"], db
    assert leftovers(json.loads(result.stdout)["run_id"]) == []
