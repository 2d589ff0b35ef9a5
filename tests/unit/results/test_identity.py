"""Which stored entries are one database's, and which points are comparable (results.identity): pure."""

from __future__ import annotations

from tests.unit.factories import history_entry
from verification.model import DatabaseIdentity, SystemIdentifier
from verification.report_model import DatabaseEntry
from verification.results.identity import (
    LATEST,
    NAME_MATCH_NOTE,
    Match,
    comparable,
    describe_point,
    is_latest,
    match,
    point_of,
)

SID = SystemIdentifier("7409826393716421842", "backup/demo1/backup.info [db] db-system-id")
DEMO1 = DatabaseIdentity("/repo/a", "demo1", SID)


def entry(name: str = "demo1", identity: DatabaseIdentity | None = None, target: str = "latest") -> DatabaseEntry:
    made = history_entry(name, {"engine": "postgres", "image": "i", "host": "h"}, [])
    return made.model_copy(update={"identity": identity,
                                   "restore_point": made.restore_point.model_copy(update={"target": target})})


def test_the_key_is_the_source_the_name_and_the_identifiers_value() -> None:
    keys = {DEMO1.key, DatabaseIdentity("/repo/b", "demo1", SID).key,
            DatabaseIdentity("/repo/a", "demo2", SID).key,
            DatabaseIdentity("/repo/a", "demo1", SystemIdentifier("7409826393716421843", SID.basis)).key,
            DatabaseIdentity("/repo/a", "demo1").key,
            DatabaseIdentity("/repo/a", "demo1", SystemIdentifier("", SID.basis)).key}
    assert len(keys) == 6 and all(len(key) == 64 for key in keys)
    # Where it was read is said, not part of who it is: a reworded basis is the same database.
    assert DatabaseIdentity("/repo/a", "demo1", SystemIdentifier(SID.value, "elsewhere")).key == DEMO1.key
    assert DEMO1.describe() == "demo1 of /repo/a (system id 7409826393716421842)"
    assert DatabaseIdentity("/repo/a", "demo1").describe() == "demo1 of /repo/a (no system id known)"


def test_an_entry_with_an_identity_is_a_databases_exactly_when_the_keys_are_equal() -> None:
    assert match(DEMO1, "/anywhere", entry(identity=DEMO1)) is Match.IDENTITY
    other_cluster = DatabaseIdentity("/repo/a", "demo1", SystemIdentifier("1", SID.basis))
    assert match(DEMO1, "/repo/a", entry(identity=other_cluster)) is None
    assert match(DEMO1, "/repo/a", entry(identity=DatabaseIdentity("/repo/b", "demo1", SID))) is None


def test_an_entry_recorded_before_identities_is_matched_by_its_runs_source_and_its_name() -> None:
    assert match(DEMO1, "/repo/a", entry()) is Match.NAME
    assert match(DEMO1, "/repo/b", entry()) is None
    assert match(DEMO1, "/repo/a", entry("demo2")) is None
    assert (str(Match.IDENTITY), str(Match.NAME)) == ("identity", "source and name")
    assert NAME_MATCH_NOTE == ("recorded before restoreproof kept database identities (source, name, system id): "
                               "matched by its run's source and its name")


def test_only_the_same_point_is_comparable() -> None:
    at = "2026-11-20T00:00:00+00:00"
    assert point_of(entry(target=at)) == at and point_of(entry()) == LATEST == "latest"
    assert is_latest("latest") and not is_latest(at)
    assert comparable("latest", "latest") and comparable(at, at)
    assert not comparable("latest", at) and not comparable(at, "latest")
    assert not comparable(at, "2026-11-20T00:00:01+00:00")
    assert describe_point("latest") == "the latest point" and describe_point(at) == f"the point {at}"
