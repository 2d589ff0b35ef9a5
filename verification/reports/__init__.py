"""Reports written for every run: report.json (data), report.html (people), evidence/ (raw outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verification.reports.html_report import render_html
from verification.reports.json_report import build_report, dumps


def write_reports(report: dict[str, Any], run_dir: Path) -> tuple[Path, Path]:
    run_dir.mkdir(parents=True, exist_ok=True)
    json_path, html_path = run_dir / "report.json", run_dir / "report.html"
    json_path.write_text(dumps(report), encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path


__all__ = ["build_report", "render_html", "write_reports"]
