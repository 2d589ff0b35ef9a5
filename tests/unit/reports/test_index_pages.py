"""REPORT_DIR/index.html and its pages (runs-<n>.html), written from the results store."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from tests.conftest import TESTS
from tests.unit.reports.test_html_report import assert_offline, charts
from verification.model import RunResult
from verification.report_model import DatabaseEntry
from verification.reports.assets import plotly_asset
from verification.reports.index_pages import NOT_IN_STORE, render_store_page, write_index
from verification.results import ResultStore
from verification.results.store import RunRow

SAMPLE = TESTS / "fixtures" / "reports" / "report-1.3.json"
T0 = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = ResultStore(f"sqlite:///{tmp_path}/results.db")
    yield opened
    opened.close()


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    return folder


def entries() -> list[DatabaseEntry]:
    return [DatabaseEntry.model_validate(d) for d in json.loads(SAMPLE.read_text())["databases"]]


def publish(store: ResultStore, folder: Path, run_id: str, started: datetime, *, recovery: float | None = None,
            verdict: str = "failed", with_folder: bool = True) -> None:
    """A run as the pipeline leaves it: recorded, its entries in, finished, its folder written."""
    store.start_run(RunResult(run_id=run_id, engine="postgres", source="/backups", started_at=started),
                    folder / run_id)
    for entry in entries():
        store.record_database(run_id, entry if recovery is None else entry.model_copy(
            update={"recovery_seconds": recovery}))
    store.finish_run(run_id, started + timedelta(minutes=1), verdict)
    if with_folder:
        (folder / run_id).mkdir()
        (folder / run_id / "report.json").write_text("{}")  # never read: the store is what is listed


def bulk(store: ResultStore, folder: Path, count: int, *, first: int = 0) -> list[str]:
    """`count` published runs an hour apart, as rows at once, each with its folder."""
    ids = [f"r{n:05d}" for n in range(first, first + count)]
    with store.engine.begin() as connection:
        connection.execute(insert(RunRow), [
            {"run_id": run_id, "engine": "postgres", "source": "/b", "verdict": "passed",
             "started_at": T0 + timedelta(hours=n), "finished_at": T0 + timedelta(hours=n, minutes=1),
             "report_dir": str(folder / run_id), "report_folder": str(folder), "host": {}}
            for n, run_id in zip(range(first, first + count), ids, strict=True)])
    for run_id in ids:
        (folder / run_id).mkdir()
    return ids


def run_links(html: str) -> list[str]:
    return re.findall(r'<a href="([^"]+)/report.html"><code>', html)


def page_numbers(folder: Path) -> list[int]:
    return sorted(int(p.stem.removeprefix("runs-")) for p in folder.glob("runs-*.html"))


def test_the_index_lists_the_stores_runs_newest_first_and_names_folders_it_does_not_hold(store, reports):
    publish(store, reports, "20261120T010000Z-old000", T0)
    publish(store, reports, "20261122T010000Z-abc123", T0 + timedelta(days=2))
    publish(store, reports, "20261121T010000Z-mid000", T0 + timedelta(days=1))
    publish(store, reports, "20261119T010000Z-gone00", T0 - timedelta(days=1), with_folder=False)
    store.start_run(RunResult(run_id="20261123T010000Z-run000", engine="postgres", source="/b",
                              started_at=T0 + timedelta(days=3)), reports / "20261123T010000Z-run000")
    (reports / "20261123T010000Z-run000" / "evidence").mkdir(parents=True)  # running: neither listed nor named
    for name, content in (("20261124T010000Z-torn00", '{"run_id": "2026'), ("20261125T010000Z-list00", "[]")):
        (reports / name).mkdir()
        (reports / name / "report.json").write_text(content)
    (reports / "20261126T010000Z-empty0").mkdir()  # no report.json: not a report
    (reports / "stray.json").write_text("{}")

    path = write_index(reports, store)
    assert path == reports / "index.html"
    html = path.read_text()
    assert run_links(html) == ["20261122T010000Z-abc123", "20261121T010000Z-mid000", "20261120T010000Z-old000"]
    assert "<code>20261119T010000Z-gone00</code> <span class=\"meta\">(report folder removed)</span>" in html
    assert "4 runs in this folder, newest first." in html and "20261123T010000Z-run000" not in html
    skipped = re.findall(r'<tr><td><code>([^<]+)</code></td><td class="error">([^<]+)</td></tr>', html)
    assert skipped == [("20261124T010000Z-torn00/report.json", NOT_IN_STORE),
                       ("20261125T010000Z-list00/report.json", NOT_IN_STORE)]
    assert f"the results store <code>sqlite:///{store.engine.url.database}</code> does not hold" in html
    assert '<span class="badge failed">demo2: failed</span>' in html and "RTO met" in html and "2 alerts" in html
    row = html.split('<a href="20261122T010000Z-abc123/report.html">', 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["1", "1", "0", "0"]  # passed, failed, error, not verified
    assert charts(html) == ["history"]
    assert_offline(html, depth=0)
    assert (reports / "assets" / plotly_asset().name).read_bytes() == plotly_asset().data
    assert page_numbers(reports) == []  # one page holds them all
    assert [p.name for p in reports.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_the_index_chart_is_the_stores_daily_recovery_with_each_rto(store, reports):
    for day, seconds in ((0, 5.0), (1, 5.5), (2, 6.0)):
        publish(store, reports, f"r{day}", T0 + timedelta(days=day), recovery=seconds)
    publish(store, reports, "r1-later", T0 + timedelta(days=1, hours=5), recovery=6.5)  # same day: the mean drawn
    html = write_index(reports, store).read_text()
    found = re.search(r'Plotly.newPlot\(\s*"rp-history-runs",\s*(\[.*?\]),\s*\{', html, re.S)
    assert found is not None
    data = json.loads(found.group(1))
    assert [t["name"] for t in data] == ["demo1", "demo2", "demo2 RTO"]
    assert data[1]["x"] == ["2026-11-01", "2026-11-02", "2026-11-03"] and data[1]["y"] == [5.0, 6.0, 6.0]
    assert data[1]["text"][1] == "2026-11-02: 2 runs, 5.50 s to 6.50 s (the mean drawn)"
    assert data[2]["y"] == [10.0, 10.0] and data[2]["x"] == ["2026-11-01", "2026-11-03"]
    assert "demo1 RTO 14400 s (4.0 h)" in html  # named, not drawn: 4 h against seconds


def test_an_empty_report_folder_gets_an_index_without_a_chart_or_plotly(store, reports):
    html = write_index(reports, store).read_text()
    assert "0 runs in this folder" in html and charts(html) == [] and "<script" not in html
    assert not (reports / "assets").exists() and page_numbers(reports) == []


def test_exactly_one_page_of_runs_has_no_pages_and_one_more_makes_two(store, reports):
    bulk(store, reports, 50)
    html = write_index(reports, store, page_size=50).read_text()
    assert len(run_links(html)) == 50 and page_numbers(reports) == [] and "Every run" not in html
    bulk(store, reports, 1, first=50)
    html = write_index(reports, store, page_size=50).read_text()
    assert run_links(html) == [f"r{n:05d}" for n in range(50, 0, -1)]  # the newest 50: r00000 is on page 1 only
    assert page_numbers(reports) == [1, 2]
    one = (reports / "runs-1.html").read_text()
    assert run_links(one) == [f"r{n:05d}" for n in range(49, -1, -1)]  # the oldest 50, newest first
    assert "Runs 1 to 50 of this folder" in one and 'href="runs-2.html">newer runs' in one and "older runs" not in one
    two = (reports / "runs-2.html").read_text()
    assert run_links(two) == ["r00050"] and "Runs 51 to 51" in two
    assert 'href="runs-1.html">older runs' in two and "newer runs" not in two
    assert re.findall(r'<a href="(runs-\d+\.html)" title="started ([^"]+)">', html) == [
        ("runs-1.html", "2026-11-01 01:00:00 UTC to 2026-11-03 02:00:00 UTC"),
        ("runs-2.html", "2026-11-03 03:00:00 UTC to 2026-11-03 03:00:00 UTC")]
    assert "<script" not in one  # no chart on a page: no plotly.js to load


def test_a_new_run_rewrites_only_the_pages_it_changes(store, reports):
    bulk(store, reports, 120)
    write_index(reports, store, page_size=50)
    assert page_numbers(reports) == [1, 2, 3]
    before = {n: (reports / f"runs-{n}.html").stat().st_mtime_ns for n in (1, 2, 3)}
    inodes = {n: (reports / f"runs-{n}.html").stat().st_ino for n in (1, 2, 3)}
    write_index(reports, store, page_size=50)  # nothing changed: no page written
    assert {n: (reports / f"runs-{n}.html").stat().st_ino for n in (1, 2, 3)} == inodes
    bulk(store, reports, 1, first=120)
    write_index(reports, store, page_size=50)
    assert {n: (reports / f"runs-{n}.html").stat().st_ino for n in (1, 2)} == {n: inodes[n] for n in (1, 2)}
    assert (reports / "runs-3.html").stat().st_ino != inodes[3]
    assert run_links((reports / "runs-3.html").read_text())[0] == "r00120"
    assert before[1] == (reports / "runs-1.html").stat().st_mtime_ns
    # A run's folder removed: its page says so, and is written again for it.
    (reports / "r00010").rmdir()
    write_index(reports, store, page_size=50)
    assert (reports / "runs-1.html").stat().st_ino != inodes[1]
    assert "<code>r00010</code> <span class=\"meta\">(report folder removed)</span>" in (
        reports / "runs-1.html").read_text()


def test_a_page_without_its_signature_or_from_other_templates_is_written_again(store, reports, monkeypatch):
    from verification.reports import index_pages

    bulk(store, reports, 60)
    write_index(reports, store, page_size=50)
    page = reports / "runs-1.html"
    page.write_text("<!doctype html><p>half a page</p>")
    write_index(reports, store, page_size=50)
    assert run_links(page.read_text())[-1] == "r00000"
    inodes = [(reports / f"runs-{n}.html").stat().st_ino for n in (1, 2)]
    monkeypatch.setattr(index_pages, "_renderer", lambda: "another restoreproof's templates")
    write_index(reports, store, page_size=50)
    assert all((reports / f"runs-{n}.html").stat().st_ino != inodes[n - 1] for n in (1, 2))


def test_pages_of_runs_no_longer_recorded_are_removed(store, reports):
    bulk(store, reports, 120)
    write_index(reports, store, page_size=50)
    with store.engine.begin() as connection:
        connection.execute(RunRow.__table__.delete().where(RunRow.run_id >= "r00060"))
    write_index(reports, store, page_size=50)
    assert page_numbers(reports) == [1, 2]
    bulk_ids = run_links((reports / "runs-2.html").read_text())
    assert bulk_ids == [f"r{n:05d}" for n in range(59, 49, -1)]


def test_a_run_published_while_the_index_is_written_moves_no_page(store, reports, monkeypatch):
    bulk(store, reports, 100)
    listing = store.run_listing

    def then_another_run(folder: Path) -> Any:
        listed = listing(folder)
        bulk(store, reports, 1, first=100)  # another worker's run, published meanwhile
        return listed

    monkeypatch.setattr(store, "run_listing", then_another_run)
    html = write_index(reports, store, page_size=50).read_text()
    assert page_numbers(reports) == [1, 2]  # from the listing it read; the next index adds page 3
    assert len(re.findall(r'<a href="runs-\d+\.html"', html)) == 2
    monkeypatch.undo()
    write_index(reports, store, page_size=50)
    assert page_numbers(reports) == [1, 2, 3] and run_links((reports / "runs-3.html").read_text()) == ["r00100"]


def test_ten_thousand_runs_make_two_hundred_pages_every_run_once(store, reports):
    ids = bulk(store, reports, 10_000)
    html = write_index(reports, store).read_text()
    assert run_links(html) == ids[:-51:-1]
    assert "10000 runs in this folder, newest first: the newest 50 here" in html
    assert page_numbers(reports) == list(range(1, 201))
    listed = [run_id for n in range(200, 0, -1) for run_id in run_links((reports / f"runs-{n}.html").read_text())]
    assert listed == ids[::-1]  # newest first across the pages, none twice, none missing
    assert len(re.findall(r'<a href="runs-\d+\.html"', html)) == 200


def store_page(store: ResultStore, number: int, size: int) -> str:
    found = store.run_page(number, size)
    links = {run.run_id: f"r/{run.run_id}" if run.run_id != "r00001" else None for run in found.runs}
    return render_store_page(found, links, lambda n: f"?p={n}")


def test_a_store_page_shows_its_runs_with_their_links_and_the_way_to_the_others(store, reports):
    bulk(store, reports, 7)
    publish(store, reports, "20261122T010000Z-abc123", T0 + timedelta(days=2))
    first = store_page(store, 1, 3)
    assert re.findall(r'<a href="r/([^"]+)"><code>', first) == ["20261122T010000Z-abc123", "r00006", "r00005"]
    assert "8 runs in the results store, newest first: page 1 of 3." in first
    assert first.count('<nav class="pager">') == 2  # above and below the table
    assert re.findall(r'<a href="\?p=(\d+)">(\w+)</a>', first) == [("2", "older"), ("3", "oldest")] * 2
    assert '<span class="badge failed">demo2: failed</span>' in first and "RTO met" in first
    middle = store_page(store, 2, 3)
    assert re.findall(r'<a href="\?p=(\d+)">(\w+)</a>', middle)[:4] == [
        ("1", "newest"), ("1", "newer"), ("3", "older"), ("3", "oldest")]
    last = store_page(store, 3, 3)
    assert re.findall(r'<a href="\?p=(\d+)">(\w+)</a>', last)[:2] == [("1", "newest"), ("2", "newer")]
    assert ">older<" not in last and "<title>restoreproof runs, page 3</title>" in last
    # A run without a link (its report folder gone) is named, not linked.
    assert '<code>r00001</code> <span class="meta">(report folder removed)</span>' in last
    assert "<script" not in last  # nothing to draw: no plotly.js, no script


def test_a_store_page_of_a_single_page_has_no_pager(store, reports):
    bulk(store, reports, 2)
    html = store_page(store, 1, 3)
    assert "pager" not in html and "2 runs in the results store, newest first: page 1 of 1." in html
    assert "<title>restoreproof runs</title>" in html
