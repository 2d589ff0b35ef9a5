"""Plotly figures for report.html and index.html, and the unit-stating text the pages share with them.

Every figure is built from the typed report (across runs: the results store's daily aggregates) alone
(plotly.graph_objects, no pandas) and rendered as a fragment without plotly.js: the page loads the report
folder's one copy of plotly.js (verification.reports.assets), so it opens offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from html import escape
from typing import Any, NamedTuple

import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from verification.model import PhaseStatus
from verification.report_model import BackupEntry, DatabaseEntry
from verification.results.summaries import DailyRecovery

# The data-chart values tests and readers can rely on.
CHART_KINDS = ("phases", "chain", "objectives", "history", "throughput")

NONE = "\u2013"  # an en dash where a figure is missing
MB = 1048576  # the report's sizes are in MB = bytes / 1048576 (MiB), as in the tables
# System fonts only: plotly's default family names a web font the offline file must not fetch.
FONT = "system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif"
MEASURED, PREDICTED, TARGET, TREND = "#1f5fbf", "#e07b39", "#b3261e", "#6b7280"
TYPE_COLORS = {"full": "#1f5fbf", "diff": "#2e9e5b", "incr": "#e39b1b", "log": "#8e5cc4"}
VERDICT_COLORS = {"passed": MEASURED, "failed": TARGET, "error": "#8a4b00"}
PALETTE = ("#1f5fbf", "#2e9e5b", "#e07b39", "#8e5cc4", "#b3261e", "#17becf", "#8c564b", "#e377c2")
# For more databases than PALETTE has colours: plotly's 24 dark and 26 alphabet colours, told apart in the legend.
MANY_COLORS = (*qualitative.Dark24, *qualitative.Alphabet)
# A target more than this many times the largest value would flatten the data to a line at zero;
# it is then named in a note instead of drawn (the text and the objectives chart still give it).
TARGET_IN_VIEW = 4.0
DAY_MS = 86_400_000  # a day on a plotly date axis
# A time axis spans at least this: runs seconds apart (or one run alone) would otherwise get ticks in
# milliseconds, a precision no run time has.
MIN_TIME_SPAN = timedelta(hours=1)
# The index chart past this many databases: its legend becomes a scrolling column beside the plot, so the
# plot keeps its height whatever the count.
LEGEND_BESIDE = 8
# The modebar's PNG export is client-side; the logo would link to plotly.com.
_CONFIG = {"displaylogo": False, "responsive": True}


# ---- numbers and units ------------------------------------------------------------------------------------------


def number(value: Any) -> float | None:
    """The value as a float, or None for anything else (None, a missing field, a bool, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def seconds_text(value: Any) -> str:
    """'4.82 s', '900 s (15 min)', '14400 s (4 h)': exact seconds first, a human scale beside large ones."""
    seconds = number(value)
    if seconds is None:
        return NONE
    text = f"{seconds:.2f} s" if abs(seconds) < 100 else f"{seconds:.0f} s"
    scale = abs(seconds)
    if scale >= 2 * 86400:
        return f"{text} ({seconds / 86400:.1f} d)"
    if scale >= 2 * 3600:
        return f"{text} ({seconds / 3600:.1f} h)"
    if scale >= 120:
        return f"{text} ({seconds / 60:.0f} min)"
    return text


def mb_text(value: Any) -> str:
    size = number(value)
    return NONE if size is None else f"{size / MB:.1f} MB"


def mbps_text(value: Any) -> str:
    rate = number(value)
    return NONE if rate is None else f"{rate / MB:.1f} MB/s"


def percent_text(value: Any) -> str:
    share = number(value)
    return NONE if share is None else f"{share:+.1f} %"


def utc(value: Any) -> datetime | None:
    """A time (or ISO 8601 text) as a naive UTC datetime: plotly.js date axes ignore offsets, so convert first."""
    if isinstance(value, str) and value:
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def iso_text(value: datetime | None) -> str:
    """A report time as report.json writes it (ISO 8601 with its offset)."""
    return NONE if value is None else value.isoformat()


def when_text(value: Any) -> str:
    moment = utc(value)
    if moment is None:
        return value if isinstance(value, str) and value else NONE
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


# ---- page plumbing --------------------------------------------------------------------------------------------


def chart_div(fig: go.Figure | dict[str, Any], kind: str, div_id: str) -> Markup:
    """The figure (or its JSON, written without validation) as a fragment in a container tests can find:
    class rp-chart, data-chart=<kind>.

    A fixed div_id keeps the page byte-for-byte reproducible (plotly's default is a random uuid).
    """
    if kind not in CHART_KINDS:
        raise ValueError(f"unknown chart kind {kind!r}")
    body = pio.to_html(fig, validate=False, full_html=False, include_plotlyjs=False, include_mathjax=False,
                       div_id=div_id, config=_CONFIG)
    return Markup(f'<div class="rp-chart" data-chart="{kind}">{body}</div>')


def _figure(height: int, *, x_title: str = "", y_title: str = "") -> go.Figure:
    fig = go.Figure()
    fig.update_layout(template="plotly_white", height=height, font={"family": FONT, "size": 12},
                      margin={"l": 10, "r": 20, "t": 40, "b": 40},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
                      xaxis_title=x_title, yaxis_title=y_title, hoverlabel={"font_family": FONT})
    fig.update_yaxes(automargin=True)
    return fig


@cache
def _white_template() -> dict[str, Any]:
    template: dict[str, Any] = pio.templates["plotly_white"].to_plotly_json()
    return template


def _layout(height: int, *, x_title: str = "", y_title: str = "") -> dict[str, Any]:
    """_figure()'s layout as plotly's JSON, for a figure built as JSON."""
    return {"template": _white_template(), "height": height, "font": {"family": FONT, "size": 12},
            "margin": {"l": 10, "r": 20, "t": 40, "b": 40},
            "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
            "xaxis": {"title": {"text": x_title}}, "yaxis": {"title": {"text": y_title}, "automargin": True},
            "hoverlabel": {"font": {"family": FONT}}}


def _note(text: str) -> dict[str, Any]:
    """_margin_note()'s annotation as plotly's JSON."""
    return {"xref": "paper", "yref": "paper", "x": 1, "y": 1, "xanchor": "right", "yanchor": "bottom", "yshift": 4,
            "showarrow": False, "text": text, "font": {"color": TARGET, "size": 11}}


def _plain(value: Any) -> str:
    """Report text for plotly labels, which read <b>, <br> and entities as markup: show it as written."""
    return escape(str(value), quote=False)


# ---- per database ---------------------------------------------------------------------------------------------


def phases_figure(database: DatabaseEntry) -> go.Figure | None:
    """Predicted vs measured seconds per phase; absent phases left out, not_reached ones noted on their row."""
    rows = [p for p in database.phases if p.status is not PhaseStatus.ABSENT]
    measured = [p.seconds if p.status is PhaseStatus.MEASURED else None for p in rows]
    predicted = [p.predicted_seconds for p in rows]
    if not any(v is not None for v in measured + predicted):
        return None
    names = [_plain(p.name) for p in rows]
    fig = _figure(90 + 44 * len(rows), x_title="seconds (s)")
    for label, values, color in (("measured", measured, MEASURED), ("predicted", predicted, PREDICTED)):
        if any(v is not None for v in values):
            fig.add_bar(name=label, y=names, x=values, orientation="h", marker_color=color,
                        text=[seconds_text(v) if v is not None else "" for v in values], textposition="outside",
                        cliponaxis=False, hovertemplate=f"%{{y}}: %{{x:.3f}} s {label}<extra></extra>")
    for name, phase in zip(names, rows, strict=True):
        if phase.status is PhaseStatus.NOT_REACHED:
            # In the measured bar's slot (the upper one of the pair), where the bar would be.
            fig.add_annotation(x=0, y=name, text="<i>not reached</i>", showarrow=False, xanchor="left", xshift=4,
                               yshift=9, font={"color": "#4b5563", "size": 11})
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_yaxes(autorange="reversed")  # pipeline order, top to bottom
    fig.update_xaxes(rangemode="tozero")
    return fig


class _Span(NamedTuple):
    """One row of the chain diagram."""

    start: datetime
    finish: datetime
    kind: str  # full, diff, incr, log, or WAL
    label: str
    hover: str
    references: list[str]


def _backup_span(start: datetime, backup: BackupEntry) -> _Span:
    finish = max(start, utc(backup.finish) or start)
    label = _plain(backup.label or backup.path or "?")
    hover = (f"<b>{label}</b><br>{_plain(backup.type)} backup<br>{when_text(backup.start)} to "
             f"{when_text(backup.finish)} ({seconds_text((finish - start).total_seconds())})<br>"
             f"size {mb_text(backup.size_bytes)}, in repository {mb_text(backup.repo_size_bytes)}")
    return _Span(start, finish, str(backup.type), label, hover, [_plain(r) for r in backup.references])


def chain_figure(database: DatabaseEntry) -> go.Figure | None:
    """The chain on a time axis: a bar per backup from start to finish, the WAL replayed, the restore point."""
    chain = database.chain
    backups = sorted(((moment, b) for b in chain.backups if (moment := utc(b.start))), key=lambda pair: pair[0])
    if not backups:
        return None
    rpo = database.objectives.rpo if database.objectives else None
    achieved = utc(database.restore_point.achieved)
    newest = utc(rpo.newest_backup) if rpo else None
    gap = rpo.worst_log_gap if rpo else None
    gap_start, gap_end = (utc(gap.start), utc(gap.end)) if gap else (None, None)

    spans = [_backup_span(start, b) for start, b in backups]
    wal = chain.wal
    if wal:
        # Replay starts at the backup whose WAL starts the range (else the newest) and ends at the restore point.
        first = next((s for s, b in backups if b.start_wal and b.start_wal == wal.first), backups[-1][0])
        end = max(first, achieved or newest or max(s.finish for s in spans))
        label = _plain(f"WAL {wal.first} to {wal.last}: {wal.segments} segments")
        spans.append(_Span(first, end, "WAL", label,
                           f"<b>{label}</b><br>" + _plain(f"timeline {wal.timeline}; bound: {wal.bound}"), []))

    moments = [m for s in spans for m in (s.start, s.finish)]
    moments += [m for m in (achieved, newest, gap_start, gap_end) if m]
    low, high = min(moments), max(moments)
    middle = low + (high - low) / 2
    fig = _figure(170 + 46 * len(spans), x_title="time (UTC)")
    shown: set[str] = set()
    for row, span in enumerate(spans):
        color = TYPE_COLORS.get(span.kind, TREND)
        # Labels go on the side with room, so the ones near the right edge are not clipped.
        left = span.start > middle
        fig.add_scatter(x=[span.start, span.finish], y=[row, row], mode="lines+markers+text", name=span.kind,
                        legendgroup=span.kind, showlegend=span.kind not in shown, line={"color": color, "width": 12},
                        marker={"color": color, "size": 14, "symbol": "line-ns",
                                "line": {"width": 3, "color": color}},
                        text=[span.label, ""] if left else ["", span.label],
                        textposition="middle left" if left else "middle right",
                        hovertemplate=f"{span.hover}<extra></extra>")
        shown.add(span.kind)
    rows = {span.label: row for row, span in enumerate(spans)}
    for row, span in enumerate(spans[:80]):  # arrows past a few dozen backups are noise, not information
        for parent in span.references:
            if parent in rows:
                fig.add_annotation(x=spans[rows[parent]].finish, y=rows[parent], ax=span.start, ay=row,
                                   axref="x", ayref="y", text="", showarrow=True, arrowhead=2, arrowwidth=1.2,
                                   arrowcolor=TREND)
    marks: list[tuple[datetime, datetime, str, str, str]] = []  # from, to, label, color, line dash
    if achieved:
        marks.append((achieved, achieved, f"restore point {achieved:%Y-%m-%d %H:%M:%S}", "#116329", "solid"))
    if newest:
        marks.append((newest, newest, f"newest backup {newest:%Y-%m-%d %H:%M:%S}", TREND, "dash"))
    if gap_start and gap_end:
        fig.add_vrect(x0=gap_start, x1=gap_end, fillcolor=TARGET, opacity=0.12, line_width=0)
        marks.append((gap_start, gap_end, f"worst log gap {seconds_text(rpo.worst_log_gap_seconds if rpo else None)}, "
                      f"{gap_start:%H:%M:%S} to {gap_end:%H:%M:%S}", TARGET, ""))
    # The marks sit minutes apart on an axis of days: their labels stack above the plot, each ending at its
    # line, instead of piling up on the bars.
    fig.update_layout(margin_t=44 + 16 * len(marks))
    for stack, (moment, until, text, color, dash) in enumerate(marks):
        if dash:  # add_shape, not add_vline: add_vline's annotation arithmetic fails on date axes
            fig.add_shape(type="line", x0=moment, x1=moment, y0=0, y1=1, yref="paper",
                          line={"color": color, "dash": dash, "width": 2})
        fig.add_annotation(x=until, y=1, yref="paper", yanchor="bottom", xanchor="right", yshift=2 + 16 * stack,
                           showarrow=False, text=text, font={"color": color, "size": 11},
                           bgcolor="rgba(255,255,255,.85)")
    pad = max((high - low) * 0.04, timedelta(minutes=1))
    fig.update_xaxes(range=[low - pad, high + pad], type="date")
    fig.update_yaxes(tickvals=list(range(len(spans))), ticktext=[s.kind for s in spans], autorange="reversed",
                     showgrid=False, zeroline=False)
    return fig


def objectives_figure(database: DatabaseEntry) -> go.Figure | None:
    """RTO and RPO as bullet bars: what was measured (and predicted) against the target tick."""
    objectives = database.objectives
    if objectives is None:
        return None
    rto, rpo = objectives.rto, objectives.rpo
    panels = [("RTO", [("measured recovery", rto.measured_seconds, MEASURED),
                       ("predicted recovery", rto.predicted_seconds, PREDICTED)], rto.target_seconds),
              ("RPO", [("worst log gap", rpo.worst_log_gap_seconds, MEASURED),
                       ("restore point behind newest backup", rpo.behind_newest_seconds, PREDICTED)],
               rpo.target_seconds)]
    fig = make_subplots(rows=len(panels), cols=1, vertical_spacing=0.35 / len(panels),
                        subplot_titles=[_panel_title(name, bars, target) for name, bars, target in panels])
    fig.update_layout(template="plotly_white", height=90 + 120 * len(panels), showlegend=False,
                      font={"family": FONT, "size": 12}, margin={"l": 10, "r": 40, "t": 40, "b": 30})
    for index, (name, bars, target) in enumerate(panels, start=1):
        values = [number(v) for _, v, _ in bars]
        labels = [label for label, _, _ in bars]
        fig.add_bar(y=labels, x=values, orientation="h", marker_color=[c for _, _, c in bars], row=index, col=1,
                    text=[seconds_text(v) for v in values], textposition="outside", cliponaxis=False,
                    hovertemplate="%{y}: %{x:.2f} s<extra></extra>")
        if target is not None:
            # A marker, not a shape: shapes and annotations need log10 coordinates on a log axis, markers do not.
            fig.add_scatter(x=[target] * len(labels), y=labels, mode="markers", row=index, col=1,
                            marker={"symbol": "line-ns-open", "size": 34, "color": TARGET,
                                    "line": {"width": 3, "color": TARGET}},
                            hovertemplate=f"{name} target {seconds_text(target)}<extra></extra>")
        log = _wants_log([*values, target])
        fig.update_xaxes(type="log" if log else "linear", rangemode="normal" if log else "tozero", row=index, col=1)
    fig.update_yaxes(automargin=True, autorange="reversed")
    return fig


def _wants_log(values: Sequence[float | None]) -> bool:
    """Targets of hours against recoveries of seconds: only a log axis shows both."""
    known = [v for v in values if v]
    return len(known) > 1 and max(known) / min(known) > 50


def _panel_title(name: str, bars: Sequence[tuple[str, Any, str]], target: float | None) -> str:
    scale = ", log scale" if _wants_log([*(number(v) for _, v, _ in bars), target]) else ""
    goal = f"target {seconds_text(target)} (red tick)" if target is not None else "no target set"
    return f"{name} in seconds{scale}: {goal}"


def history_figure(database: DatabaseEntry) -> go.Figure | None:
    """drift.series: measured recovery (markers), predicted (line), the trend to its RTO crossing, the RTO."""
    drift = database.drift
    if drift is None or not drift.series:
        return None
    series = sorted(((utc(p.at) or datetime.min, p) for p in drift.series), key=lambda pair: pair[0])
    times = [at for at, _ in series]
    measured = [p.recovery_seconds for _, p in series]
    predicted = [p.predicted_seconds for _, p in series]
    fig = _figure(360, x_title="run time (UTC)", y_title="recovery (s)")
    fig.add_scatter(x=times, y=measured, mode="markers", name="measured recovery",
                    marker={"size": 9, "color": [VERDICT_COLORS.get(str(p.verdict), TREND) for _, p in series]},
                    customdata=[[_plain(p.run_id), _plain(p.verdict)] for _, p in series],
                    hovertemplate="%{customdata[0]} (%{customdata[1]})<br>%{y:.2f} s measured<extra></extra>")
    lost = [(at, p) for (at, p), seconds in zip(series, measured, strict=True) if seconds is None]
    if lost:  # a run that never came online has no recovery time, but must not vanish from the history
        fig.add_scatter(x=[at for at, _ in lost], y=[0] * len(lost), mode="markers", name="never online",
                        marker={"symbol": "x", "size": 11, "color": TARGET}, cliponaxis=False,
                        customdata=[_plain(p.run_id) for _, p in lost],
                        hovertemplate="%{customdata}: never came online<extra></extra>")
    if any(v is not None for v in predicted):
        # One prediction alone is a point: a line through it would draw nothing.
        alone = sum(v is not None for v in predicted) == 1
        fig.add_scatter(x=times, y=predicted, mode="markers" if alone else "lines", name="predicted",
                        line={"color": PREDICTED, "width": 2}, marker={"color": PREDICTED, "symbol": "diamond-open"},
                        hovertemplate="%{y:.2f} s predicted<extra></extra>")
    trend = drift.trend
    crossing_at = utc(drift.crossing.at) if drift.crossing else None
    end = max(times[-1], crossing_at or times[-1])
    trend_start = utc(trend.start) if trend else None
    if trend is not None and trend_start is not None:
        slope, intercept = trend.slope_seconds_per_day, trend.intercept_seconds
        ends = [trend_start, end]
        fig.add_scatter(x=ends, y=[intercept + slope * (t - trend_start) / timedelta(days=1) for t in ends],
                        mode="lines", name=f"trend ({slope:+.3f} s/day)", line={"color": TREND, "dash": "dot"},
                        hovertemplate="trend %{y:.2f} s on %{x}<extra></extra>")
    rto = database.objectives.rto.target_seconds if database.objectives else None
    values = [v for v in measured + predicted if v is not None]
    _target_line(fig, rto, [min(times[0], trend_start or times[0]), end], values, force=crossing_at is not None)
    if crossing_at and rto is not None:
        fig.add_scatter(x=[crossing_at], y=[rto], mode="markers+text", name="trend meets RTO",
                        marker={"symbol": "diamond", "size": 11, "color": TARGET}, textposition="top left",
                        text=[f"trend reaches the RTO ~{crossing_at:%Y-%m-%d}"], textfont={"color": TARGET})
    fig.update_yaxes(rangemode="tozero")
    _run_time_axis(fig, [*times, end, *([trend_start] if trend_start else [])])
    return fig


def _target_line(fig: go.Figure, target: float | None, span: Sequence[datetime], values: Sequence[float],
                 *, force: bool = False) -> None:
    """The RTO as a horizontal line, or, when it would squash the data flat, a note saying where it is."""
    if target is None:
        return
    top = max(values, default=0.0)
    if force or top <= 0 or target <= TARGET_IN_VIEW * top:
        fig.add_scatter(x=list(span), y=[target, target], mode="lines", name=f"RTO target {seconds_text(target)}",
                        line={"color": TARGET, "dash": "dash", "width": 2},
                        hovertemplate=f"RTO target {seconds_text(target)}<extra></extra>")
    else:
        _margin_note(fig, f"RTO target {seconds_text(target)}: {target / top:.0f} times the largest value, not drawn")


def time_range(times: Sequence[datetime]) -> list[datetime]:
    """A run-time axis' range: the times padded by 5 %, and at least MIN_TIME_SPAN wide."""
    low, high = min(times), max(times)
    pad = max((high - low) * 0.05, (MIN_TIME_SPAN - (high - low)) / 2)
    return [low - pad, high + pad]


def _run_time_axis(fig: go.Figure, times: Sequence[datetime]) -> None:
    # Over an hour at least, plotly's own ticks are minutes or coarser, the date said once beneath them.
    fig.update_xaxes(type="date", range=time_range(times), hoverformat="%Y-%m-%d %H:%M:%S")


def _margin_note(fig: go.Figure, text: str) -> None:
    """A note above the plot's top right corner, clear of the data and of a line drawn at the top."""
    fig.add_annotation(**_note(text))


def throughput_figure(database: DatabaseEntry) -> go.Figure | None:
    """Transfer throughput per run (MB/s): a slower source or target shows here before it shows in the RTO."""
    series = database.drift.series if database.drift else []
    points = sorted(((utc(p.at) or datetime.min, p.transfer_bytes_per_second / MB, p) for p in series
                     if p.transfer_bytes_per_second is not None), key=lambda row: row[0])
    if not points:
        return None
    fig = _figure(260, x_title="run time (UTC)", y_title="transfer (MB/s)")
    fig.update_layout(margin_t=20)  # no legend to make room for
    fig.add_scatter(x=[at for at, _, _ in points], y=[rate for _, rate, _ in points], mode="lines+markers",
                    name="transfer MB/s", line={"color": "#2e9e5b"}, showlegend=False,
                    customdata=[[_plain(p.run_id), mb_text(p.transfer_bytes)] for _, _, p in points],
                    hovertemplate="%{customdata[0]}<br>%{y:.1f} MB/s (%{customdata[1]})<extra></extra>")
    fig.update_yaxes(rangemode="tozero")
    _run_time_axis(fig, [at for at, _, _ in points])
    return fig


FIGURES = {"objectives": objectives_figure, "phases": phases_figure, "chain": chain_figure,
           "history": history_figure, "throughput": throughput_figure}


def database_charts(database: DatabaseEntry, index: int) -> dict[str, Markup | None]:
    """Every chart of one database, by kind; None where the report has nothing to draw."""
    charts: dict[str, Markup | None] = {}
    for kind, build in FIGURES.items():
        fig = build(database)
        charts[kind] = None if fig is None else chart_div(fig, kind, f"rp-{kind}-{index}")
    return charts


# ---- across runs ----------------------------------------------------------------------------------------------


def daily_history_figure(days: Sequence[DailyRecovery], targets: dict[str, float]) -> dict[str, Any] | None:
    """Recovery seconds per database per day across the folder's runs (the mean of the day's runs, the
    store's aggregate), each with the RTO its newest run set (`targets`).

    Built as plotly's JSON, not as a go.Figure: validating and copying a figure of years of days took
    100 ms of the index's budget, writing its JSON 6 ms; it is the same figure _figure() makes."""
    by_database: dict[str, list[DailyRecovery]] = {}
    for day in days:
        by_database.setdefault(day.database, []).append(day)
    if not any(d.mean_seconds is not None for d in days):
        return None
    traces: list[dict[str, Any]] = []
    notes: list[tuple[str, float]] = []
    palette = PALETTE if len(by_database) <= len(PALETTE) else MANY_COLORS
    for index, (database, rows) in enumerate(sorted(by_database.items())):
        rows.sort(key=lambda row: row.day)
        name, color = _plain(database), palette[index % len(palette)]
        traces.append({"type": "scatter", "x": [r.day.isoformat() for r in rows], "y": [r.mean_seconds for r in rows],
                       "mode": "lines+markers", "name": name, "line": {"color": color}, "legendgroup": name,
                       "text": [_day_text(r) for r in rows],
                       "hovertemplate": f"{name}: %{{y:.2f}} s<br>%{{text}}<extra></extra>"})
        target = targets.get(database)
        if target is None:
            continue
        values = [r.max_seconds for r in rows if r.max_seconds is not None]
        if values and target > TARGET_IN_VIEW * max(values):
            notes.append((name, target))
            continue
        traces.append({"type": "scatter", "x": [rows[0].day.isoformat(), rows[-1].day.isoformat()],
                       "y": [target, target], "mode": "lines", "name": f"{name} RTO", "legendgroup": name,
                       # One legend entry a database: its RTO line shows and hides with it.
                       "showlegend": False, "line": {"color": color, "dash": "dash"},
                       "hovertemplate": f"{name} RTO {seconds_text(target)}<extra></extra>"})
    layout = _layout(380, x_title="day (UTC)", y_title="recovery (s)")
    if notes:
        layout["annotations"] = [_note("far above the recoveries, not drawn: " + _targets_text(notes))]
    # Days, not times of day: over a couple of weeks a tick per day, beyond that plotly's own spacing.
    first, last = min(d.day for d in days), max(d.day for d in days)
    span = last - first
    layout["xaxis"].update(type="date", tickformat="%Y-%m-%d", **({"dtick": DAY_MS} if span.days <= 14 else {}))
    if span.days < 2:  # one or two days alone would be drawn on an axis of milliseconds
        layout["xaxis"]["range"] = [(first - timedelta(days=1)).isoformat(), (last + timedelta(days=1)).isoformat()]
    layout["yaxis"]["rangemode"] = "tozero"
    if len(by_database) > LEGEND_BESIDE:
        layout["legend"] = {"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top",
                            "font": {"size": 11}, "title": {"text": f"{len(by_database)} databases"}}
        layout["margin"]["r"] = 10
    return {"data": traces, "layout": layout}


def _targets_text(notes: Sequence[tuple[str, float]], named: int = 3) -> str:
    """'a RTO 4 h; b RTO 1 h', or, for more than `named` databases sharing a target, '45 databases' RTO 4 h':
    one line above the plot however many databases there are."""
    by_target: dict[float, list[str]] = {}
    for name, target in notes:
        by_target.setdefault(target, []).append(name)
    parts = [(f"{len(names)} databases' RTO" if len(names) > named else ", ".join(names) + " RTO")
             + f" {seconds_text(target)}" for target, names in sorted(by_target.items())]
    return "; ".join(parts)


def _day_text(day: DailyRecovery) -> str:
    runs = f"{day.day:%Y-%m-%d}: {day.runs} run{'s' if day.runs != 1 else ''}"
    if day.online == 0:
        return f"{runs}, none came online"
    online = "" if day.online == day.runs else f", {day.online} came online"
    if day.online == 1:
        return runs + online
    return f"{runs}{online}, {seconds_text(day.min_seconds)} to {seconds_text(day.max_seconds)} (the mean drawn)"
