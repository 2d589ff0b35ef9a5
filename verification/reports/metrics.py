"""report.json as Prometheus metrics: metrics.prom in the run folder, node_exporter's textfile, a Pushgateway."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import unquote, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import basic_auth_handler, default_handler, generate_latest, push_to_gateway
from prometheus_client.exposition import write_to_textfile as _write_to_textfile
from prometheus_client.registry import Collector

from verification.config import MetricsSettings
from verification.model import PhaseStatus, Verdict
from verification.report_model import DatabaseEntry, RunReport

TEXTFILE_NAME = "restoreproof.prom"
# A Pushgateway that does not answer must not hold the run up for the library's default 30 s.
PUSH_TIMEOUT_SECONDS = 10.0

_DB = ("database", "engine")
# name -> (HELP text, label names). Every HELP says its unit, as Prometheus' naming guide asks.
METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "restoreproof_restore_phase_seconds": (
        "Measured duration of one restore phase, in seconds (only phases that ran and were measured).",
        (*_DB, "phase")),
    "restoreproof_restore_phase_predicted_seconds": (
        "Duration the calibrated model predicted for one restore phase, in seconds.", (*_DB, "phase")),
    "restoreproof_recovery_seconds": (
        "Measured recovery time, from asking for the restore to the database online (checks not counted), "
        "in seconds.", _DB),
    "restoreproof_recovery_predicted_seconds": (
        "Recovery time the calibrated model predicted, in seconds.", _DB),
    "restoreproof_verdict": (
        "Verdict of the database's last verification: 1 for the current verdict, 0 for the others.",
        (*_DB, "verdict")),
    "restoreproof_rto_target_seconds": ("Recovery time objective (RTO), in seconds.", _DB),
    "restoreproof_rto_margin_seconds": (
        "RTO minus the measured recovery time, in seconds; negative when the objective was missed.", _DB),
    "restoreproof_rpo_target_seconds": ("Recovery point objective (RPO), in seconds.", _DB),
    "restoreproof_rpo_achieved_seconds": (
        "How far the restored point lies behind the newest backup, in seconds.", _DB),
    "restoreproof_rpo_worst_log_gap_seconds": (
        "Longest time between two consecutive archived log files, in seconds.", _DB),
    "restoreproof_last_success_timestamp_seconds": (
        "When the database last passed verification, in seconds since the Unix epoch.", _DB),
    "restoreproof_drift_alerts": ("Number of drift alerts raised for the database (a count).", _DB),
    "restoreproof_run_timestamp_seconds": (
        "When the run finished (when it started, if it never finished), in seconds since the Unix epoch.",
        ("engine",)),
    "restoreproof_run_duration_seconds": ("Wall-clock duration of the run, in seconds.", ("engine",)),
    "restoreproof_run_verdict": (
        "Verdict of the run: 1 for the current verdict, 0 for the others.", ("engine", "verdict")),
    "restoreproof_databases": ("Number of databases verified in the run, by verdict (a count).", ("engine", "verdict")),
    "restoreproof_not_verified": (
        "Number of databases the run could not verify at all (a count).", ("engine",)),
}


def _aware(value: datetime) -> datetime:
    # The store keeps UTC; a naive time would otherwise be read as local time by .timestamp().
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


class _Families:
    """Gauge families filled sample by sample; an unknown (None) value is left out rather than shown as 0."""

    def __init__(self) -> None:
        self._families = {name: GaugeMetricFamily(name, help_text, labels=list(labels))
                          for name, (help_text, labels) in METRICS.items()}

    def add(self, name: str, value: float | None, **labels: str) -> None:
        if value is None:
            return
        family = self._families[name]
        family.add_metric([labels[label] for label in METRICS[name][1]], float(value))

    def state_set(self, name: str, current: Verdict | None, **labels: str) -> None:
        if current is None:
            return
        for verdict in Verdict:
            self.add(name, 1.0 if verdict is current else 0.0, verdict=verdict, **labels)

    def with_samples(self) -> list[Metric]:
        # A family without samples says nothing, and a Pushgateway is stricter about them than a scrape.
        return [family for family in self._families.values() if family.samples]


def _database(families: _Families, database: DatabaseEntry, engine: str) -> None:
    labels = {"database": database.database, "engine": engine}
    for phase in database.phases:
        if phase.status is PhaseStatus.MEASURED:
            families.add("restoreproof_restore_phase_seconds", phase.seconds, phase=phase.name, **labels)
        families.add("restoreproof_restore_phase_predicted_seconds", phase.predicted_seconds, phase=phase.name,
                     **labels)
    objectives = database.objectives
    rto, rpo = (objectives.rto, objectives.rpo) if objectives else (None, None)
    predicted = (database.prediction.recovery_seconds if database.prediction
                 else rto.predicted_seconds if rto else None)
    families.add("restoreproof_recovery_seconds", database.recovery_seconds, **labels)
    families.add("restoreproof_recovery_predicted_seconds", predicted, **labels)
    families.state_set("restoreproof_verdict", database.verdict, **labels)
    if rto is not None:
        families.add("restoreproof_rto_target_seconds", rto.target_seconds, **labels)
        families.add("restoreproof_rto_margin_seconds", rto.margin_seconds, **labels)
    if rpo is not None:
        families.add("restoreproof_rpo_target_seconds", rpo.target_seconds, **labels)
        families.add("restoreproof_rpo_achieved_seconds", rpo.behind_newest_seconds, **labels)
        families.add("restoreproof_rpo_worst_log_gap_seconds", rpo.worst_log_gap_seconds, **labels)
    # No drift section means drift was not analysed: unknown, so no sample (0 would claim "no alerts").
    if database.drift is not None:
        families.add("restoreproof_drift_alerts", len(database.drift.alerts), **labels)


def report_metrics(report: RunReport, last_success: dict[str, datetime]) -> list[Metric]:
    """The gauge families for one report; `last_success` is each database's last passing run, from the store."""
    families = _Families()
    engine = report.engine
    started, finished = _aware(report.started_at), report.finished_at and _aware(report.finished_at)
    successes = {name: _aware(when) for name, when in last_success.items()}
    for database in report.databases:
        _database(families, database, engine)
        # A database that passed in this run succeeded no earlier than the run's end, whether or not
        # the store has been updated yet.
        if database.verdict is Verdict.PASSED and finished is not None:
            successes[database.database] = max(successes.get(database.database, finished), finished)
    for name, when in sorted(successes.items()):
        families.add("restoreproof_last_success_timestamp_seconds", when.timestamp(), database=name, engine=engine)

    run_time = finished or started
    families.add("restoreproof_run_timestamp_seconds", run_time.timestamp(), engine=engine)
    families.add("restoreproof_run_duration_seconds",
                 (finished - started).total_seconds() if finished else None, engine=engine)
    families.state_set("restoreproof_run_verdict", report.verdict, engine=engine)
    verdicts = [d.verdict for d in report.databases]
    for verdict in Verdict:
        families.add("restoreproof_databases", verdicts.count(verdict), engine=engine, verdict=verdict)
    families.add("restoreproof_not_verified", len(report.not_verified), engine=engine)
    return families.with_samples()


