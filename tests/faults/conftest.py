"""Fault tests: real faults made on copies of real backups, run through the real command line.

Each test damages a private copy (the demo's pgBackRest repository made by real PostgreSQL and
pgBackRest, or the real SQL Server backups in ../shared/testdata), runs `restoreproof`, and
asserts the verdict, the exit code, and that the reason names the file, segment, LSN or page.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from verification.cli import app


@dataclass
class CliRun:
    exit_code: int
    report: dict[str, Any] | None
    stdout: str
    stderr: str

    def database(self, name: str) -> dict[str, Any]:
        assert self.report is not None, self.stderr
        return next(d for d in self.report["databases"] if d["database"] == name)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private state folder and results store; no prediction probes (they time links, not faults)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("RESTOREPROOF_PREDICTION__PROBES", "never")
    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    return tmp_path


@pytest.fixture
def restoreproof(isolated: Path) -> Callable[..., CliRun]:
    """restoreproof(command, source, *options) through the real CLI; --json reports are parsed."""

    def run(command: str, source: Path | str, *options: str) -> CliRun:
        args = [command, str(source), *options]
        if command == "verify":
            args += ["--json", "--report-dir", str(isolated / "reports")]
        elif command == "plan":
            args += ["--json"]
        result = CliRunner().invoke(app, args, catch_exceptions=False)
        report = None
        if result.stdout.strip().startswith("{"):
            report = json.loads(result.stdout)
        return CliRun(result.exit_code, report, result.stdout, result.stderr)

    return run


@pytest.fixture
def pg_repo(demo, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A private copy of the demo's pgBackRest repository (stanzas demo1 and demo2)."""
    copy = tmp_path / "backups"
    shutil.copytree(demo.repository, copy, symlinks=True)
    return copy
