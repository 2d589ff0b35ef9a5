"""Remove what dead runs left behind: labelled containers and volumes, local target folders.

Nothing is removed by label alone. What a run left is grouped by run and by holder (the process
that started it, from its labels or its state record) and each group is judged (targets/lease.py's
rules, with facts the caller reads from the results store): only a group judged dead is removed,
every other one is kept and said why. A run named explicitly (`reap --run`, a scheduler's
teardown) is removed by its own label, whatever the other runs on the engine are doing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verification.targets.labels import DATABASE_LABEL, RUN_LABEL
from verification.targets.lease import Holder, Judgement
from verification.targets.local import LocalRecord, local_records, reap_local, remove_local


@dataclass
class Decision:
    """One run's things of one holder: judged dead (removed) or kept, and why."""

    run_id: str
    holder: Holder | None
    judgement: Judgement
    found: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass
class ReapReport:
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    # What was kept without a run to judge it by (an unreadable state record, young enough to be mid-write).
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.containers) + len(self.volumes) + len(self.folders)

    @property
    def kept(self) -> list[Decision]:
        return [d for d in self.decisions if not d.judgement.dead]


def reap_docker(run_id: str, report: ReapReport | None = None, database: str | None = None) -> ReapReport:
    """Remove containers, then volumes, labelled with the run (and with the database when one is
    given), whoever holds them: for a run named on purpose."""
    if not run_id:
        raise ValueError("a run id is needed: removing by the run label alone would take every run's targets")
    wanted = [f"{RUN_LABEL}={run_id}"]
    if database is not None:
        wanted.append(f"{DATABASE_LABEL}={database}")
    report = report or ReapReport()
    found = _docker_things(report, {"label": wanted})
    if found is not None:
        _remove(report, found)
    return report


@dataclass
class _Thing:
    kind: str  # "container", "volume" or "folder"
    name: str
    labels: dict[str, str]
    handle: Any  # the Docker SDK object, or the local record


def _docker_things(report: ReapReport, selector: dict[str, Any]) -> list[_Thing] | None:
    """Containers then volumes matching `selector`; None (and the error said) when the engine cannot be
    asked: what is left there is unknown, which is not "nothing left"."""
    from verification.targets.docker import docker_client

    try:
        client = docker_client()
    except Exception as exc:  # no engine reachable
        report.errors.append(str(exc))
        return None
    try:
        containers = client.containers.list(all=True, filters=selector)
        volumes = client.volumes.list(filters=selector)
    except Exception as exc:
        report.errors.append(f"cannot list the runs' containers and volumes: {type(exc).__name__}: {exc}")
        return None
    finally:
        client.close()
    return ([_Thing("container", c.name or c.id, dict(c.labels or {}), c) for c in containers]
            + [_Thing("volume", v.name, dict(v.attrs.get("Labels") or {}), v) for v in volumes])


def _remove(report: ReapReport, things: list[_Thing]) -> list[str]:
    """Remove each (containers first: a volume in use cannot go); the names removed."""
    import docker.errors

    removed = []
    for thing in sorted(things, key=lambda t: {"container": 0, "volume": 1, "folder": 2}[t.kind]):
        try:
            if thing.kind == "container":
                thing.handle.remove(force=True, v=True)
                report.containers.append(thing.name)
            elif thing.kind == "volume":
                thing.handle.remove(force=True)
                report.volumes.append(thing.name)
            else:
                if not remove_local(thing.handle):
                    report.errors.append(f"folder {thing.name}: could not be removed")
                    continue
                report.folders.append(thing.name)
            removed.append(thing.name)
        except docker.errors.NotFound:
            removed.append(thing.name)  # gone already: nothing of it is left
        except Exception as exc:  # an API error or the engine gone: said, and the next one still tried
            report.errors.append(f"{thing.kind} {thing.name}: {type(exc).__name__}: {exc}")
    return removed


def _local_things(state_dir: Path, report: ReapReport) -> list[_Thing]:
    return [_Thing("folder", record.folder, {RUN_LABEL: record.run_id}, record)
            for record in local_records(state_dir, report.notes.append)]


def _owner(thing: _Thing) -> tuple[str, Holder | None]:
    if isinstance(thing.handle, LocalRecord):
        return thing.handle.run_id, thing.handle.holder
    return thing.labels.get(RUN_LABEL, ""), Holder.from_labels(thing.labels)


JudgeFn = Callable[[str, "Holder | None"], Judgement]


def reap_dead(state_dir: Path, judge: JudgeFn, *, use_docker: bool = True, only_run: str | None = None,
              keep_runs: frozenset[str] = frozenset(), force: bool = False) -> ReapReport:
    """Judge every run's leftovers by holder and remove only those judged dead.

    `only_run`: look at that run's alone (`reap --run`): it is removed unless it shows signs of life
    (its holder seen running, or its heartbeat within its lease), and with `force` even then.
    `keep_runs`: runs never touched (the caller's own)."""
    report = ReapReport()
    things = _local_things(state_dir, report)
    if use_docker:
        selector = {"label": [f"{RUN_LABEL}={only_run}" if only_run else RUN_LABEL]}
        things += _docker_things(report, selector) or []
    groups: dict[tuple[str, Holder | None], list[_Thing]] = {}
    for thing in things:
        run_id, holder = _owner(thing)
        if not run_id or run_id in keep_runs or (only_run is not None and run_id != only_run):
            continue
        groups.setdefault((run_id, holder), []).append(thing)
    for (run_id, holder), found in sorted(groups.items(), key=lambda item: (item[0][0], str(item[0][1]))):
        judgement = judge(run_id, holder)
        if only_run is not None and not judgement.dead and (force or not judgement.live):
            # Named on purpose: removed unless it shows signs of life (`--force`: even then).
            judgement = Judgement(True, f"named on purpose ({'forced; ' if force else ''}{judgement.reason})",
                                  judgement.lease)
        decision = Decision(run_id, holder, judgement, [f"{t.kind} {t.name}" for t in found])
        if judgement.dead:
            decision.removed = _remove(report, found)
        report.decisions.append(decision)
    return report


def reap_run(state_dir: Path, run_id: str, database: str | None = None, use_docker: bool = True) -> ReapReport:
    """Everything of one run (one database of it, when given), by its labels: a scheduler's teardown,
    which runs only once the run's step for that database is over."""
    report = ReapReport(folders=reap_local(state_dir, run_id, database))
    return reap_docker(run_id, report, database) if use_docker else report
