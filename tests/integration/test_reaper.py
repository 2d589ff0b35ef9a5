"""The reaper on the real (shared) Docker engine: containers and volumes labelled as dead and live runs'
of this test's own store. Only what is proven dead goes; a live run's things, a run this store does
not know (every other user's of this engine) and a run whose worker elsewhere still beats are kept."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

import docker
from tests.integration.conftest import leftovers
from tests.unit.factories import dead_holder
from verification.cli import app
from verification.leases import sweep
from verification.model import RunResult
from verification.results import ResultStore
from verification.results.store import RunLeaseRow
from verification.targets.labels import ROLE_LABEL, RUN_LABEL
from verification.targets.lease import Holder, this_process

pytestmark = pytest.mark.integration
IMAGE = "restoreproof/postgres:15"
ELSEWHERE = Holder("worker-elsewhere", 4242, "another-boot/4026531836/777")


class Runs:
    """Runs of this test's store, each with a container and a volume labelled as its holder left them."""

    def __init__(self, client: docker.DockerClient, settings: Any) -> None:
        self.client = client
        self.settings = settings
        self.prefix = f"reaptest-{secrets.token_hex(3)}"
        self.store = ResultStore(settings.results_database_url)

    def leave(self, name: str, holder: Holder | None, *, in_store: bool = True, finished: bool = False,
              heartbeat_age: timedelta | None = None) -> str:
        run_id = f"{self.prefix}-{name}"
        tags = {RUN_LABEL: run_id, ROLE_LABEL: "target", "restoreproof.database": "demo1",
                **(holder.labels() if holder else {})}
        self.client.volumes.create(name=f"restoreproof-{run_id}-data", labels=tags)
        self.client.containers.create(IMAGE, ["sleep", "infinity"], name=f"restoreproof-{run_id}", labels=tags,
                                      network_mode="none")
        if in_store:
            started = datetime.now(UTC)
            self.store.start_run(RunResult(run_id=run_id, engine="postgres", source="/b", started_at=started))
            if finished:
                self.store.finish_run(run_id, started, "passed")
        if in_store and holder is not None:
            lease = self.store.take_lease(run_id, host=holder.host, pid=holder.pid, process=holder.process,
                                          scope="run", lease_seconds=180, database="demo1")
            if heartbeat_age is not None:
                with self.store.engine.begin() as connection:
                    connection.execute(update(RunLeaseRow).where(RunLeaseRow.id == lease).values(
                        heartbeat_at=self.store.now() - heartbeat_age))
        return run_id

    def remove_all(self) -> None:
        self.store.close()
        selector = {"label": f"{RUN_LABEL}"}
        for container in self.client.containers.list(all=True, filters=selector):
            if container.labels.get(RUN_LABEL, "").startswith(self.prefix):
                container.remove(force=True)
        for volume in self.client.volumes.list(filters=selector):
            if (volume.attrs.get("Labels") or {}).get(RUN_LABEL, "").startswith(self.prefix):
                volume.remove(force=True)


@pytest.fixture
def runs(engine: docker.DockerClient, settings: Any) -> Iterator[Runs]:
    try:
        engine.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"image {IMAGE} is not present (make images)")
    made = Runs(engine, settings)
    yield made
    made.remove_all()


def test_only_what_is_proven_dead_is_removed_and_every_other_run_on_the_engine_is_kept(runs: Runs, settings: Any):
    dead = runs.leave("dead", dead_holder())
    stale = runs.leave("stale", ELSEWHERE, heartbeat_age=timedelta(minutes=10))
    finished = runs.leave("finished", None, finished=True)
    live = runs.leave("live", this_process())
    beating = runs.leave("beating", ELSEWHERE, heartbeat_age=timedelta(seconds=20))
    unknown = runs.leave("unknown", dead_holder(), in_store=False)
    before_kept = {run: leftovers(run) for run in (live, beating, unknown)}
    assert all(len(names) == 2 for names in before_kept.values())

    found = sweep(settings)

    for run in (dead, stale, finished):
        assert leftovers(run) == [], run
    for run, names in before_kept.items():
        assert sorted(leftovers(run)) == sorted(names), run
    judged = {d.run_id: d for d in found.reaped.decisions}
    assert judged[dead].judgement.reason.endswith("is gone (no process "
                                                  f"{judged[dead].holder.pid} with its start time on this host)")
    assert sorted(judged[dead].removed) == sorted([f"restoreproof-{dead}", f"restoreproof-{dead}-data"])
    assert judged[stale].judgement.reason.startswith("no heartbeat from worker worker-elsewhere pid 4242 since ")
    assert judged[finished].judgement.reason.startswith(f"run {finished} finished at ")
    assert judged[live].judgement.describe() == f"kept: {this_process().describe()} is running"
    assert judged[beating].judgement.describe().startswith("kept: worker worker-elsewhere pid 4242 is not on this "
                                                           "host; its heartbeat at ")
    assert judged[unknown].judgement.describe().startswith(f"kept: run {unknown} is not in this results store")
    # Every other run on this shared engine (other users', other tests') is none of this store's: kept.
    others = [d for d in found.reaped.decisions if not d.run_id.startswith(runs.prefix)]
    assert [d for d in others if d.judgement.dead or d.removed] == []
    assert found.reaped.errors == []


def test_reap_says_per_run_why_and_a_named_live_run_needs_force(runs: Runs, settings: Any,
                                                                 monkeypatch: pytest.MonkeyPatch):
    gone_holder = dead_holder()
    dead = runs.leave("dead", gone_holder)
    beating = runs.leave("beating", ELSEWHERE, heartbeat_age=timedelta(seconds=5))
    unknown = runs.leave("unknown", None, in_store=False)

    reaped = CliRunner().invoke(app, ["reap"])
    assert reaped.exit_code == 0, reaped.output
    lines = reaped.stdout.splitlines()
    who = gone_holder.describe()
    assert f"run {dead} ({who}): dead: {who} is gone (no process {gone_holder.pid} with its start time on this " \
           "host)" in lines
    assert f"  removed container restoreproof-{dead}" in lines and f"  removed volume restoreproof-{dead}-data" in lines
    assert f"run {beating} (worker worker-elsewhere pid 4242): kept: worker worker-elsewhere pid 4242 is not on " \
           "this host; its heartbeat at " in reaped.stdout
    assert f"  kept container restoreproof-{beating}" in lines
    assert leftovers(dead) == [] and len(leftovers(beating)) == 2

    # Named on purpose: a run nobody can judge goes; one that shows signs of life only with --force.
    gone = CliRunner().invoke(app, ["reap", "--run", unknown])
    assert gone.exit_code == 0, gone.output
    assert f"run {unknown} (no holder labels): dead: named on purpose (run {unknown} is not in this results " \
           "store" in gone.stdout
    assert leftovers(unknown) == []
    refused = CliRunner().invoke(app, ["reap", "--run", beating])
    assert refused.exit_code == 2 and f"run {beating} was kept: --force removes it anyway" in refused.stderr
    assert len(leftovers(beating)) == 2
    forced = CliRunner().invoke(app, ["reap", "--run", beating, "--force"])
    assert forced.exit_code == 0, forced.output
    assert "dead: named on purpose (forced; worker worker-elsewhere pid 4242 is not on this host" in forced.stdout
    assert leftovers(beating) == []
    assert CliRunner().invoke(app, ["reap", "--force"]).exit_code == 2

