"""report.html (one run) and index.html (every run in the report folder), for people.

Each page is one self-contained file: plotly.js is inline once and every chart is drawn from data in the
page, so it opens offline, from an e-mail attachment or an audit archive, years later.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import ChainableUndefined, Environment, PackageLoader, select_autoescape

from verification.reports.charts import (
    chart_div,
    database_charts,
    mb_text,
    mbps_text,
    percent_text,
    plotly_js,
    runs_history_figure,
    seconds_text,
    utc,
    when_text,
)

# ChainableUndefined: reports from older schemas (1.2 has no prediction, objectives or drift) and
# databases that never came online lack whole branches; d.objectives.rto.met must then read as empty.
_env = Environment(loader=PackageLoader("verification.reports", "templates"),
                   autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True,
                   undefined=ChainableUndefined)
_env.filters.update(seconds=seconds_text, mb=mb_text, mbps=mbps_text, pct=percent_text, when=when_text)


def _databases(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    databases = report.get("databases")
    return [d for d in databases if isinstance(d, Mapping)] if isinstance(databases, list) else []


def _alerts(database: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    drift = database.get("drift")
    alerts = drift.get("alerts") if isinstance(drift, Mapping) else None
    return [a for a in alerts if isinstance(a, Mapping)] if isinstance(alerts, list) else []


def render_html(report: dict[str, Any]) -> str:
    databases = _databases(report)
    views = [{"d": d, "charts": database_charts(d, index), "alerts": _alerts(d)}
             for index, d in enumerate(databases, start=1)]
    alerts = [(d.get("database"), alert) for d in databases for alert in _alerts(d)]
    return _env.get_template("report.html.j2").render(r=report, views=views, alerts=alerts, plotly_js=plotly_js())


def _newest_first(report: Mapping[str, Any]) -> tuple[datetime, str]:
    return utc(report.get("started_at")) or datetime.min, str(report.get("run_id") or "")


def render_index(reports: list[dict[str, Any]], skipped: Sequence[tuple[str, str]] = ()) -> str:
    """The runs, newest first, with a recovery-over-time chart; skipped = (file, why) for reports not read."""
    runs = sorted(reports, key=_newest_first, reverse=True)
    fig = runs_history_figure(runs)
    chart = None if fig is None else chart_div(fig, "history", "rp-history-runs")
    return _env.get_template("index.html.j2").render(runs=runs, chart=chart, skipped=list(skipped),
                                                     plotly_js=plotly_js())


def load_reports(report_dir: Path) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Every report_dir/*/report.json that parses, and (file, why) for each that does not."""
    reports: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for path in sorted(report_dir.glob("*/report.json")):
        name = path.relative_to(report_dir).as_posix()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # ValueError covers bad JSON and bad UTF-8
            skipped.append((name, f"{type(exc).__name__}: {exc}"))
            continue
        if isinstance(data, dict):
            reports.append(data)
        else:
            skipped.append((name, f"not a report: the JSON is a {type(data).__name__}, not an object"))
    return reports, skipped


def write_index(report_dir: Path) -> Path:
    """(Re)write report_dir/index.html from the reports in the folder; returns its path."""
    reports, skipped = load_reports(report_dir)
    target = report_dir / "index.html"
    # Write beside and rename: two runs finishing together, or a reader mid-load, never see half a file.
    fd, temporary = tempfile.mkstemp(prefix=".index-", suffix=".html", dir=report_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(render_index(reports, skipped))
        os.chmod(temporary, 0o644)  # mkstemp makes it private; the index is as readable as the reports
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
