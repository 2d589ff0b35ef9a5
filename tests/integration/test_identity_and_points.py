"""Issue 29, classes 2 and 3, on real repositories through the real command line: healthy backups pass.

- A verification of an earlier point (`--at`, `--point random`) is held only to a baseline of the same
  point of the same database (or records its own and says so), never to the latest point's row counts.
- Two clusters under one stanza name in two repositories (each its own initdb, so its own
  db-system-id) keep their own baselines: the second is never held to the first's tables, and the
  first's history goes on after it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import CliRun, isolated, restoreproof  # noqa: F401 (fixtures)
from tests.faults.identity_clusters import small_cluster
from tests.integration.conftest import leftovers

pytestmark = [pytest.mark.integration]


def baseline_of(db: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in db["checks"] if c["name"] == "data_baseline")


def passed(run: CliRun, name: str = "demo1") -> dict[str, Any]:
    assert run.report is not None, run.stdout + run.stderr
    db = run.database(name)
    assert (run.exit_code, run.report["verdict"], db["verdict"]) == (0, "passed", "passed"), db["reasons"]
    assert leftovers(run.report["run_id"]) == []
    return db


def test_points_in_time_are_held_only_to_a_baseline_of_their_own_point(demo, restoreproof):  # noqa: F811
    repo = demo.repository
    latest = passed(restoreproof("verify", repo, "-d", "demo1"))
    assert baseline_of(latest)["details"]["baseline"]["point"] == "latest"
    rows_now = baseline_of(latest)["details"]["tables"]["postgres.public.events"]["rows"]

    # The demo's marker before its incremental backup: a moment with fewer events than now (more than
    # the 10% drop tolerance), which a comparison with the latest baseline called lost rows.
    at = datetime.fromisoformat(demo.manifest["stanzas"]["demo1"]["markers"]["pitr-before"]).isoformat()
    first = restoreproof("verify", repo, "-d", "demo1", "--at", at)
    earlier = passed(first)
    check = baseline_of(earlier)
    point = earlier["restore_point"]["target"]
    assert check["details"]["tables"]["postgres.public.events"]["rows"] < rows_now * 0.9
    assert check["details"]["compared"] is False
    assert check["details"]["baseline"] | {"rule": None} == {"point": point, "compared_with": None, "rule": None}
    assert f"the first baseline of the point {point}: recorded for later verifications of the same point" in \
        check["summary"]

    # The same point again: held to the first verification of that point, and the same rows found.
    again = passed(restoreproof("verify", repo, "-d", "demo1", "--at", at))
    check = baseline_of(again)
    assert again["restore_point"]["target"] == point
    assert check["details"]["compared"] is True
    assert (check["details"]["baseline"]["compared_with"], check["details"]["baseline"]["matched_by"]) == (
        first.report["run_id"], "identity")
    assert check["details"]["tables"]["postgres.public.events"] == \
        baseline_of(earlier)["details"]["tables"]["postgres.public.events"]

    # The nightly rotation's strategy: a seeded random point, another one each night, passes on its own.
    rotated = passed(restoreproof("verify", repo, "-d", "demo1", "--point", "random", "--seed", "29"))
    assert rotated["restore_point"]["target"] not in ("latest", point)
    assert baseline_of(rotated)["details"]["baseline"]["compared_with"] is None
    # No trend, and no alert, from runs minutes apart: the report says why and with which defaults.
    drift = rotated["drift"]
    assert (drift["trend"], drift["alerts"], drift["series_kind"], drift["min_runs"], drift["min_days"]) == (
        None, [], "point-in-time", 5, 3.0)
    assert any("a trend needs at least 5 runs over at least 3 days" in note for note in drift["notes"])


def test_two_clusters_under_one_stanza_name_keep_their_own_baselines(demo, restoreproof, tmp_path: Path):  # noqa: F811
    # Another repository whose stanza demo1 is another cluster (its own initdb): one table, 30 rows.
    other = tmp_path / "other-repository"
    system_id = small_cluster(other, "demo1", rows=30)

    ours = passed(restoreproof("verify", demo.repository, "-d", "demo1"))
    theirs = passed(restoreproof("verify", other, "-d", "demo1"))
    assert theirs["identity"]["system_id"]["value"] == system_id
    assert theirs["identity"]["system_id"]["basis"] == "backup/demo1/backup.info [db] db-system-id"
    assert (theirs["identity"]["source"], theirs["identity"]["name"]) == (str(other.resolve()), "demo1")
    assert ours["identity"]["system_id"]["value"] != system_id
    check = baseline_of(theirs)
    # Never held to the other repository's pgbench tables and events: its own first baseline.
    assert check["details"]["compared"] is False and check["details"]["baseline"]["compared_with"] is None
    assert set(check["details"]["tables"]) == {"postgres.public.items"}
    assert "the first baseline: recorded for the next verification" in check["summary"]

    # And the first repository's history goes on: held to its own earlier run, not to the other's.
    first_run = ours["identity"]
    again = restoreproof("verify", demo.repository, "-d", "demo1")
    check = baseline_of(passed(again))
    assert again.database("demo1")["identity"] == first_run
    assert check["details"]["compared"] is True
    assert check["details"]["notes"] == [] or not any("new since" in n or "missing" in n
                                                      for n in check["details"]["notes"])
