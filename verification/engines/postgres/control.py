"""The settings a restored cluster's recovery depends on, as the backup's pg_control records them.

pg_control keeps the values the cluster last ran with for the settings whose shared memory recovery
rebuilds: prepared transactions are re-created from pg_twophase and the WAL, each with its locks.
A backup taken where postgresql.conf lives outside the data folder (Debian's layout) brings none of
its settings, and PostgreSQL's defaults (no prepared transactions at all) make a healthy backup's
recovery stop with "maximum number of prepared transactions reached". So the restored server is
given at least what pg_control says, read from the restored data with pg_controldata.
"""

from __future__ import annotations

import re

# Printed before pg_controldata's output in the one configure command's stdout.
MARK = "#restoreproof: pg_controldata"

# pg_controldata's label -> the setting, and PostgreSQL's default (a value at or below it needs no floor).
FLOORED = {
    "max_prepared_xacts setting": ("max_prepared_transactions", 0),
    "max_locks_per_xact setting": ("max_locks_per_transaction", 64),
}
FLOOR_WHY = "at least what the backup's pg_control records: recovery re-creates its prepared transactions and locks"

_LINE = re.compile(r"^(?P<label>[^:\n]+):\s*(?P<value>\S.*?)\s*$", re.M)


def recorded(text: str) -> dict[str, str]:
    """pg_controldata's output as label -> value."""
    return {m["label"].strip(): m["value"] for m in _LINE.finditer(text)}


def floors(text: str) -> dict[str, str]:
    """The settings the restored server needs at least, by name, from pg_controldata's output: only
    those above PostgreSQL's default; an output without them asks for nothing (the server then says
    in its own words what it lacks)."""
    said = recorded(text)
    found = {}
    for label, (setting, default) in FLOORED.items():
        value = said.get(label, "")
        if value.isdigit() and int(value) > default:
            found[setting] = value
    return found
