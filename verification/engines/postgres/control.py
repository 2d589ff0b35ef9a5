"""The settings a restored cluster's recovery depends on, as the backup's pg_control records them.

pg_control keeps the values the cluster last ran with for the settings whose shared memory recovery
rebuilds: prepared transactions are re-created from pg_twophase and the WAL, each with its locks.
A backup taken where postgresql.conf lives outside the data folder (Debian's layout) brings none of
its settings, and PostgreSQL's defaults (no prepared transactions at all) make a healthy backup's
recovery stop with "maximum number of prepared transactions reached". So the restored server is
given at least what pg_control says, read from the restored data with pg_controldata; never less
than what the restored configuration files give (`postgres -C`), nor than postgres.server_options asks.
"""

from __future__ import annotations

import re

# Printed before pg_controldata's output in the one configure command's stdout, and before the
# values the restored configuration files give (`name=value` lines).
MARK = "#restoreproof: pg_controldata"
FILES_MARK = "#restoreproof: configured"

# pg_controldata's label -> the setting, and PostgreSQL's default (a value at or below it needs no floor).
FLOORED = {
    "max_prepared_xacts setting": ("max_prepared_transactions", 0),
    "max_locks_per_xact setting": ("max_locks_per_transaction", 64),
}
FLOORED_SETTINGS = tuple(setting for setting, _ in FLOORED.values())
FLOOR_WHY = "at least what the backup's pg_control records: recovery re-creates its prepared transactions and locks"

_LINE = re.compile(r"^(?P<label>[^:\n]+):\s*(?P<value>\S.*?)\s*$", re.M)


def recorded(text: str) -> dict[str, str]:
    """pg_controldata's output as label -> value."""
    return {m["label"].strip(): m["value"] for m in _LINE.finditer(text)}


def floors(text: str, configured: dict[str, str] | None = None) -> dict[str, str]:
    """The settings the restored server must be given, by name: pg_control's value where it is above
    PostgreSQL's default and above what the restored configuration files give (`configured`, as
    `postgres -C` prints it; a value the files give that is as high is left to them). An output without
    the settings asks for nothing (the server then says in its own words what it lacks)."""
    said = recorded(text)
    found = {}
    for label, (setting, default) in FLOORED.items():
        value = said.get(label, "")
        given = (configured or {}).get(setting, "")
        if value.isdigit() and int(value) > max(default, int(given) if given.isdigit() else default):
            found[setting] = value
    return found


def configured_values(text: str) -> dict[str, str]:
    """`name=value` lines (what `postgres -C name` printed for each floored setting), by name; a setting
    the files could not be read for has no value."""
    values = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and value.strip():
            values[name.strip()] = value.strip()
    return values


def with_options(found: dict[str, str], options: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The floors postgres.server_options leaves to enforce, and a conflict for each option below its
    floor (recovery would stop for want of it); an option at or above it is the server's value."""
    asked = {name.lower(): value for name, value in options.items()}
    kept: dict[str, str] = {}
    conflicts = []
    for name, value in found.items():
        if name not in asked:
            kept[name] = value
        elif not asked[name].strip().isdigit() or int(asked[name]) < int(value):
            conflicts.append(f"postgres.server_options sets {name} = {asked[name]!r}, below the {value} the "
                             "backup's pg_control records (recovery re-creates its prepared transactions and "
                             f"locks): remove it or give at least {value}")
    return kept, conflicts
