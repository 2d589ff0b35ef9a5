"""REPORT_DIR/index.html and its pages: the runs of a report folder, from the results store.

index.html shows the newest PAGE_SIZE runs, the recovery-over-time chart (the store's daily
aggregates) and links to every run by page. Nothing reads a report.json: the store holds what a
listing shows (verification.results.summaries), so writing the index takes the same few queries for
10 runs or 10,000.

The pages (runs-<n>.html) are numbered from the oldest run, PAGE_SIZE runs each, so a new run changes
only the last one or two and a link to a page keeps showing the same runs. Each page carries a
signature of what it shows; a page whose signature is unchanged is not written again.

Run folders that hold a report.json but whose run the store does not hold (recorded in another store,
or made before it) are named in the index, found by comparing the folder's listing with the store's
run ids; their report.json is not read.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from urllib.parse import quote

from verification import __version__
from verification.reports.assets import ASSETS, plotly_asset, write_asset, write_atomically
from verification.reports.charts import chart_div, daily_history_figure
from verification.reports.html_report import env, plotly_ref
from verification.results import ResultStore
from verification.results.migrations import masked
from verification.results.summaries import ListedRun, RunPage, RunSummary

PAGE_SIZE = 50
INDEX = "index.html"
PAGE = re.compile(r"runs-([1-9][0-9]*)\.html")
SIGNATURE = re.compile(rb'<meta name="restoreproof-page" content="([0-9a-f]{64})">')
NOT_IN_STORE = "not in the results store: its run was recorded in another store, or in none"


@dataclass(frozen=True)
class PageLink:
    number: int
    file: str
    first: datetime  # the start of its oldest run
    last: datetime  # the start of its newest run


def page_file(number: int) -> str:
    return f"runs-{number}.html"


def write_index(report_dir: Path, store: ResultStore, *, page_size: int = PAGE_SIZE) -> Path:
    """(Re)write report_dir/index.html, and the pages whose runs changed, from the store; returns its path."""
    folders, written = scan(report_dir)
    listed = store.run_listing(report_dir)
    published = [run for run in listed if run.finished is not None]
    chunks = [published[start:start + page_size] for start in range(0, len(published), page_size)]
    if len(chunks) < 2:
        chunks = []  # index.html shows them all: no numbered pages
    # The dates of each page's first and last run, from the same listing: a run published meanwhile moves no page.
    starts = store.run_starts([run.run_id for chunk in chunks for run in (chunk[0], chunk[-1])])
    pages = [PageLink(n, page_file(n), starts[chunk[0].run_id], starts[chunk[-1].run_id])
             for n, chunk in enumerate(chunks, start=1) if chunk[0].run_id in starts and chunk[-1].run_id in starts]

    newest = store.run_page(1, page_size, folder=report_dir, finished_only=True)
    days = store.daily_recovery(report_dir)
    figure = daily_history_figure(days, store.newest_rto_targets(report_dir, sorted({d.database for d in days})))
    chart = None if figure is None else chart_div(figure, "history", "rp-history-runs")
    plotly = None
    if chart is not None:
        asset = plotly_asset()
        write_asset(report_dir, asset)
        plotly = plotly_ref(asset, 0)
    known = {run.run_id for run in listed}
    skipped = [(f"{name}/report.json", NOT_IN_STORE) for name in sorted(folders - known)
               if (report_dir / name / "report.json").is_file()]
    html = env.get_template("index.html.j2").render(
        runs=newest.runs, total=newest.total, links=_links(newest.runs, folders), chart=chart, plotly=plotly,
        skipped=skipped, store=masked(store.engine.url), pages=pages, page_size=page_size)
    target = report_dir / INDEX
    write_atomically(target, html.encode())

    for number, chunk in enumerate(chunks, start=1):
        _write_page(report_dir, store, number, chunk, folders, page_size, newest=number == len(chunks))
    for stale in written - set(range(1, len(chunks) + 1)):
        (report_dir / page_file(stale)).unlink(missing_ok=True)
    return target


def render_store_page(found: RunPage, links: Mapping[str, str | None], page_href: Callable[[int], str]) -> str:
    """One page of the store's runs, newest first, for a web app to serve (the Airflow plugin's page):
    `links` maps each run to its report.html's URL (None: no report to open), `page_href` a page number
    to that page's URL. What it shows is the page's own queries (ResultStore.run_page): one page of runs,
    however many the store holds."""
    return env.get_template("store_page.html.j2").render(found=found, links=links, page_href=page_href,
                                                         plotly=None)


def scan(report_dir: Path) -> tuple[set[str], set[int]]:
    """The names of report_dir's folders that may be runs', and the numbers of the pages written there:
    one read of the folder, nothing opened."""
    folders: set[str] = set()
    pages: set[int] = set()
    with os.scandir(report_dir) as entries:
        for entry in entries:
            if found := PAGE.fullmatch(entry.name):
                pages.add(int(found.group(1)))
            elif entry.is_dir() and entry.name != ASSETS and not entry.name.startswith("."):
                folders.add(entry.name)
    return folders, pages


def _links(runs: list[RunSummary], folders: set[str]) -> dict[str, str | None]:
    """Each run's report.html, relative to the report folder; None when its folder was removed."""
    return {run.run_id: f"{quote(run.run_id)}/report.html" if run.run_id in folders else None for run in runs}


def _write_page(report_dir: Path, store: ResultStore, number: int, chunk: list[ListedRun], folders: set[str],
                page_size: int, *, newest: bool) -> None:
    target = report_dir / page_file(number)
    signature = _signature(number, chunk, folders, newest)
    if _signature_of(target) == signature:
        return
    runs = store.run_summaries([run.run_id for run in reversed(chunk)])  # newest first, as everywhere
    first = (number - 1) * page_size + 1
    html = env.get_template("runs_page.html.j2").render(
        runs=runs, links=_links(runs, folders), number=number, first=first, last=first + len(chunk) - 1,
        older=page_file(number - 1), newer=None if newest else page_file(number + 1), signature=signature,
        plotly=None)
    write_atomically(target, html.encode())


def _signature(number: int, chunk: list[ListedRun], folders: set[str], newest: bool) -> str:
    """What the page shows, as far as it can change: its runs (a run published again has a new finish; one
    started again is a new row, finished anew), whether their folders are there, its place, and the code
    that renders it."""
    shown = "\n".join(f"{run.run_id}\t{run.finished}\t{run.verdict}\t{run.run_id in folders}" for run in chunk)
    return hashlib.sha256(f"{_renderer()}\n{number}\n{newest}\n{shown}".encode()).hexdigest()


@cache
def _renderer() -> str:
    """The version and templates pages are rendered with: an upgrade writes every page again."""
    loader = env.loader
    assert loader is not None
    sources = [loader.get_source(env, name)[0] for name in ("base.html.j2", "runs_table.html.j2", "runs_page.html.j2")]
    return hashlib.sha256("\0".join([__version__, *sources]).encode()).hexdigest()


def _signature_of(page: Path) -> str | None:
    """The signature a page was written with (in its first bytes), None when there is none to read."""
    try:
        with page.open("rb") as handle:
            head = handle.read(1024)
    except OSError:
        return None
    found = SIGNATURE.search(head)
    return found.group(1).decode() if found else None
