"""Managed child processes: real processes, their groups and descendants stopped, nothing left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verification.demo.processes import ProcessError, Processes


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for_file(path: Path, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} not written")


def test_stop_reaches_descendants_in_groups_of_their_own(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    with Processes(tmp_path / "logs") as processes:
        # The child leaves the parent's process group, as Airflow's task runners do.
        child_code = f"import os, time; os.setsid(); open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
        leader = processes.start("leader", ["bash", "-c", f'{sys.executable} -c "{child_code}" & wait'])
        child = int(wait_for_file(pidfile))
        assert alive(leader.pid) and alive(child)
        assert os.getpgid(child) != os.getpgid(leader.pid)
    assert not alive(leader.pid) and not alive(child)
    assert processes.started == []


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    processes = Processes(tmp_path)
    stubborn = processes.start("stubborn", ["bash", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"])
    processes.wait_until("stubborn", lambda: "ready" in stubborn.log.read_text(), 10, interval=0.05)
    started = time.monotonic()
    processes.stop(grace=1)
    assert time.monotonic() - started < 8
    assert not stubborn.running() and stubborn.process.returncode == -9


def test_output_goes_to_the_log_and_an_exit_is_named_with_it(tmp_path: Path) -> None:
    processes = Processes(tmp_path)
    broken = processes.start("broken", ["bash", "-c", "echo 'cannot bind port 1234' >&2; exit 3"])
    broken.process.wait(10)
    assert "cannot bind port 1234" in (tmp_path / "broken.log").read_text()
    with pytest.raises(ProcessError, match=r"broken exited with code 3 .*\n.*cannot bind port 1234"):
        processes.check()


def test_waiting_stops_when_a_process_exits_and_names_it(tmp_path: Path) -> None:
    processes = Processes(tmp_path)
    processes.start("quitter", ["bash", "-c", "echo bye; exit 1"])
    started = time.monotonic()
    with pytest.raises(ProcessError, match="quitter exited with code 1"):
        processes.wait_until("something that never comes", lambda: False, timeout=60, interval=0.05)
    assert time.monotonic() - started < 10  # not the whole timeout


def test_waiting_times_out_naming_what_and_the_last_error(tmp_path: Path) -> None:
    processes = Processes(tmp_path)
    processes.start("sleeper", ["sleep", "30"])

    def refused() -> bool:
        raise ConnectionRefusedError("nobody listens")

    try:
        with pytest.raises(ProcessError, match=r"the port not ready after 1 s \(last: ConnectionRefusedError"):
            processes.wait_until("the port", refused, timeout=1, interval=0.1)
    finally:
        processes.stop()


def test_a_command_that_cannot_start_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ProcessError, match="cannot start ghost"):
        Processes(tmp_path).start("ghost", [str(tmp_path / "no-such-program")])


def test_the_processes_die_with_their_parent_killed_outright(tmp_path: Path) -> None:
    script = (f"import sys, time; sys.path.insert(0, {str(Path.cwd())!r})\n"
              "from pathlib import Path\n"
              "from verification.demo.processes import Processes\n"
              f"managed = Processes(Path({str(tmp_path)!r})).start('orphan', ['sleep', '300'])\n"
              "print(managed.pid, flush=True)\n"
              "time.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert alive(child)
    parent.kill()  # SIGKILL: no cleanup of its own runs
    parent.wait(10)
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_kill_takes_the_process_and_its_descendants_at_once_and_waiting_goes_on(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    processes = Processes(tmp_path / "logs")
    try:
        # A descendant in a group of its own (an Airflow task runner) and one in the leader's group.
        child_code = f"import os, time; os.setsid(); open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
        leader = processes.start("worker", ["bash", "-c", f'{sys.executable} -c "{child_code}" & sleep 300 & wait'])
        bystander = processes.start("bystander", ["sleep", "300"])
        child = int(wait_for_file(pidfile))
        killed = leader.kill()
        assert leader.pid in killed and child in killed and len(killed) == 3, killed
        assert leader.process.returncode == -9
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in killed) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in killed)
        assert alive(bystander.pid)
        # Killed on purpose: not a failure of the others' waiting.
        processes.check()
        processes.wait_until("ready", lambda: True, timeout=1)
    finally:
        processes.stop()
    assert not alive(bystander.pid)
