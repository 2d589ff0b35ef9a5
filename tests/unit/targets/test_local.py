"""The local target's process safety: a command's whole process group dies with it, and a stale
pid file never makes restoreproof signal a process that is not its server."""

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from verification.targets.local import LocalTarget, _postmaster_of, reap_local_folder


@pytest.fixture()
def work() -> Iterator[Path]:
    # Under /tmp and open to all: as root, commands run as the postgres OS user, who must reach it.
    folder = Path(tempfile.mkdtemp(prefix="restoreproof-test-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_command_that_times_out_is_killed_with_everything_it_started(work: Path) -> None:
    target = LocalTarget(work, "/nonexistent", Path("/usr/bin"), work / "state.json", 0.0)
    marker = work / "child.pid"
    started = time.monotonic()
    result = target.run(["sh", "-c", f"sleep 300 & echo $! > {marker}; wait"], timeout=2)
    assert result.exit_code == 124 and time.monotonic() - started < 30
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), f"the command's child {child} outlived its timeout"


def test_a_stale_pid_file_never_names_an_unrelated_process(tmp_path: Path) -> None:
    data = tmp_path / "target" / "data"
    data.mkdir(parents=True)
    # After a reboot the pid in postmaster.pid may belong to anything: here, this very test.
    (data / "postmaster.pid").write_text(f"{os.getpid()}\n{data}\n")
    assert _postmaster_of(data) is None
    assert reap_local_folder(tmp_path / "target") is True
    assert not (tmp_path / "target").exists()  # and this process is still here to say so


def test_an_unreadable_record_is_kept_while_young_and_dropped_once_old(tmp_path: Path) -> None:
    """A sweep may read a record while it is being written: one it cannot parse is kept (and said)
    while younger than YOUNG_RECORD_SECONDS, and dropped only once older; a readable one is listed."""
    import json

    from verification.atomic import write_text_atomically
    from verification.targets.local import YOUNG_RECORD_SECONDS, leftovers_dir, local_records

    folder = leftovers_dir(tmp_path)
    folder.mkdir(parents=True)
    write_text_atomically(folder / "good.json", json.dumps({"run_id": "r1", "folder": "/nowhere", "host": "w",
                                                            "pid": 1, "process": "b/n/1"}))
    (folder / "half.json").write_text('{"run_id": "r2", "fol')
    old = folder / "old.json"
    old.write_text('{"run_id": ')
    stale = time.time() - YOUNG_RECORD_SECONDS - 5
    os.utime(old, (stale, stale))
    died = folder / ".x.json.abc.tmp"  # a write that died before its rename
    died.write_text("{")
    os.utime(died, (stale, stale))
    said: list[str] = []
    records = local_records(tmp_path, said.append)
    assert [(r.run_id, r.holder.pid if r.holder else None) for r in records] == [("r1", 1)]
    assert (folder / "half.json").exists() and not old.exists() and not died.exists()
    assert len(said) == 1 and said[0].startswith(f"record {folder / 'half.json'} kept: unreadable (JSONDecodeError)")
    assert sorted(p.name for p in folder.iterdir()) == ["good.json", "half.json"]  # no temporary file left
