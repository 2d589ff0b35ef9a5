"""Decide a database's verdict from everything that was proven, and say why.

`passed` needs positive evidence for each of: a complete chain with no known-bad backup beside it,
a restore that came online at the planned point (proven from the server's own words, not copied
from the plan), and at least one integrity check of the restored database that passed, with no
required check that did not, and every database of the restored cluster that such a check says exists
checked by one of them. A check of the backup files read without a server (page checksums,
a repository's file checksums) can fail a database but never stands in for that integrity check.
Anything missing is not a pass: there is no default verdict.
"""

from __future__ import annotations

from verification.engines.base import RestoreOutcome
from verification.model import (
    DATABASES_CHECKED,
    DATABASES_EXISTING,
    DATABASES_NOT_CHECKED,
    FILES_NOT_READ,
    POINT_ROUNDED_RULE,
    ChainStatus,
    CheckKind,
    CheckResult,
    CheckStatus,
    RestorePlan,
    Verdict,
    overall_verdict,
)
from verification.report_model import DatabaseEntry, RunReport

# The target kind that restores nothing on purpose (a fast pre-check of a whole folder), and the reason
# every database it does not fail is "error" for: said here, where offline_clean reads it back.
OFFLINE_REASON = "offline verification asked for (--target offline)"
OFFLINE_NOT_RESTORED = f"not restored: {OFFLINE_REASON}"


def decide(plan: RestorePlan, outcome: RestoreOutcome | None) -> tuple[Verdict, list[str]]:
    verdict, reasons = _decide(plan, outcome)
    return verdict, _said(verdict, reasons)


def _decide(plan: RestorePlan, outcome: RestoreOutcome | None) -> tuple[Verdict, list[str]]:
    chain = plan.chain
    # Known-bad backups lead the reasons: they are what the reader must see first.
    defects = [f"{p.message}" for p in chain.defects]
    unread = [f"not judged: {p.message}" for p in chain.unread]
    if chain.status is ChainStatus.REFUSED:
        # Nothing restored: only a known-bad backup beside the chain is a verdict on the backups.
        return (Verdict.FAILED if defects else Verdict.ERROR,
                defects + [f"not restored: {p.message}" for p in chain.problems] + unread)
    if chain.status is not ChainStatus.COMPLETE:
        reasons = [f"chain broken: {p.message}" for p in chain.problems] or ["chain broken (no detail)"]
        failed = [] if outcome is None else outcome.failures + _check_reasons(outcome, CheckStatus.FAILED)
        if unread and not defects and not failed:
            # What is missing may be in a backup nobody could read: that stops restoreproof, it does not
            # prove the backups wrong.
            return Verdict.ERROR, unread + reasons
        if outcome is not None:
            # Whatever else the restore met is kept, after the failure: failed outranks error.
            reasons += (outcome.failures + _check_reasons(outcome, CheckStatus.FAILED) + outcome.errors
                        + _check_reasons(outcome, CheckStatus.ERROR))
        return Verdict.FAILED, defects + reasons
    if outcome is None:
        if defects:
            return Verdict.FAILED, [*defects, "the restore did not run"]
        return Verdict.ERROR, ["the restore did not run"]

    failures = list(outcome.failures) + _check_reasons(outcome, CheckStatus.FAILED)
    errors = list(outcome.errors) + _check_reasons(outcome, CheckStatus.ERROR)
    notes = _optional_notes(outcome)
    if outcome.exhausted:
        # The target ran out of memory or disk: a server that would not recover, a check that lost its
        # server, a tool killed, all follow from that, not from the backups. Only what was proven without
        # the target (the plan's known-bad backups, the backup files read by restoreproof) still fails.
        offline = _check_reasons(outcome, CheckStatus.FAILED, CheckKind.BACKUP_FILES)
        starved = [f"not taken as a verdict (the target ran out of resources): {r}"
                   for r in failures if r not in offline]
        if defects or offline:
            return Verdict.FAILED, defects + offline + outcome.exhausted + unread + starved + errors + notes
        return Verdict.ERROR, outcome.exhausted + unread + starved + errors + notes
    if failures or defects:
        proven = [] if failures or errors else outcome.proofs + _passed(outcome)
        return Verdict.FAILED, defects + failures + errors + proven + notes
    if unread:
        # The chain restored, but a newer backup that could not be read may hold a later point.
        return Verdict.ERROR, unread + errors + notes
    if errors:
        # What the backup files showed without a server is said too: an error is not a verdict on them.
        return Verdict.ERROR, errors + notes + [_files_note(c.name, c.summary) for c in outcome.checks
                                                if c.kind is CheckKind.BACKUP_FILES and c.status is CheckStatus.PASSED]
    if not outcome.online:
        return Verdict.ERROR, ["the restored server never came online, and no step said why"]
    if not outcome.proofs:
        return Verdict.ERROR, ["nothing the server said proves the restore reached the planned point"]
    required = [c for c in outcome.checks if c.required]
    passed = [c for c in required if c.status is CheckStatus.PASSED and c.kind is CheckKind.RESTORED]
    if not passed:
        return Verdict.ERROR, ["no integrity check of the restored database ran, so nothing proves the restored "
                               "data intact"]
    not_passed = [c for c in required if c.status is not CheckStatus.PASSED]
    if not_passed:
        return Verdict.ERROR, [f"required check {c.name} is {c.status}: {c.summary}" for c in not_passed]
    if unlooked := _unlooked(outcome):
        return Verdict.ERROR, [f"database {name} of the restored cluster was not looked at by any integrity check: "
                               f"{why}" for name, why in unlooked.items()]

    backups = ", ".join(f"{b.type} {b.label}" for b in chain.backups)
    reasons = [f"chain complete: {backups}"]
    if chain.wal is not None:
        reasons.append(f"WAL complete: {chain.wal.segments} segments {chain.wal.first} to {chain.wal.last}")
    point = plan.stop_at.isoformat() if plan.stop_at else "latest"
    achieved = outcome.achieved.isoformat() if outcome.achieved else "no transaction time reported"
    rounded = next((r for r in chain.rules if r.rule == POINT_ROUNDED_RULE and r.passed), None)
    if rounded is not None:  # never claim the point asked for when the plan could only come before it
        reasons.append(f"restored to the newest point before {point} and online (last transaction: {achieved}): "
                       f"{rounded.detail}")
    else:
        # Where the archive forked, the history restored is part of the point.
        on = f" on timeline {chain.timeline} ({chain.timeline_choice})" if len(chain.timelines) > 1 else ""
        reasons.append(f"restored to {point}{on} and online (last transaction: {achieved})")
    reasons += outcome.proofs + _passed(outcome)
    return Verdict.PASSED, reasons + notes


