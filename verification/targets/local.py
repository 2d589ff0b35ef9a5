"""Disposable targets as local processes: a private temporary folder, owned by the database's OS user.

Used where no Docker engine is reachable. Commands run as the `postgres` OS user when restoreproof
runs as root (PostgreSQL refuses to run as root). Each target leaves a small state file naming its
folder, so `restoreproof reap` can stop its server and remove the folder if the run was killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from verification.atomic import write_text_atomically
from verification.errors import TargetError
from verification.targets.access import Reader
from verification.targets.base import ExecResult
from verification.targets.labels import slug
from verification.targets.lease import Holder, this_process
from verification.targets.polling import poll_until

OS_USER = "postgres"


def leftovers_dir(state_dir: Path) -> Path:
    return state_dir / "leftovers"


class LocalTarget:
    kind = "local"

    def __init__(self, work_dir: Path, repo_path: str, bin_dir: Path, state_file: Path,
                 provision_seconds: float) -> None:
        self.work_dir = str(work_dir)
        # The target runs on this host: its own folder is what both see.
        self.exchange: tuple[str, str] | None = (f"{work_dir}/exchange", f"{work_dir}/exchange")
        self.repo_path = repo_path
        self.name = work_dir.name
        self._bin_dir = bin_dir
        self._state_file = state_file
        self.provision_seconds = provision_seconds
        self.reader = os_reader()

    def _user_prefix(self) -> list[str]:
        return ["runuser", "-u", OS_USER, "--"] if os.geteuid() == 0 else []

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        environment = {
            "PATH": f"{self._bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": self.work_dir, "LANG": "C.UTF-8", **(env or {}),
        }
        started = time.monotonic()
        # Its own session, so a timeout or an interrupt can kill the command with everything it
        # started (pgBackRest's workers, psql); a server started by pg_ctl detaches itself and is
        # stopped by close() through its postmaster.pid.
        process = subprocess.Popen([*self._user_prefix(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=environment, cwd=self.work_dir, start_new_session=True)
        try:
            out, err = process.communicate(timeout=timeout)
            code = process.returncode
        except subprocess.TimeoutExpired:
            _kill_group(process)
            out, err = process.communicate()
            code = 124  # as `timeout` reports it, so callers treat both targets alike
        except BaseException:
            _kill_group(process)
            raise
        return ExecResult(argv, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                          time.monotonic() - started)

    def write_text(self, path: str, text: str) -> None:
        Path(path).write_text(text, encoding="utf-8")
        _give_to_os_user(Path(path))

    def read_text(self, path: str) -> str:
        return Path(path).read_text(encoding="utf-8", errors="replace")

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "folder": self.work_dir, "bin_dir": str(self._bin_dir)}

    def close(self) -> None:
        if not reap_local_folder(Path(self.work_dir)):
            raise TargetError(f"cleanup of {self.work_dir} incomplete; `restoreproof reap` will retry")
        self._state_file.unlink(missing_ok=True)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def os_reader() -> Reader:
    """Who the target's commands run as: the OS user when restoreproof runs as root, else itself."""
    entry = pwd.getpwnam(OS_USER) if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    return Reader(entry.pw_uid, frozenset(os.getgrouplist(entry.pw_name, entry.pw_gid)))


