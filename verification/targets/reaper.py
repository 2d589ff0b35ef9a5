"""Remove what a killed run left behind: labelled containers and volumes, local target folders."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from verification.targets.labels import DATABASE_LABEL, RUN_LABEL
from verification.targets.local import reap_local


@dataclass
class ReapReport:
    containers: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.containers) + len(self.volumes) + len(self.folders)


def reap_docker(run_id: str | None = None, report: ReapReport | None = None,
                database: str | None = None) -> ReapReport:
    """Remove containers, then volumes, labelled with the run (any run when `run_id` is None), and
    with the database when one is given."""
    import docker.errors

    from verification.targets.docker import docker_client

    report = report or ReapReport()
    wanted = [f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL]
    if database is not None:
        wanted.append(f"{DATABASE_LABEL}={database}")
    selector = {"label": wanted}
    try:
        client = docker_client()
    except Exception as exc:  # no engine reachable: whether anything of ours is left there is unknown
        report.errors.append(str(exc))
        return report
    try:
        for container in client.containers.list(all=True, filters=selector):
            try:
                container.remove(force=True, v=True)
                report.containers.append(container.name or container.id)
            except docker.errors.NotFound:
                pass
            except Exception as exc:  # an API error or the engine gone: said, and the next one still tried
                report.errors.append(f"container {container.name}: {type(exc).__name__}: {exc}")
        for volume in client.volumes.list(filters=selector):
            try:
                volume.remove(force=True)
                report.volumes.append(volume.name)
            except docker.errors.NotFound:
                pass
            except Exception as exc:
                report.errors.append(f"volume {volume.name}: {type(exc).__name__}: {exc}")
    except Exception as exc:  # listing failed: what is left there is unknown, which is not "nothing left"
        report.errors.append(f"cannot list the run's containers and volumes: {type(exc).__name__}: {exc}")
    finally:
        client.close()
    return report


def reap(state_dir: Path, run_id: str | None = None, use_docker: bool = True) -> ReapReport:
    report = ReapReport(folders=reap_local(state_dir, run_id))
    return reap_docker(run_id, report) if use_docker else report