class _ReportCollector(Collector):
    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return iter(self._metrics)


def build_registry(report: RunReport, last_success: dict[str, datetime]) -> CollectorRegistry:
    """A registry of its own (not the process-wide default) holding only this report's metrics."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_ReportCollector(report_metrics(report, last_success)))
    return registry


def render_metrics(report: RunReport, last_success: dict[str, datetime]) -> str:
    """The report's metrics in the Prometheus text exposition format."""
    return generate_latest(build_registry(report, last_success)).decode("utf-8")


def _redacted(url: str) -> str:
    """The gateway's address without user name or password, fit for a log or a warning."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host, port = parts.hostname or "?", parts.port
    except ValueError:  # not even a URL: nothing in it can be shown safely
        return "(an unparseable address)"
    return f"{parts.scheme}://{host}:{port}" if port else f"{parts.scheme}://{host}"


def _push_handler(url: str) -> tuple[str, Callable[..., Callable[[], None]]]:
    """The gateway URL without credentials, and a handler that sends them as Basic auth if the URL had any."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.username is None:
        return url, default_handler
    bare = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()
    # User-info in a URL is percent-encoded ("p%40ss" for "p@ss"); the header wants it as typed.
    username, password = unquote(parts.username), unquote(parts.password or "")

    def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                data: bytes) -> Callable[[], None]:
        return basic_auth_handler(url, method, timeout, headers, data, username, password)

    return bare, handler


def push_metrics(registry: CollectorRegistry, url: str, job: str, instance: str) -> str | None:
    """Push to a Pushgateway; a warning (never the credentials) instead of an exception when that fails."""
    try:
        gateway, handler = _push_handler(url)
        push_to_gateway(gateway, job=job, registry=registry, grouping_key={"instance": instance},
                        timeout=PUSH_TIMEOUT_SECONDS, handler=handler)
    except Exception as exc:  # metrics are a side channel: the report is written and the verdict stands
        # The library only ever saw the URL without credentials; in case a message quotes the original
        # anyway, it and its user-info part are blanked out.
        if isinstance(exc, HTTPError):
            message = f"HTTP {exc.code} {exc.reason}"
        else:
            message = str(exc.reason if isinstance(exc, URLError) else exc)
        userinfo = (url.partition("://")[2] or url).partition("/")[0].rpartition("@")[0]
        for secret in (url, userinfo):
            if secret:
                message = message.replace(secret, "***")
        return f"metrics not pushed to the Pushgateway at {_redacted(url)}: {message}"
    return None


def write_metrics(report: RunReport, run_dir: Path, last_success: dict[str, datetime],
                  settings: MetricsSettings) -> list[str]:
    """Write run_dir/metrics.prom, and the textfile and Pushgateway copies when configured; returns warnings."""
    registry = build_registry(report, last_success)
    run_dir.mkdir(parents=True, exist_ok=True)
    # Written through a temporary file and a rename, so a reader never sees half a file.
    _write_to_textfile(str(run_dir / "metrics.prom"), registry)
    warnings: list[str] = []
    if settings.textfile_dir is not None:
        target = settings.textfile_dir / TEXTFILE_NAME
        try:
            _write_to_textfile(str(target), registry)
        except OSError as exc:
            warnings.append(f"metrics not written to node_exporter's textfile {target}: {exc}")
    if settings.pushgateway_url:
        # One group per host (or engine), so each push replaces that host's previous run and no other's.
        instance = str(report.host.get("hostname") or report.engine)
        warning = push_metrics(registry, settings.pushgateway_url, settings.job, instance)
        if warning:
            warnings.append(warning)
    return warnings
