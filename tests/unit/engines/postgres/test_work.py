"""What each phase of a PostgreSQL verification moves, from the plan alone (for prediction)."""

from pathlib import Path

from verification.config import Settings
from verification.engines.postgres.chain import plan
from verification.engines.postgres.repository import discover
from verification.engines.postgres.work import phase_work
from verification.model import PhaseWork
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024
FULL = "backup/demo1/20261122-195034F"


def test_each_phase_s_work_comes_from_the_plan_and_the_settings(captured_repo: Path) -> None:
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    latest = plan(source, stanza, None, MB16)
    latest.files = [f"{FULL}/pg_data/base/1/1.gz", f"{FULL}/pg_data/global/2.gz", f"{FULL}/backup.manifest",
                    "archive/demo1/15-1/0000000100000000/000000010000000000000008-x.gz"]
    size, repo_size = 54933109, 4830734  # backup.info's backup-info-size and -repo-size of the incremental
    assert phase_work(latest, Settings()) == [
        PhaseWork("provision"),
        PhaseWork("transfer", repo_size, size, True, 2, 2,
                  "the backup set's bytes in the repository read, the database's bytes written"),
        PhaseWork("server_start"),
        PhaseWork("redo", 3 * MB16, 3 * MB16, note="3 WAL segments to replay (at most)"),
        PhaseWork("recovery_end"),
        PhaseWork("integrity_check", size, size, note="the database's bytes checked"),
        PhaseWork("data_checks", note="Great Expectations: 0 configured suites, baselines and freshness of every table"),
        PhaseWork("repository_verify"),
    ]
    settings = Settings()
    settings.postgres.repository_verify = False
    settings.postgres.restore_process_max = 4
    latest.files = [f"{FULL}/pg_data/base/1/1"]  # uncompressed
    transfer = phase_work(latest, settings)[1]
    assert (transfer.compressed, transfer.parallel, transfer.files) == (False, 4, 1)
    assert [w.phase for w in phase_work(latest, settings)][-1] == "data_checks"
    settings.checks.enabled = False
    assert [w.phase for w in phase_work(latest, settings)][-1] == "integrity_check"
