"""The top of report.html, for an auditor: per database the verdict, the proof in one line, each
objective with where its target came from; and whether the run's evidence is signed, with the command
that checks it.

Everything here is text built from the typed report (and, for the signature, from what write_reports
is about to sign with), so the template only places it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verification.model import CheckKind, CheckStatus, Verdict
from verification.report_model import DatabaseEntry, DriftEntry
from verification.reports.charts import seconds_text, when_text

if TYPE_CHECKING:
    from verification.config import Settings

# The placeholder an auditor replaces with the signer's public key when the page cannot name its file.
PUBLIC_KEY_PLACEHOLDER = "SIGNER-PUBLIC-KEY.pem"
# How verification.prediction.drift.too_little_history starts the note too_few_runs replaces.
TOO_LITTLE_HISTORY = "no trend and no alert from history"


@dataclass(frozen=True)
class Objective:
    """One objective's line: the target and where it came from, and what was measured against it."""

    target: str  # "14400 s (4 h)"
    origin: str  # "configured (rto.databases.demo1)" or "default; set rto.databases.demo1"
    is_default: bool | None  # None: a report from before the origin was recorded
    measured: str  # "recovered in 4.82 s: met", or "not restored: <why>"
    met: bool | None


@dataclass(frozen=True)
class DatabaseSummary:
    database: str
    verdict: Verdict
    proof: str
    restored: bool
    rto: Objective | None
    rpo: Objective | None


@dataclass(frozen=True)
class EvidenceNote:
    """How the run folder's manifest is signed, and the command that checks it."""

    algorithm: str  # "ed25519" or "hmac"
    key_id: str
    command: str
    key_hint: str


def _ran(name: str, status: CheckStatus) -> str:
    # A check that failed or errored ran too, but proves nothing: an optional one leaves a pass a pass.
    return name if status is CheckStatus.PASSED else f"{name} ({status})"


def checks_run(database: DatabaseEntry) -> str:
    """'pg_amcheck, checksums (error), 3 data suites': every check that ran (not skipped), each that did
    not pass with its status, data suites counted by status."""
    ran = [c for c in database.checks if c.status is not CheckStatus.SKIPPED]
    names = list(dict.fromkeys(_ran(c.name, c.status) for c in ran if c.kind is not CheckKind.DATA))
    for status in dict.fromkeys(c.status for c in ran if c.kind is CheckKind.DATA):
        suites = sum(1 for c in ran if c.kind is CheckKind.DATA and c.status is status)
        names.append(_ran(f"{suites} data suite{'s' if suites != 1 else ''}", status))
    return ", ".join(names) if names else "none"


def proof_line(database: DatabaseEntry) -> str:
    """The verdict's proof in one line: the point the restore reached (as the server said) and the checks
    run; a database with no restore says so, with the first reason."""
    point = database.restore_point
    if point.achieved is None:
        return f"not restored: {database.reasons[0]}"
    said = f" ({point.detail})" if point.detail else ""
    return f"restored to {when_text(point.achieved)}{said}; checks run: {checks_run(database)}"


def _origin(kind: str, database: str, source: str | None) -> tuple[str, bool | None]:
    if source == "configured":
        return f"configured ({kind}.databases.{database})", False
    if source == "default":
        return f"default ({kind}.default_seconds); set {kind}.databases.{database}", True
    return "origin not recorded in this report", None


def _verdict_word(met: bool | None) -> str:
    return "met" if met is True else "MISSED" if met is False else "not judged"


def _rto(database: DatabaseEntry, restored: bool) -> Objective | None:
    if database.objectives is None:
        return None
    rto = database.objectives.rto
    origin, is_default = _origin("rto", database.database, rto.target_source)
    if rto.measured_seconds is None:
        measured = "not restored: no recovery time" if not restored else "never came online: no recovery time"
    else:
        measured = f"recovered in {seconds_text(rto.measured_seconds)}: {_verdict_word(rto.met)}"
    return Objective(seconds_text(rto.target_seconds), origin, is_default, measured, rto.met)


def _rpo(database: DatabaseEntry, restored: bool) -> Objective | None:
    if database.objectives is None:
        return None
    rpo = database.objectives.rpo
    origin, is_default = _origin("rpo", database.database, rpo.target_source)
    if rpo.worst_log_gap_seconds is None:
        measured = "no log gap measured"
    else:
        measured = f"worst log gap {seconds_text(rpo.worst_log_gap_seconds)}: {_verdict_word(rpo.met)}"
    if not restored:
        measured += "; not restored, so no restore point"
    return Objective(seconds_text(rpo.target_seconds), origin, is_default, measured, rpo.met)


def database_summary(database: DatabaseEntry) -> DatabaseSummary:
    restored = database.restore_point.achieved is not None
    return DatabaseSummary(database.database, database.verdict, proof_line(database), restored,
                           _rto(database, restored), _rpo(database, restored))


def evidence_note(settings: Settings, run_dir: Path, algorithm: str, key_id: str) -> EvidenceNote:
    """What report.html says of the signature write_reports writes into `run_dir` with this key."""
    folder = shlex.quote(str(run_dir.resolve()))
    if algorithm == "hmac":
        return EvidenceNote(algorithm, key_id, f"restoreproof evidence verify {folder} --config CONFIG",
                            "HMAC-SHA256: the check needs the shared secret, so run it with a configuration "
                            "(CONFIG) that holds evidence.signing_key or evidence.signing_key_file")
    key_file = settings.evidence.signing_key_file
    public = key_file.with_name(key_file.name + ".pub") if key_file is not None else None
    if public is not None and public.is_file():
        key = shlex.quote(str(public))
        hint = f"the public key beside the signing key ({public})"
    else:
        key = PUBLIC_KEY_PLACEHOLDER
        hint = (f"{PUBLIC_KEY_PLACEHOLDER} is the public key of Ed25519 key {key_id}, which its owner gives "
                "auditors; on the signing host, leave out --public-key to check with the configured key")
    return EvidenceNote(algorithm, key_id, f"restoreproof evidence verify {folder} --public-key {key}", hint)


def too_few_runs(drift: DriftEntry) -> str | None:
    """Why the history carries no trend, as 'k of N' runs; None when it has one. Reports written before the
    minimum was recorded are read with the configuration's defaults (rto.trend_min_runs, rto.trend_min_days)."""
    if drift.trend is not None:
        return None
    from verification.config import RtoSettings

    defaults = RtoSettings()
    need = drift.min_runs or defaults.trend_min_runs
    days = drift.min_days if drift.min_days is not None else defaults.trend_min_days
    measured = [point.at for point in drift.series if point.recovery_seconds is not None]
    span = (max(measured) - min(measured)).total_seconds() / 86400 if measured else 0.0
    return (f"Too few runs for a trend ({len(measured)} of {need} measured runs; {span:.1f} of {days:g} days): "
            "no trend line and no alert drawn from history")


def other_notes(drift: DriftEntry) -> list[str]:
    """The drift's notes but the one too_few_runs says (which runs the series left out, or matched by name)."""
    return [note for note in drift.notes if not note.startswith(TOO_LITTLE_HISTORY)]
