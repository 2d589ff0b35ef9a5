"""Where `restoreproof` writes: results on stdout, progress and warnings on stderr.

`restoreproof plan repo > plan.txt` must give the plan and nothing else, and a scheduler capturing
stdout must read the verdicts without the progress lines. Neither console wraps (soft_wrap), and Rich
writes no colour or style codes to a file or a pipe (it asks the stream whether it is a terminal).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from verification.model import BLOCKING_UNREADABLE, BackupSet, ChainStatus, RestorePlan, UnreadableFile

out = Console(soft_wrap=True)  # results: what a pipe or a redirection is for
err = Console(stderr=True, soft_wrap=True)  # progress, warnings, errors: for the person watching


def unreadable_lines(unreadable: list[UnreadableFile], console: Console = out) -> None:
    """The files not read, each with what it is and why: blocking ones in red (they decide the exit code)."""
    for unread in unreadable:
        style = "red" if unread.kind in BLOCKING_UNREADABLE else "yellow"
        console.print(f"[{style}]{unread.kind}:[/] {escape(unread.describe())}", highlight=False)


def plan_text(plan: RestorePlan, encryption: list[str]) -> None:
    """One database's plan: its chain's status, each backup, the WAL, the timelines, what wrote it and
    what a target needs, its encryption (said by the caller) and every problem found."""
    chain = plan.chain
    style = "green" if chain.status is ChainStatus.COMPLETE and not chain.defects else "red"
    out.print(f"[bold]{plan.database}[/]: [{style}]{chain.status}[/]", highlight=False)
    for backup in chain.backups:
        out.print(_backup_line(backup), highlight=False)
    if chain.wal:
        out.print(f"  wal   {chain.wal.first} .. {chain.wal.last} ({chain.wal.segments} segments)", highlight=False)
    if len(chain.timelines) > 1:
        forks = ", ".join(f"{t.timeline} from {t.parent} at {t.fork_lsn}" for t in chain.timelines
                          if t.parent is not None)
        out.print(f"  timeline {chain.timeline} ({chain.timeline_choice or 'none chosen'}); forks: {forks}",
                  highlight=False)
    if plan.written_by:
        writers = ", ".join(f"{what} {version}" for what, version in plan.written_by.items())
        out.print(f"  written by {escape(writers)}", highlight=False)
    for need in plan.needs:
        out.print(f"  needs {escape(need.tool)} {escape(need.version)} or newer: {escape(need.why)}",
                  highlight=False)
    for said in encryption:
        out.print(f"  {escape(said)}", highlight=False)
    for problem in [*chain.defects, *chain.problems]:
        out.print(f"  [red]{problem.code}[/]: {escape(problem.message)}", highlight=False)


def _backup_line(b: BackupSet) -> str:
    lsns = f"  LSN {b.first_lsn}..{b.last_lsn}  family {b.family}" if b.first_lsn else ""
    return f"  {b.type:<5} {b.name}  {b.start:%Y-%m-%d %H:%M:%S} .. {b.finish:%H:%M:%S}{lsns}"


def verdict_lines(database: str, verdict: str, reasons: list[str]) -> None:
    """A database's verdict and each of its reasons."""
    style = {"passed": "green", "failed": "red"}.get(verdict, "yellow")
    out.print(f"[bold]{escape(database)}[/]: [{style}]{verdict}[/]", highlight=False)
    for reason in reasons:
        out.print(f"  - {escape(reason)}", highlight=False)
