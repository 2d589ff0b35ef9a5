"""Results on stdout, progress and warnings on stderr: the command as a process, its output redirected."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verification.exit_codes import ExitCode

CLI = [sys.executable, "-m", "verification.cli"]
RTC = "RestoreTimeClean"
ESC = "\x1b"  # any ANSI control sequence starts with it


def run(argv: list[str], tmp_path: Path) -> tuple[int, str, str]:
    """The command with stdout redirected to a file (as `> out.txt` does) and stderr to another; a terminal
    type and a narrow width that would make a console colour and wrap if it wrote to a terminal."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "RESTOREPROOF_PREDICTION__PROBES": "never",
           "TERM": "xterm-256color", "COLUMNS": "40"}
    for name in ("RESTOREPROOF_CONFIG", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        env.pop(name, None)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run(argv, stdout=stdout, stderr=stderr, env=env, timeout=300).returncode
    return code, out.read_text(), err.read_text()


@pytest.fixture
def clean_chain(mssql_corpus: Path, tmp_path: Path) -> Path:
    root = tmp_path / "mssql"
    shutil.copytree(mssql_corpus / RTC, root / RTC)
    return root


def test_plan_redirected_to_a_file_holds_the_plan_without_escapes_or_wrapping(clean_chain, tmp_path):
    code, out, err = run([*CLI, "plan", str(clean_chain), "--engine", "mssql"], tmp_path)
    assert code == ExitCode.PASSED, err
    lines = out.splitlines()
    assert lines[0] == f"{RTC}: complete"
    assert [line.split()[:2] for line in lines[1:6]] == [
        ["full", f"{RTC}/RestoreTimeClean.bak"], ["diff", f"{RTC}/RestoreTimeClean2.bak"],
        *(["log", f"{RTC}/RestoreTimeClean2_{n}.trn"] for n in (1, 2, 3))]
    assert any(line.startswith("  written by SQL Server") for line in lines)
    assert ESC not in out and ESC not in err
    assert max(len(line) for line in lines) > 40  # COLUMNS=40 given: long lines are kept whole
    assert err == ""  # nothing else: no progress, no warning for this clean folder


def test_verify_offline_verdict_and_report_on_stdout_progress_on_stderr_exit_3(clean_chain, tmp_path):
    code, out, err = run([*CLI, "verify", str(clean_chain), "--engine", "mssql", "--target", "offline",
                          "--report-dir", str(tmp_path / "reports")], tmp_path)
    assert code == ExitCode.OFFLINE_CLEAN == 3, out + err
    lines = out.splitlines()
    assert lines[:2] == [f"{RTC}: error", "  - not restored: offline verification asked for (--target offline)"]
    assert lines[2].startswith("  - page_verification (backup files, not a verdict on the data): no damaged page;")
    assert lines[3].startswith(f"report: {tmp_path / 'reports'}") and lines[3].endswith("/report.html")
    assert lines[4].strip().endswith("/report.json") and len(lines) == 5
    # Progress: time-stamped lines on stderr only.
    assert f"{RTC}: checking the backup files without a server" in err
    assert "checking the backup files" not in out and "run " not in out
    assert ESC not in out


def test_verify_offline_of_a_truncated_log_backup_fails_exit_1(clean_chain, tmp_path):
    victim = clean_chain / RTC / "RestoreTimeClean2_3.trn"
    victim.write_bytes(victim.read_bytes()[:20000])
    code, out, err = run([*CLI, "verify", str(clean_chain), "--engine", "mssql", "--target", "offline",
                          "--report-dir", str(tmp_path / "reports")], tmp_path)
    assert code == ExitCode.FAILED, out + err
    assert f"{RTC}: failed" in out.splitlines()
    assert "corrupt: RestoreTimeClean/RestoreTimeClean2_3.trn: end of file at offset 0x4e20" in out
