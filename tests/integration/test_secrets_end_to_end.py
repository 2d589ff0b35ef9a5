"""No configured secret reaches anything a run writes, on a real restore through the real CLI.

A configured SQL check quotes two secrets in its query, so the real server hands them back in
the check's findings; the evidence signing key and the Pushgateway password are configured too.
Every file the run wrote (report, HTML, JUnit, metrics, evidence, signed manifest), the results
store's database file, and the command's own output are then searched for each secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from verification.cli import app

pytestmark = pytest.mark.integration

HMAC_KEY = "Hm4c-Signing-Secret-7c1"
PUSH_PASSWORD = "Push-Gateway-Pass-93d"


def test_no_secret_in_any_output_of_a_real_run(demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("RESTOREPROOF_PREDICTION__PROBES", "never")
    config = tmp_path / "restoreproof.yaml"
    config.write_text(yaml.safe_dump({
        "report_dir": str(tmp_path / "reports"),
        "evidence": {"signing": "hmac", "signing_key": HMAC_KEY},
        # Nothing listens there: the push fails, and its warning must not carry the password either.
        "metrics": {"pushgateway_url": f"http://restoreproof:{PUSH_PASSWORD}@127.0.0.1:9/"},
        "checks": {"sql": [{"name": "quotes-secrets", "query": f"select '{HMAC_KEY} {PUSH_PASSWORD}'",
                            "expect": "something else", "required": False}]},
    }))
    result = CliRunner().invoke(app, ["verify", str(demo.repository), "-d", "demo1", "--config", str(config)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output  # the failing check is optional: the restore itself passed
    written = [p for p in (tmp_path / "reports").rglob("*") if p.is_file()]
    written += [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert any(p.name == "report.json" for p in written) and any(p.name == "results.db" for p in written)
    report = next(p for p in written if p.name == "report.json").read_text()
    assert "sql:quotes-secrets" in report and "********" in report  # the check ran and was masked
    for secret in (HMAC_KEY, PUSH_PASSWORD):
        assert secret not in result.output
        for path in written:
            assert secret.encode() not in path.read_bytes(), f"{secret} found in {path}"
