"""Great Expectations data checks: their cost at the demo's size and at --scale 10.

    .venv/bin/python bench/data_checks.py [--scales 1 10]

For each scale: the sample repository (one cluster, made once per scale under bench-work/ and
reused) is verified by the product's own pipeline with the demo's data checks (pgbench row counts
and keys, the events table's freshness, the automatic baselines of every table). Inside the same
restore, on the same restored server and socket, the same facts are then read the plain way, by
SQL through psycopg (count(*) of every table, count(distinct key), max of the timestamp): the
ratio GX / plain SQL is Great Expectations' cost over the checks themselves. Also printed: the
import of great_expectations in a fresh interpreter (paid once per process), best of 3.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

from verification import pipeline
from verification.config import load_settings
from verification.demo.source import PGBENCH_KEYS, demo_checks, make_demo
from verification.engines.base import DataAccess, Evidence
from verification.model import CheckResult
from verification.reports.json_report import report_data

TABLES = ["pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history", "events"]


def import_seconds() -> float:
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); "
                              "import great_expectations; print(time.perf_counter() - t)"],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "GX_ANALYTICS_ENABLED": "false"})
        runs.append(float(out.stdout.strip().splitlines()[-1]))
    return min(runs)


def plain_sql(access: DataAccess) -> float:
    import psycopg

    url = access.url("postgres")
    host = url.split("host=")[1].split("&")[0].replace("%2F", "/")
    started = time.perf_counter()
    with psycopg.connect(host=host, user="postgres", dbname="postgres") as connection:
        for table in TABLES:
            connection.execute(f"select count(*) from {table}").fetchone()
            if table in PGBENCH_KEYS:
                key = PGBENCH_KEYS[table]
                connection.execute(f"select count(distinct {key}), count(*) - count({key}) from {table}").fetchone()
        connection.execute("select max(at) from events").fetchone()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--workdir", type=Path, default=Path("bench-work"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"import great_expectations (fresh interpreter, best of 3): {import_seconds():.2f} s")
    for scale in args.scales:
        demo = make_demo(args.workdir / f"data-checks-{scale}", scale=scale, clusters=1)
        with tempfile.TemporaryDirectory(prefix="restoreproof-bench-checks-") as folder:
            os.environ["XDG_STATE_HOME"] = folder
            config = Path(folder) / "config.yaml"
            config.write_text(yaml.safe_dump({"checks": demo_checks(demo)}))
            settings = load_settings(config, report_dir=Path(folder) / "reports")
            measured: dict[str, float] = {}
            made = pipeline.data_checks_for

            def timed(*a: Any, made: Any = made, measured: dict[str, float] = measured, **k: Any) -> Any:
                runner = made(*a, **k)

                def run(access: DataAccess, evidence: Evidence, runner: Any = runner,
                        measured: dict[str, float] = measured) -> list[CheckResult]:
                    started = time.perf_counter()
                    checks = runner(access, evidence) if runner else []
                    measured["gx"] = time.perf_counter() - started
                    measured["sql"] = min(plain_sql(access) for _ in range(3))
                    return checks
                return run

            pipeline.data_checks_for = timed  # type: ignore[assignment]
            try:
                result = pipeline.run_verification(settings, demo.repository)
            finally:
                pipeline.data_checks_for = made  # type: ignore[assignment]
            [db] = report_data(result.report)["databases"]
            rows = next(c for c in db["checks"] if c["name"] == "data_baseline")["details"]["tables"]
            total = sum(t["rows"] or 0 for t in rows.values())
            print(f"scale {scale}: verdict {db['verdict']}, {len(rows)} tables, {total:,} rows; data checks "
                  f"(GX, the import already paid) {measured['gx']:.2f} s, the same facts by plain SQL "
                  f"{measured['sql']:.2f} s: ratio {measured['gx'] / measured['sql']:.1f}x")


if __name__ == "__main__":
    main()
