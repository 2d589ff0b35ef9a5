"""Everything a run writes into its folder, for three readers:

    report.json   data (versioned schema, docs/report-schema.md)
    report.html   the SRE: verdicts, predicted vs measured, RTO/RPO, history charts (plotly.js from
                  REPORT_DIR/assets/, one copy for the folder)
    junit.xml     the CI dashboard: one test case per database
    metrics.prom  Prometheus (also to a textfile collector folder and a Pushgateway when configured)
    manifest.json + manifest.sig   the auditor: every file's SHA-256, signed
and REPORT_DIR/index.html across runs (paged: runs-<n>.html), from the results store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from verification.reports.assets import plotly_asset, write_asset
from verification.reports.html_report import render_html
from verification.reports.index_pages import write_index
from verification.reports.json_report import build_report, dumps
from verification.reports.junit import render_junit
from verification.reports.metrics import write_metrics
from verification.reports.summary import evidence_note

if TYPE_CHECKING:
    from verification.config import Settings
    from verification.report_model import RunReport


@dataclass
class ReportOutputs:
    json_path: Path
    html_path: Path
    junit_path: Path
    metrics_path: Path
    index_path: Path | None = None
    manifest_path: Path | None = None
    warnings: list[str] = field(default_factory=list)


def write_reports(report: RunReport, run_dir: Path, settings: Settings | None = None,
                  last_success: dict[str, datetime] | None = None, *, index: bool = True) -> ReportOutputs:
    """Write every output of a run; with `settings`, also the index (unless `index` is False: the store
    it lists is not there), extra metrics targets and the signed evidence manifest (which must come
    last: it hashes everything else)."""
    from verification.config import MetricsSettings

    run_dir.mkdir(parents=True, exist_ok=True)
    outputs = ReportOutputs(run_dir / "report.json", run_dir / "report.html", run_dir / "junit.xml",
                            run_dir / "metrics.prom")
    outputs.json_path.write_text(dumps(report), encoding="utf-8")
    signer = None
    note = None
    if settings is not None:
        from verification.evidence.signing import load_signer

        # Loaded before the page is written, so the page names the key its folder is signed with.
        signer = load_signer(settings)
        note = evidence_note(settings, run_dir, signer.algorithm, signer.key_id)
    outputs.html_path.write_text(render_html(report, note), encoding="utf-8")
    # The page loads the folder's plotly.js: written (once) wherever a report is.
    asset = write_asset(run_dir.parent, plotly_asset())
    outputs.junit_path.write_text(render_junit(report), encoding="utf-8")
    outputs.warnings += write_metrics(report, run_dir, last_success or {},
                                      settings.metrics if settings else MetricsSettings())
    if settings is not None:
        from verification.evidence.bundle import write_bundle
        from verification.results import ResultStore

        if index:
            store = ResultStore(settings.results_database_url, settings.results_retry)
            try:
                outputs.index_path = write_index(run_dir.parent, store)
            finally:
                store.close()
        # The shared plotly.js is outside the run folder, yet it runs in report.html: its hash is signed too.
        shared = [Path(os.path.relpath(asset, run_dir)).as_posix()]
        outputs.manifest_path = write_bundle(run_dir, settings, extra={"host": report.host}, shared=shared,
                                             signer=signer).manifest
    return outputs


__all__ = ["ReportOutputs", "build_report", "render_html", "write_reports"]
