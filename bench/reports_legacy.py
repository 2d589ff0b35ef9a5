"""index.html as restoreproof wrote it before the store-paged index (commit c90b20f), for bench/reports.py's
baseline only: every REPORT_DIR/*/report.json read and validated, every run in one page and in the
recovery chart, plotly.js inline. Kept here, not in the package: nothing else may use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import plotly.graph_objects as go
import plotly.offline
from pydantic import ValidationError

from verification.report_model import RunReport
from verification.reports.charts import (
    PALETTE,
    TARGET_IN_VIEW,
    _figure,
    _margin_note,
    _plain,
    chart_div,
    seconds_text,
    utc,
)
from verification.reports.html_report import env

# The index template of c90b20f (its footer aside); the page then took plotly.js inline in its head.
INDEX = (Path(__file__).resolve().parent / "reports_legacy_index.html.j2").read_text()


def load_reports(report_dir: Path) -> tuple[list[RunReport], list[tuple[str, str]]]:
    reports: list[RunReport] = []
    skipped: list[tuple[str, str]] = []
    for path in sorted(report_dir.glob("*/report.json")):
        name = path.relative_to(report_dir).as_posix()
        try:
            reports.append(RunReport.model_validate_json(path.read_bytes()))
        except ValidationError as exc:
            skipped.append((name, str(exc.errors()[0]["msg"])))
        except OSError as exc:
            skipped.append((name, f"{type(exc).__name__}: {exc}"))
    return reports, skipped


def runs_history_figure(reports: Sequence[RunReport]) -> go.Figure | None:
    by_database: dict[str, list[tuple[datetime, float | None, float | None, str]]] = {}
    for report in reports:
        started = utc(report.started_at)
        if started is None:
            continue
        for d in report.databases:
            rto = d.objectives.rto.target_seconds if d.objectives else None
            by_database.setdefault(_plain(d.database), []).append(
                (started, d.recovery_seconds, rto, _plain(report.run_id)))
    if not any(seconds is not None for rows in by_database.values() for _, seconds, _, _ in rows):
        return None
    fig = _figure(380, x_title="run started (UTC)", y_title="recovery (s)")
    notes = []
    for index, (name, rows) in enumerate(sorted(by_database.items())):
        rows.sort(key=lambda row: row[0])
        color = PALETTE[index % len(PALETTE)]
        fig.add_scatter(x=[r[0] for r in rows], y=[r[1] for r in rows], mode="lines+markers", name=name,
                        line={"color": color}, customdata=[r[3] for r in rows],
                        hovertemplate=f"{name}: %{{y:.2f}} s<br>%{{customdata}}<extra></extra>")
        values = [r[1] for r in rows if r[1] is not None]
        targets = [r[2] for r in rows if r[2] is not None]
        if not targets:
            continue
        target = targets[-1]
        if values and target > TARGET_IN_VIEW * max(values):
            notes.append(f"{name} RTO {seconds_text(target)}")
            continue
        fig.add_scatter(x=[rows[0][0], rows[-1][0]], y=[target, target], mode="lines", name=f"{name} RTO",
                        line={"color": color, "dash": "dash"}, hovertemplate=f"{name} RTO {seconds_text(target)}"
                        "<extra></extra>")
    if notes:
        _margin_note(fig, "far above the recoveries, not drawn: " + "; ".join(notes))
    fig.update_yaxes(rangemode="tozero")
    return fig


def write_index(report_dir: Path) -> Path:
    reports, skipped = load_reports(report_dir)
    runs = sorted(reports, key=lambda r: (r.started_at, r.run_id), reverse=True)
    fig = runs_history_figure(runs)
    chart = None if fig is None else chart_div(fig, "history", "rp-history-runs")
    html = env.from_string(INDEX).render(runs=runs, chart=chart, skipped=skipped, plotly=None)
    html = html.replace("</head>", f"<script>{plotly.offline.get_plotlyjs()}</script>\n</head>", 1)
    target = report_dir / "index-legacy.html"
    target.write_text(html, encoding="utf-8")
    return target
