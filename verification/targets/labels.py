"""Labels on everything restoreproof starts, so `restoreproof reap` can find leftovers and tell whose
they are: the run, the role, the database, and the process that started it (its lease's holder)."""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import UTC, datetime

from verification.targets.lease import this_process

RUN_LABEL = "restoreproof.run"
ROLE_LABEL = "restoreproof.role"
DATABASE_LABEL = "restoreproof.database"


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def slug(text: str, limit: int = 40) -> str:
    """A Docker- and file-name-safe form of a database name, distinct for distinct names.

    Names that had to be changed or shortened get a short hash of the original, so two
    databases never share a container name or an evidence folder.
    """
    cleaned = re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.") or "db"
    if cleaned == text and len(cleaned) <= limit:
        return cleaned
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{cleaned[:limit - 9]}-{digest}"


def labels(run_id: str, role: str, database: str | None = None) -> dict[str, str]:
    """The run's labels and this process's (the holder the reaper asks after before removing it)."""
    result = {RUN_LABEL: run_id, ROLE_LABEL: role, **this_process().labels()}
    if database is not None:
        result[DATABASE_LABEL] = database
    return result
