"""Everything a run writes into its folder, for three readers:

    report.json   data (versioned schema, docs/report-schema.md)
    report.html   the SRE: verdicts, predicted vs measured, RTO/RPO, history charts (self-contained)
    junit.xml     the CI dashboard: one test case per database
    metrics.prom  Prometheus (also to a textfile collector folder and a Pushgateway when configured)
    manifest.json + manifest.sig   the auditor: every file's SHA-256, signed
and REPORT_DIR/index.html across runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from verification.reports.html_report import render_html, write_index
from verification.reports.json_report import build_report, dumps
from verification.reports.junit import render_junit
from verification.reports.metrics import write_metrics

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
                  last_success: dict[str, datetime] | None = None) -> ReportOutputs:
    """Write every output of a run; with `settings`, also the index, extra metrics targets and the
    signed evidence manifest (which must come last: it hashes everything else)."""
    from verification.config import MetricsSettings

    run_dir.mkdir(parents=True, exist_ok=True)
    outputs = ReportOutputs(run_dir / "report.json", run_dir / "report.html", run_dir / "junit.xml",
                            run_dir / "metrics.prom")
    outputs.json_path.write_text(dumps(report), encoding="utf-8")
    outputs.html_path.write_text(render_html(report), encoding="utf-8")
    outputs.junit_path.write_text(render_junit(report), encoding="utf-8")
    outputs.warnings += write_metrics(report, run_dir, last_success or {},
                                      settings.metrics if settings else MetricsSettings())
    if settings is not None:
        from verification.evidence.bundle import write_bundle

        outputs.index_path = write_index(run_dir.parent)
        outputs.manifest_path = write_bundle(run_dir, settings, extra={"host": report.host}).manifest
    return outputs


__all__ = ["ReportOutputs", "build_report", "render_html", "write_reports"]