def _give_to_os_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(OS_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


class LocalTargetProvider:
    kind = "local"

    def __init__(self, bin_dir: Path, state_dir: Path, bin_dirs: dict[str, Path] | None = None,
                 refused: dict[str, str] | None = None) -> None:
        """`bin_dir` serves every database but those `bin_dirs` gives a folder of their own (the engine
        chose and checked them) and those `refused` says no folder here serves."""
        self.bin_dir = bin_dir
        self.state_dir = state_dir
        self.bin_dirs = dict(bin_dirs or {})
        self.refused = dict(refused or {})
        if not self.bin_dirs and not self.refused:
            missing = [tool for tool in ("pg_ctl", "postgres", "pg_checksums") if not (bin_dir / tool).exists()]
            if missing:
                raise TargetError(f"local target: {', '.join(missing)} not found in {bin_dir} "
                                  "(install postgresql-15 or set postgres.bin_dir)")
        if shutil.which("pgbackrest") is None:
            raise TargetError("local target: pgbackrest is not on PATH (install pgbackrest)")
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(OS_USER)
            except KeyError as exc:
                raise TargetError(f"local target: running as root needs an OS user {OS_USER!r}") from exc

    def provision(self, run_id: str, database: str, repo_host_path: str) -> LocalTarget:
        if database in self.refused:
            raise TargetError(self.refused[database])
        bin_dir = self.bin_dirs.get(database, self.bin_dir)
        started = time.monotonic()
        work_dir = Path(tempfile.mkdtemp(prefix=f"restoreproof-{run_id}-{slug(database)}-"))
        folder = leftovers_dir(self.state_dir)
        folder.mkdir(parents=True, exist_ok=True)
        state_file = folder / f"{work_dir.name}.json"
        write_text_atomically(state_file, json.dumps({"run_id": run_id, "database": database, "folder": str(work_dir),
                                                      "bin_dir": str(bin_dir), **this_process().record()}))
        _give_to_os_user(work_dir)
        target = LocalTarget(work_dir, repo_host_path, bin_dir, state_file, time.monotonic() - started)
        # The restore and the server's archive-get run as the OS user: it must be able to read the
        # repository, or pgBackRest reports a missing backup set, which would read as a bad backup.
        probe = target.run(["test", "-r", f"{repo_host_path}/backup", "-a", "-x", f"{repo_host_path}/backup"],
                           timeout=30)
        if not probe.ok:
            target.close()
            user = OS_USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
            raise TargetError(f"local target: the OS user {user!r} cannot read the repository {repo_host_path} "
                              "(every folder above it must be searchable, its files readable)")
        target.provision_seconds = time.monotonic() - started
        return target


def _postmaster_of(folder: Path) -> int | None:
    """The pid in folder's postmaster.pid, only if that process is a postgres running in that folder.

    A stale pid file (after a crash or a reboot) may name an unrelated process by now.
    """
    pid_file = folder / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except (OSError, ValueError, IndexError):
        return None
    # The postmaster changes into its data folder; its name is "postgres" (or "postmaster").
    return pid if comm in ("postgres", "postmaster") and cwd == folder.resolve() else None


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def reap_local_folder(folder: Path) -> bool:
    """Stop any server running from a data folder under `folder`, remove `folder`; True when it is gone."""
    for pid_file in folder.glob("*/postmaster.pid"):
        pid = _postmaster_of(pid_file.parent)
        if pid is None:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGQUIT)  # immediate shutdown: the data is thrown away anyway
            if not poll_until(partial(_gone, pid), 5.0, 0.05):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)
    return not folder.exists()


@dataclass(frozen=True)
class LocalRecord:
    """A leftover's state record: a local target's folder, an exchange folder, a staged copy."""

    state_file: Path
    run_id: str
    database: str | None
    folder: str
    # The process that made it; None in a record made before leases (it names a pid only).
    holder: Holder | None


# An unreadable record younger than this may be one being written (by a process that predates atomic
# records, or one whose disk filled): it is kept; older, it names nothing and is dropped.
YOUNG_RECORD_SECONDS = 60.0


def local_records(state_dir: Path, said: Callable[[str], None] | None = None) -> list[LocalRecord]:
    """Every leftover recorded in the state folder. An unreadable record is dropped (it names
    nothing), unless it is younger than YOUNG_RECORD_SECONDS: then it is kept, and `said` why."""
    found = []
    now = time.time()
    for state_file in sorted(leftovers_dir(state_dir).glob("*.json")):
        try:
            state = json.loads(state_file.read_text())
            found.append(LocalRecord(state_file, str(state["run_id"]), state.get("database"), str(state["folder"]),
                                     Holder.from_record(state)))
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            try:
                age = now - state_file.stat().st_mtime
            except OSError:
                continue  # gone meanwhile: removed by its owner
            if age < YOUNG_RECORD_SECONDS:
                if said is not None:
                    said(f"record {state_file} kept: unreadable ({type(exc).__name__}) but only {age:.0f} s old "
                         "(it may be being written)")
                continue
            state_file.unlink(missing_ok=True)
    # Temporary files of a write that died before its rename (write_text_atomically).
    for temporary in leftovers_dir(state_dir).glob(".*.tmp"):
        with contextlib.suppress(OSError):
            if now - temporary.stat().st_mtime >= YOUNG_RECORD_SECONDS:
                temporary.unlink()
    return found


def remove_local(record: LocalRecord) -> bool:
    """Remove a recorded leftover (its server stopped first) and its record; True when it is gone."""
    if reap_local_folder(Path(record.folder)):
        record.state_file.unlink(missing_ok=True)
        return True
    return False


def reap_local(state_dir: Path, run_id: str, database: str | None = None) -> list[str]:
    """Remove what the run (one database of it, when given) recorded, whoever made it."""
    return [record.folder for record in local_records(state_dir)
            if record.run_id == run_id and (database is None or record.database == database) and remove_local(record)]
