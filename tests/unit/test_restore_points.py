"""Choosing which point to test: reproducible by seed, inside the retention window, rotating."""

from datetime import UTC, datetime, timedelta

from tests.unit.factories import backup
from verification.model import BackupType
from verification.restore_points import PointChoice, PointStrategy, choose


def window():  # type: ignore[no-untyped-def]
    day = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
    sets = []
    for i in range(3):
        full = backup(f"full{i}", BackupType.FULL)
        sets.append(type(full)(**{**full.__dict__, "start": day + timedelta(days=7 * i),
                                  "finish": day + timedelta(days=7 * i, minutes=30)}))
    log = backup("log-last", BackupType.LOG)
    sets.append(type(log)(**{**log.__dict__, "start": day + timedelta(days=20), "finish": day + timedelta(days=20)}))
    return sets


def test_latest_is_the_default_and_chooses_no_time():
    at, rule = choose(PointChoice(), "db", window())
    assert at is None and rule.detail.startswith("latest")


def test_random_is_reproducible_inside_the_window_and_rotates():
    sets = window()
    first, rule = choose(PointChoice(PointStrategy.RANDOM, 42), "db", sets)
    again, _ = choose(PointChoice(PointStrategy.RANDOM, 42), "db", sets)
    assert first == again
    assert sets[0].finish <= first <= max(b.finish for b in sets)
    assert "seed 42" in rule.detail and rule.passed
    nights = {choose(PointChoice(PointStrategy.RANDOM, seed), "db", sets)[0] for seed in range(20)}
    assert len(nights) == 20  # a different point each night
    other_db = {choose(PointChoice(PointStrategy.RANDOM, seed), "other", sets)[0] for seed in range(20)}
    assert nights != other_db  # databases do not move in step


def test_older_full_never_picks_the_newest_full():
    sets = window()
    picked = {choose(PointChoice(PointStrategy.OLDER_FULL, seed), "db", sets)[0] for seed in range(30)}
    assert picked == {sets[0].finish, sets[1].finish}


def test_older_full_with_a_single_full_falls_back_to_latest_and_says_so():
    at, rule = choose(PointChoice(PointStrategy.OLDER_FULL, 1), "db", window()[2:])
    assert at is None and "single full" in rule.detail


def test_an_older_full_on_the_real_corpus(mssql_corpus):
    from typer.testing import CliRunner

    from verification.cli import app

    result = CliRunner().invoke(app, ["plan", str(mssql_corpus / "history/sql2016-stripe"), "--engine", "mssql",
                                      "--point", "older-full", "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    import json

    db = json.loads(result.stdout)["databases"][0]
    assert db["chain"]["backups"][0]["path"] == "Stripe1/restoretime.bak"  # the older of the two striped fulls
    assert db["stop_at"] == "2017-05-22T14:43:55+00:00"
    assert db["chain"]["rules"][0]["rule"] == "restore-point"


def test_without_continuous_history_random_picks_a_backup_end():
    sets = window()[:3]  # fulls only
    ends = {b.finish for b in sets}
    for seed in range(10):
        at, rule = choose(PointChoice(PointStrategy.RANDOM, seed), "db", sets, continuous=False)
        assert at in ends and "only backup ends can be restored to" in rule.detail
