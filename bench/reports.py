"""Reports at scale: report.html's size, and index.html and the Airflow page over 10,000 recorded runs.

    .venv/bin/python bench/reports.py [--runs 10000] [--repeat 5] [--folder DIR]

Fills a results store (SQLite) with `--runs` runs an hour apart through the store's own API, as a run's
steps record them (start_run, record_database for each database of the 1.3 sample report, finish_run),
each with its run folder holding the report.json that the index read before (the sample's, with the
run's id and start). The store and folders go to a temporary folder on /dev/shm when there is one: SQLite
commits every call, and waiting for the disk is what filling costs, not what is measured.

Then, each the median of `--repeat` times:
- index.html now: a run published (recorded through the API, untimed), then write_index(folder, store),
  which writes index.html and the pages the new run changed (the steady state after every run);
  once also cold: every page of the folder written (its first index after upgrading);
- index.html before: every report.json read and validated, every run in one page and in the chart,
  plotly.js inline (bench/reports_legacy.py, the code of c90b20f), as a ratio to now;
- the Airflow page now: the plugin's handler for page 1 and for the middle page, each opening the store
  through the plugin's hook as a request does;
- the Airflow page before: its handler then (the 50 newest runs from the store, no way to older ones).
Last, the size of the sample's report.html with plotly.js inline (before) and loading the folder's copy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from html import escape
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins"), str(Path(__file__).resolve().parent)]

import reports_legacy  # noqa: E402

from verification.model import RunResult  # noqa: E402
from verification.report_model import RunReport  # noqa: E402
from verification.reports.assets import plotly_asset  # noqa: E402
from verification.reports.html_report import render_html  # noqa: E402
from verification.reports.index_pages import write_index  # noqa: E402
from verification.results import ResultStore  # noqa: E402

SAMPLE = ROOT / "tests" / "fixtures" / "reports" / "report-1.3.json"
KB = 1024


@dataclass(frozen=True)
class Timing:
    """Medians of wall time and of this process's CPU time: on a shared machine the CPU time shows the work,
    the wall time what a reader waited."""

    wall: float
    cpu: float

    def __str__(self) -> str:
        return f"{self.wall * 1000:.1f} ms ({self.cpu * 1000:.1f} ms CPU)"


def median_seconds(action: Callable[[], Any], repeat: int, before: Callable[[], Any] | None = None) -> Timing:
    walls, cpus = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return Timing(statistics.median(walls), statistics.median(cpus))


class Folder:
    """The report folder and its store, filled through the store's API."""

    def __init__(self, root: Path, sample: dict[str, Any]) -> None:
        self.reports = root / "reports"
        self.reports.mkdir()
        self.url = f"sqlite:///{root / 'results.db'}"
        self.store = ResultStore(self.url)
        self.sample = sample
        self.report = RunReport.model_validate(sample)
        self.count = 0

    def publish(self) -> None:
        n = self.count
        run_id = f"2026{n:06d}-bench"
        started = self.report.started_at + timedelta(hours=n)
        self.store.start_run(RunResult(run_id=run_id, engine=self.report.engine, source=self.report.source,
                                       started_at=started, host={"due": [d.database for d in self.report.databases]}),
                             self.reports / run_id)
        for entry in self.report.databases:
            self.store.record_database(run_id, entry)
        self.store.finish_run(run_id, started + timedelta(minutes=1), str(self.report.verdict))
        (self.reports / run_id).mkdir()
        (self.reports / run_id / "report.json").write_text(json.dumps(
            {**self.sample, "run_id": run_id, "started_at": started.isoformat()}))
        self.count += 1


def airflow_handlers(url: str, state: Path) -> tuple[Callable[[int], object], Callable[[], str]]:
    """The plugin's page handler now, and the one before (its whole body then), both through the hook."""
    os.environ.update({"AIRFLOW_HOME": str(state / "airflow"), "RESTOREPROOF_RESULTS_URL": url,
                       "RESTOREPROOF_STATE_DIR": str(state / "state")})
    from restoreproof_airflow.hooks import RestoreproofHook
    from restoreproof_airflow.web import runs

    def before() -> str:
        with RestoreproofHook() as hook:
            rows = hook.get_conn().recent_runs(50)
        lines = "".join(
            f"<tr><td><a href='reports/{escape(r.run_id)}'>{escape(r.run_id)}</a></td><td>{escape(r.engine)}</td>"
            f"<td class='{escape(r.verdict)}'>{escape(r.verdict)}</td><td>{r.started_at:%Y-%m-%d %H:%M}</td>"
            f"<td>{escape(r.source)}</td></tr>" for r in rows)
        return f"<!doctype html><table>{lines}</table>"

    return runs, before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--folder", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    sample = json.loads(SAMPLE.read_text())
    root = Path(tempfile.mkdtemp(prefix="restoreproof-bench-reports-", dir=args.folder))
    try:
        folder = Folder(root, sample)
        started = time.perf_counter()
        for n in range(args.runs):
            folder.publish()
            if (n + 1) % 1000 == 0:
                print(f"  {n + 1} runs recorded ({time.perf_counter() - started:.0f} s)", flush=True)
        print(f"{args.runs} runs of {len(folder.report.databases)} databases each, store {folder.url}")

        cold = median_seconds(lambda: write_index(folder.reports, folder.store), 1)
        pages = len(list(folder.reports.glob("runs-*.html")))
        now = median_seconds(lambda: write_index(folder.reports, folder.store), args.repeat, before=folder.publish)
        legacy = median_seconds(lambda: reports_legacy.write_index(folder.reports), args.repeat)
        index_size = (folder.reports / "index.html").stat().st_size
        legacy_size = (folder.reports / "index-legacy.html").stat().st_size
        print(f"index.html now: {now}, median of {args.repeat}, each after a new run: the index and the pages it "
              f"changed; {index_size / KB:.0f} KB. Cold, all {pages} pages written: {cold}")
        print(f"index.html before: {legacy}, median of {args.repeat}: every report.json read, "
              f"{legacy_size / KB:.0f} KB with plotly.js inline; {legacy.wall / now.wall:.0f} x now "
              f"({legacy.cpu / now.cpu:.0f} x in CPU)")

        runs, before = airflow_handlers(folder.url, root)
        pages = folder.store.run_page(1, 50).pages
        first = median_seconds(lambda: runs(1), args.repeat)
        middle = median_seconds(lambda: runs(pages // 2 or 1), args.repeat)
        old = median_seconds(before, args.repeat)
        print(f"Airflow page now: {first} page 1, {middle} page {pages // 2 or 1} of {pages}; median of {args.repeat}")
        print(f"Airflow page before: {old} (the 50 newest only, no way to older runs); "
              f"{old.wall / first.wall:.2f} x now")

        report = RunReport.model_validate(sample)
        after = render_html(report).encode()
        asset = plotly_asset()
        tag = f'<script src="../assets/{asset.name}"></script>'.encode()
        inline = after.replace(tag, b"<script>" + asset.data + b"</script>")
        print(f"report.html (the 1.3 sample, 2 databases): {len(inline) / KB:.0f} KB with plotly.js inline, "
              f"{len(after) / KB:.0f} KB now; assets/{asset.name}: {len(asset.data) / KB:.0f} KB once per folder")
        folder.store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
