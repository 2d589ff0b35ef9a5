"""report.html (one run) and index.html (every run in the report folder), for people.

Each page is one self-contained file: plotly.js is inline once and every chart is drawn from data in the
page, so it opens offline, from an e-mail attachment or an audit archive, years later.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from pydantic import ValidationError

from verification.report_model import RunReport
from verification.reports.charts import (
    chart_div,
    database_charts,
    iso_text,
    mb_text,
    mbps_text,
    percent_text,
    plotly_js,
    runs_history_figure,
    seconds_text,
    when_text,
)

# StrictUndefined: the templates read the typed report, so a misspelt field fails (a test renders every
# branch) instead of showing as nothing. Sections an older report lacks are None, tested for explicitly.
_env = Environment(loader=PackageLoader("verification.reports", "templates"),
                   autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True,
                   undefined=StrictUndefined)
_env.filters.update(iso=iso_text, seconds=seconds_text, mb=mb_text, mbps=mbps_text, pct=percent_text, when=when_text)


def render_html(report: RunReport) -> str:
    views = [{"d": d, "charts": database_charts(d, index), "alerts": d.alerts}
             for index, d in enumerate(report.databases, start=1)]
    alerts = [(d.database, alert) for d in report.databases for alert in d.alerts]
    return _env.get_template("report.html.j2").render(r=report, views=views, alerts=alerts, plotly_js=plotly_js())


def _newest_first(report: RunReport) -> tuple[datetime, str]:
    return report.started_at, report.run_id


def render_index(reports: list[RunReport], skipped: Sequence[tuple[str, str]] = ()) -> str:
    """The runs, newest first, with a recovery-over-time chart; skipped = (file, why) for reports not read."""
    runs = sorted(reports, key=_newest_first, reverse=True)
    fig = runs_history_figure(runs)
    chart = None if fig is None else chart_div(fig, "history", "rp-history-runs")
    return _env.get_template("index.html.j2").render(runs=runs, chart=chart, skipped=list(skipped),
                                                     plotly_js=plotly_js())


def load_reports(report_dir: Path) -> tuple[list[RunReport], list[tuple[str, str]]]:
    """Every report_dir/*/report.json that reads as a report, and (file, why) for each that does not."""
    reports: list[RunReport] = []
    skipped: list[tuple[str, str]] = []
    for path in sorted(report_dir.glob("*/report.json")):
        name = path.relative_to(report_dir).as_posix()
        try:
            reports.append(RunReport.model_validate_json(path.read_bytes()))
        except ValidationError as exc:  # bad JSON, not an object, or not a report of a known version
            skipped.append((name, _why_not_a_report(exc)))
        except OSError as exc:
            skipped.append((name, f"{type(exc).__name__}: {exc}"))
    return reports, skipped


def _why_not_a_report(exc: ValidationError) -> str:
    """The first thing wrong, where it is, and how many more there are."""
    errors = exc.errors()
    first = errors[0]
    if first["type"] == "json_invalid":
        return f"not JSON: {first['msg']}"
    if first["type"] == "model_type":
        return f"not a report: the JSON is a {type(first['input']).__name__}, not an object"
    where = ".".join(str(part) for part in first["loc"])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"not a report: {where}: {first['msg']}{more}"


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
