"""report.html (one run), for people; the pages across runs are verification.reports.index_pages.

Every chart is drawn from data in the page by plotly.js, which the page loads from the report folder's
one copy (REPORT_DIR/assets/, by a relative path), so it opens offline from the folder, from an audit
archive of it, or served by the Airflow plugin, years later. A page whose plotly.js did not load says
so at its top, naming the file it needs.
"""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from verification.model import BackupEncryption, EncryptionState
from verification.report_model import RunReport
from verification.reports.assets import Asset, plotly_asset
from verification.reports.charts import (
    NONE,
    database_charts,
    iso_text,
    mb_text,
    mbps_text,
    percent_text,
    seconds_text,
    when_text,
)
from verification.reports.summary import EvidenceNote, database_summary, other_notes, too_few_runs

# StrictUndefined: the templates read the typed report, so a misspelt field fails (a test renders every
# branch) instead of showing as nothing. Sections an older report lacks are None, tested for explicitly.
env = Environment(loader=PackageLoader("verification.reports", "templates"),
                  autoescape=select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True,
                  undefined=StrictUndefined)


def encryption_text(value: BackupEncryption | None) -> str:
    """A backup's encryption in a table cell: the state, the cipher, and what a target needs to read it
    (a certificate, by thumbprint); how it is known is said under the table."""
    if value is None:
        return NONE
    if value.state is EncryptionState.UNKNOWN:
        return "unknown"
    if value.state is EncryptionState.NOT_ENCRYPTED:
        return "not encrypted"
    needs = [f"{(value.encryptor_type or 'encryptor').lower()} {value.encryptor_thumbprint}"
             if value.encryptor_thumbprint else "",
             f"TDE, certificate {value.tde_thumbprint}" if value.tde_thumbprint else ""]
    return "encrypted" + (f" ({value.algorithm})" if value.algorithm else "") + "".join(
        f"; {need}" for need in needs if need)


env.filters.update(iso=iso_text, seconds=seconds_text, mb=mb_text, mbps=mbps_text, pct=percent_text, when=when_text,
                   encryption=encryption_text, too_few_runs=too_few_runs,
                   other_notes=other_notes)


def plotly_ref(asset: Asset, depth: int) -> dict[str, str]:
    """What a page says of the plotly.js it loads: where from (relative), which version, its SHA-256."""
    return {"href": asset.href(depth), "name": asset.name, "version": asset.version, "sha256": asset.sha256}


def render_html(report: RunReport, evidence: EvidenceNote | None = None) -> str:
    """The run's page, for REPORT_DIR/<run id>/report.html: it loads ../assets/plotly-<version>.min.js
    (verification.reports.assets.write_asset writes it). `evidence`: how the folder's manifest is about
    to be signed; None when no manifest is written."""
    views = [{"d": d, "charts": database_charts(d, index), "alerts": d.alerts, "s": database_summary(d)}
             for index, d in enumerate(report.databases, start=1)]
    alerts = [(d.database, alert) for d in report.databases for alert in d.alerts]
    return env.get_template("report.html.j2").render(r=report, views=views, alerts=alerts, evidence=evidence,
                                                     plotly=plotly_ref(plotly_asset(), 1))
