"""--target auto means Docker: an engine that does not answer is said, never replaced by the host."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from verification.cli import app

pytestmark = pytest.mark.integration


def test_auto_with_no_docker_engine_is_an_error_naming_the_socket_and_the_local_setting(demo, tmp_path, monkeypatch):
    socket = tmp_path / "no-engine.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
    result = CliRunner().invoke(app, ["verify", str(demo.repository), "-d", "demo1", "--target", "auto", "--json",
                                      "--report-dir", str(tmp_path / "reports")], catch_exceptions=False)
    db = json.loads(result.stdout)["databases"][0]
    assert (result.exit_code, db["verdict"]) == (2, "error"), db["reasons"]
    reason = " ".join(db["reasons"])
    assert f"no Docker engine answers at unix://{socket} (DOCKER_HOST)" in reason
    assert "--target local (the setting target: local, or RESTOREPROOF_TARGET=local)" in reason
    assert db["target"] is None or db["target"].get("kind") != "local"
    assert not any(p["name"] == "transfer" and p["status"] == "measured" for p in db["phases"])
