"""Chart axes a person can read: run times never in milliseconds, and the index chart of many databases
keeps its plot (a legend column beside it, one entry a database, one line of notes above it)."""

from __future__ import annotations

import copy
import json
from datetime import date, datetime, timedelta

from tests.conftest import TESTS
from tests.unit.factories import typed_database
from verification.reports.charts import (
    LEGEND_BESIDE,
    MIN_TIME_SPAN,
    daily_history_figure,
    history_figure,
    throughput_figure,
)
from verification.results.summaries import DailyRecovery

SAMPLE = TESTS / "fixtures" / "reports" / "report-1.3.json"


def one_run_database() -> dict:
    database = copy.deepcopy(json.loads(SAMPLE.read_text())["databases"][0])
    drift = database["drift"]
    drift.update(trend=None, crossing=None, series=drift["series"][-1:])
    return database


def axis_span(fig) -> timedelta:
    low, high = fig.layout.xaxis.range
    return datetime.fromisoformat(str(high)) - datetime.fromisoformat(str(low))


def test_one_run_alone_gets_an_axis_of_an_hour_not_of_milliseconds():
    database = typed_database(one_run_database())
    for build in (history_figure, throughput_figure):
        fig = build(database)
        assert fig is not None
        assert axis_span(fig) >= MIN_TIME_SPAN
    history = history_figure(database)
    assert history is not None
    predicted = next(t for t in history.data if t.name == "predicted")
    assert predicted.mode == "markers"  # one prediction: a point, not an invisible line


def test_runs_weeks_apart_keep_their_own_span():
    database = typed_database(json.loads(SAMPLE.read_text())["databases"][0])
    fig = history_figure(database)
    assert fig is not None
    assert axis_span(fig) > timedelta(days=11)


def days(count: int, databases: int, target_far: bool = True) -> tuple[list[DailyRecovery], dict[str, float]]:
    rows = [DailyRecovery(f"db{n:02d}", date(2026, 11, 22) - timedelta(days=d), 1, 1, 30.0 + n, 30.0 + n, 30.0 + n)
            for n in range(databases) for d in range(count)]
    return rows, {f"db{n:02d}": 14400.0 if target_far else 60.0 + n for n in range(databases)}


def test_a_single_day_is_drawn_on_a_range_of_days():
    rows, targets = days(1, 2)
    figure = daily_history_figure(rows, targets)
    assert figure is not None
    assert figure["layout"]["xaxis"]["range"] == ["2026-11-21", "2026-11-23"]


def test_many_databases_get_a_legend_column_and_one_entry_each():
    rows, targets = days(5, 45, target_far=False)
    figure = daily_history_figure(rows, targets)
    assert figure is not None
    layout = figure["layout"]
    assert layout["height"] == 380  # the plot keeps its height
    assert layout["legend"]["orientation"] == "v" and layout["legend"]["x"] > 1
    assert layout["legend"]["title"]["text"] == "45 databases"
    shown = [t["name"] for t in figure["data"] if t.get("showlegend", True)]
    assert len(shown) == 45  # the RTO lines go with their database's entry
    assert len({t["line"]["color"] for t in figure["data"] if t.get("showlegend", True)}) == 45


def test_few_databases_keep_the_legend_above():
    rows, targets = days(5, LEGEND_BESIDE)
    figure = daily_history_figure(rows, targets)
    assert figure is not None
    assert figure["layout"]["legend"]["orientation"] == "h"


def test_targets_far_above_are_named_in_one_short_line():
    rows, targets = days(5, 45)
    targets["db00"] = 7200.0
    figure = daily_history_figure(rows, targets)
    assert figure is not None
    note = figure["layout"]["annotations"][0]["text"]
    assert note == "far above the recoveries, not drawn: db00 RTO 7200 s (2.0 h); 44 databases' RTO 14400 s (4.0 h)"
