"""What every engine shares: the evidence folder and the data-checks phase."""

from __future__ import annotations

import time
from pathlib import Path

from verification.engines.base import DataAccess, Evidence, RestoreOutcome, run_data_checks
from verification.model import CheckKind, CheckResult, CheckStatus, PhaseName, PhaseStatus

SECRET = "tArget-pa55word-0rx"


def _access() -> DataAccess:
    return DataAccess(lambda database: f"mssql+pymssql://sa:{SECRET}@127.0.0.1:1/{database}", ("shop",), "shop",
                      None, None, (SECRET, SECRET.replace("-", "%2D")))


def test_the_data_checks_phase_masks_the_targets_secrets_in_what_the_checks_write_and_return(tmp_path):
    def leaky(access: DataAccess, evidence: Evidence) -> list[CheckResult]:
        url = access.url("shop")
        evidence.write("data-checks/result.json", f'{{"connection": "{url}"}}\n')
        site = tmp_path / "site"
        (site / "static").mkdir(parents=True)
        (site / "index.html").write_text(f"<p>{url}</p>")
        (site / "static" / "logo.png").write_bytes(b"\x89PNG\x00" + SECRET.replace("-", "%2D").encode())
        evidence.copy_tree(site, "data-docs")
        return [CheckResult("data:orders", CheckStatus.FAILED, f"cannot log in with {SECRET}", [f"url {url}"],
                            {"url": url, "nested": [{"said": SECRET.replace("-", "%2D")}]}, kind=CheckKind.DATA)]

    evidence = Evidence(tmp_path / "ev")
    outcome = RestoreOutcome()
    run_data_checks(leaky, _access(), evidence, outcome, time.monotonic(), databases=1)
    [check] = outcome.checks
    assert check.summary == "cannot log in with ********"
    assert check.findings == ["url mssql+pymssql://sa:********@127.0.0.1:1/shop"]
    assert check.details == {"url": "mssql+pymssql://sa:********@127.0.0.1:1/shop", "nested": [{"said": "********"}]}
    assert (tmp_path / "ev" / "data-checks" / "result.json").read_text() == (
        '{"connection": "mssql+pymssql://sa:********@127.0.0.1:1/shop"}\n')
    assert (tmp_path / "ev" / "data-docs" / "index.html").read_text() == (
        "<p>mssql+pymssql://sa:********@127.0.0.1:1/shop</p>")
    # What is not text is copied as it is (a site's images carry no data).
    assert (tmp_path / "ev" / "data-docs" / "static" / "logo.png").read_bytes().startswith(b"\x89PNG\x00")
    [phase] = outcome.phases
    assert (phase.name, phase.status, phase.details) == (PhaseName.DATA_CHECKS, PhaseStatus.MEASURED,
                                                         {"checks": 1, "databases": 1})


def test_evidence_masks_every_secret_hidden_so_far_the_longest_first(tmp_path: Path):
    evidence = Evidence(tmp_path)
    evidence.write("a.txt", f"{SECRET} plain")
    evidence.hide(["pa55"])
    evidence.hide([SECRET, ""])  # an empty value masks nothing
    evidence.write("b.txt", f"{SECRET} and pa55 plain")
    assert (tmp_path / "a.txt").read_text() == f"{SECRET} plain"  # written before it was known
    assert (tmp_path / "b.txt").read_text() == "******** and ******** plain"
    assert evidence.files == {"a.txt": f"{tmp_path.name}/a.txt", "b.txt": f"{tmp_path.name}/b.txt"}
