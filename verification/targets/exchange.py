"""A folder that restoreproof's own process and a container both see, and nothing else.

The restored server puts its Unix socket there, so the data checks reach it from this process
while the container keeps no network at all (no port is published, no route leads out). The
folder both see is world-writable (the server runs as its own user in the container, whose id
this host does not know) inside a private parent (0700), so no other user of this host can reach
the socket. It is recorded among the leftovers like a local target's folder, so `restoreproof reap`
removes it when a killed run could not.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from verification.atomic import write_text_atomically
from verification.errors import TargetError
from verification.targets.lease import this_process
from verification.targets.local import leftovers_dir

# Where the container sees it.
EXCHANGE_PATH = "/run/restoreproof"
# A Unix socket's path must fit sun_path (108 bytes with its NUL); the server adds "/.s.PGSQL.NNNNN".
MAX_FOLDER_PATH = 80


@dataclass
class ExchangeFolder:
    root: Path    # private to this user (0700)
    shared: Path  # root/x, mounted into the container at EXCHANGE_PATH
    state_file: Path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if not self.root.exists():
            self.state_file.unlink(missing_ok=True)
        else:
            raise TargetError(f"cannot remove the exchange folder {self.root}")


def make_exchange(state_dir: Path, run_id: str, database: str) -> ExchangeFolder:
    root = Path(tempfile.mkdtemp(prefix="rp-x-"))  # short: the socket's path must stay short
    shared = root / "x"
    folder = leftovers_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    state_file = folder / f"{root.name}.json"
    write_text_atomically(state_file, json.dumps({"run_id": run_id, "database": database, "folder": str(root),
                                                  **this_process().record(), "kind": "exchange"}))
    exchange = ExchangeFolder(root, shared, state_file)
    if len(str(shared)) > MAX_FOLDER_PATH:
        exchange.remove()
        raise TargetError(f"the temporary folder {root} is too long a path for a Unix socket (at most "
                          f"{MAX_FOLDER_PATH} characters): set TMPDIR to a shorter folder")
    shared.mkdir()
    os.chmod(root, 0o700)
    os.chmod(shared, 0o777)  # inside a 0700 parent: only this user and the container reach it
    return exchange