def _unlooked(outcome: RestoreOutcome) -> dict[str, str]:
    """Each database a check of the restored server says exists that no passed one of them says it
    checked, with why (a data check reads rows, not pages: it looks at no database in this sense)."""
    integrity = [c for c in outcome.checks if c.kind is CheckKind.RESTORED]
    looked = {name for c in integrity if c.status is CheckStatus.PASSED
              for name in c.details.get(DATABASES_CHECKED, ())}
    why: dict[str, str] = {}
    for check in integrity:
        why.update(check.details.get(DATABASES_NOT_CHECKED, {}))
    return {name: why.get(name, "no check said why") for check in integrity
            for name in check.details.get(DATABASES_EXISTING, ()) if name not in looked}


def _passed(outcome: RestoreOutcome) -> list[str]:
    """The checks that passed, and the ones skipped with why (a setting, a cluster without checksums)."""
    return ([f"{c.name}: {c.summary}" for c in outcome.checks if c.status is CheckStatus.PASSED]
            + [f"{c.name} skipped: {c.summary}" for c in outcome.checks if c.status is CheckStatus.SKIPPED])


def _files_note(name: str, summary: str) -> str:
    return f"{name} (backup files, not a verdict on the data): {summary}"


def offline_clean(report: RunReport) -> bool:
    """Whether an offline run (--target offline) found nothing wrong: its verdict is error only because
    nothing was restored on purpose. Decided from the published report, strictly: every database is
    "error" with the offline reason, each other reason a backup-file check that passed; its chain
    complete with no defect, problem or unread backup; every check passed (none failed, errored or
    skipped); no database due left unverified; no file left unread that would keep a run from passing."""
    if report.verdict is not Verdict.ERROR or not report.databases or report.not_verified:
        return False
    if overall_verdict([Verdict.PASSED], [str(u.kind) for u in report.unreadable]) is not Verdict.PASSED:
        return False
    return all(_offline_only(db) for db in report.databases)


def _offline_only(db: DatabaseEntry) -> bool:
    chain = db.chain
    if db.verdict is not Verdict.ERROR or chain.status is not ChainStatus.COMPLETE:
        return False
    if chain.defects or chain.problems or chain.unread:
        return False
    # A check skipped looked at nothing, one that left a file unread did not look at it: not "nothing wrong".
    if any(c.status is not CheckStatus.PASSED or c.details.get(FILES_NOT_READ) for c in db.checks):
        return False
    passed = {_files_note(c.name, c.summary) for c in db.checks
              if c.kind is CheckKind.BACKUP_FILES and c.status is CheckStatus.PASSED}
    others = [r for r in db.reasons if r != OFFLINE_NOT_RESTORED]
    return len(db.reasons) - len(others) == 1 and all(r in passed for r in others)


def _said(verdict: Verdict, reasons: list[str]) -> list[str]:
    """Every verdict carries reasons, none of them blank: a step that failed without saying why is a
    restoreproof bug, and is said as one rather than shown as nothing."""
    said = [r if r.strip() else "(a step gave no reason: a restoreproof bug, please report it)" for r in reasons]
    return said or [f"(verdict {verdict} without a reason: a restoreproof bug, please report it)"]


def _describe(check: CheckResult) -> str:
    shown = check.findings[:10]
    more = f" (+{len(check.findings) - 10} more)" if len(check.findings) > 10 else ""
    return f"{check.name} {check.status}: {check.summary}" + (": " + "; ".join(shown) + more if shown else "")


def _check_reasons(outcome: RestoreOutcome, status: CheckStatus, kind: CheckKind | None = None) -> list[str]:
    """Reasons from the required checks with the given status (and kind), with findings."""
    return [_describe(c) for c in outcome.checks
            if c.required and c.status is status and (kind is None or c.kind is kind)]


def _optional_notes(outcome: RestoreOutcome) -> list[str]:
    """Optional checks inform but never decide the verdict."""
    return [f"(optional) {_describe(c)}" for c in outcome.checks
            if not c.required and c.status in (CheckStatus.FAILED, CheckStatus.ERROR)]
