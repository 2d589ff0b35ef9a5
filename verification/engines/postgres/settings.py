"""The restored server's settings: restoreproof's win over the backup's own.

A restored cluster starts with the configuration files it was backed up with (postgresql.conf,
postgresql.auto.conf, their include files) and with the settings its catalog keeps per database and
role (ALTER DATABASE / ALTER ROLE ... SET, in pg_db_role_setting). Some of those settings hide damage
(zero_damaged_pages zeroes a damaged page in memory, and redo then writes it back whole: the damage is
gone for every later check), blind the server log or the tools (message levels, language, log format),
or change where recovery stops and where WAL comes from. Each such setting is forced here:

- on the postmaster's command line (`pg_ctl -o "-c name=value"`): the command line outranks every
  configuration file, whatever includes or ALTER SYSTEM say;
- per database and role: the entries of pg_db_role_setting naming a forced setting outrank the command
  line in each session, so they are reset in the restored copy (a disposable copy: changing it is
  allowed) before any check connects;
- then read back from the server itself (pg_settings: value and source), and from pg_db_role_setting:
  a forced value not in effect is an error naming the setting.

Each setting the backup gave another value is reported, with the backup's value and where it came from
(pg_file_settings: file and line; pg_db_role_setting: which ALTER).

Deliberately not forced (PostgreSQL 15's guc_tables.c read through): settings that are the cluster's
meaning rather than a check's eyes (search_path, TimeZone, DateStyle, lc_* other than lc_messages,
standard_conforming_strings, transform_null_equals: the data checks are meant to see the data as its
applications do); resources (shared_buffers, max_connections: postgres.server_options is there when
they do not fit the target); shared_preload_libraries (extensions' data may need them, and the code
loaded is the target image's, chosen by the operator, never the backup's); planner switches (they
change plans, not results); autovacuum (it cannot rewrite a page whose checksum fails, and with
zero_damaged_pages forced off it never zeroes one). Settings kept per function (ALTER FUNCTION ... SET,
pg_proc.proconfig) are not looked at.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from verification.engines.postgres.control import FLOOR_WHY
from verification.model import OverriddenSetting


class Kind(StrEnum):
    """How PostgreSQL spells a setting's value in pg_settings (vartype)."""

    BOOL = "bool"
    ENUM = "enum"
    INTEGER = "integer"
    STRING = "string"


@dataclass(frozen=True)
class Rule:
    """A setting restoreproof forces, the value it forces, and why."""

    name: str
    value: str  # as pg_settings shows it (canonical)
    kind: Kind
    why: str
    # Settable per session (user, superuser or backend context): ALTER ROLE/DATABASE SET can set it too,
    # and restoreproof's own sessions give it as a client option.
    session: bool = False
    since: int = 12  # the first major version that has it (restoreproof restores 12 and later)
    until: int | None = None  # the last major version that has it

    def exists_in(self, major: int) -> bool:
        return self.since <= major and (self.until is None or major <= self.until)


HIDES_DAMAGE = "would hide damaged pages from redo and the checks"
LOG_READER = "restoreproof reads the server log in English, with this format"
TOOLS = "the tools' sessions must see every message and run to the end"
RECOVERY = "recovery follows the plan: pgBackRest's restore_command and targets only"
NO_WAL_OUT = "nothing archives WAL out of the target"

# Forced whatever the backup's files say, in this order on the command line.
SAFE_RULES: tuple[Rule, ...] = (
    Rule("zero_damaged_pages", "off", Kind.BOOL, HIDES_DAMAGE, session=True),
    Rule("ignore_checksum_failure", "off", Kind.BOOL, HIDES_DAMAGE, session=True),
    Rule("ignore_invalid_pages", "off", Kind.BOOL, HIDES_DAMAGE, since=13),
    Rule("ignore_system_indexes", "off", Kind.BOOL, "would keep damaged system indexes out of sight", session=True),
    Rule("log_min_messages", "warning", Kind.ENUM, LOG_READER, session=True),
    Rule("log_error_verbosity", "default", Kind.ENUM, LOG_READER, session=True),
    Rule("lc_messages", "C", Kind.STRING, LOG_READER, session=True),
    Rule("log_destination", "stderr", Kind.STRING, LOG_READER),
    Rule("logging_collector", "off", Kind.BOOL, LOG_READER),
    Rule("log_line_prefix", "%m [%p] ", Kind.STRING, LOG_READER),
    Rule("log_timezone", "UTC", Kind.STRING, LOG_READER),
    Rule("client_min_messages", "notice", Kind.ENUM, TOOLS, session=True),
    Rule("exit_on_error", "off", Kind.BOOL, TOOLS, session=True),
    Rule("default_transaction_read_only", "off", Kind.BOOL,
         "pg_amcheck installs amcheck, and restoreproof prepares the copy", session=True),
    Rule("statement_timeout", "0", Kind.INTEGER, TOOLS, session=True),
    Rule("lock_timeout", "0", Kind.INTEGER, TOOLS, session=True),
    Rule("idle_in_transaction_session_timeout", "0", Kind.INTEGER, TOOLS, session=True),
    Rule("idle_session_timeout", "0", Kind.INTEGER, TOOLS, session=True, since=14),
    Rule("transaction_timeout", "0", Kind.INTEGER, TOOLS, session=True, since=17),
    Rule("session_preload_libraries", "", Kind.STRING, "no library is loaded into the tools' sessions",
         session=True),
    Rule("local_preload_libraries", "", Kind.STRING, "no library is loaded into the tools' sessions",
         session=True),
    Rule("synchronous_standby_names", "", Kind.STRING,
         "a write in the target (amcheck's install) would wait for a standby that never comes"),
    Rule("hot_standby", "off", Kind.BOOL, "connections only once recovery has ended"),
    Rule("ssl", "off", Kind.BOOL, "the target listens on a private socket only"),
    Rule("listen_addresses", "", Kind.STRING, "the target listens on a private socket only"),
)

# Recovery and archiving: the plan's values (what pgBackRest restore wrote for it) or these.
RECOVERY_RULES: tuple[Rule, ...] = (
    Rule("restore_command", "", Kind.STRING, RECOVERY),
    Rule("recovery_target", "", Kind.STRING, RECOVERY),
    Rule("recovery_target_lsn", "", Kind.STRING, RECOVERY),
    Rule("recovery_target_name", "", Kind.STRING, RECOVERY),
    Rule("recovery_target_time", "", Kind.STRING, RECOVERY),
    Rule("recovery_target_xid", "", Kind.STRING, RECOVERY),
    Rule("recovery_target_inclusive", "on", Kind.BOOL, RECOVERY),
    Rule("recovery_target_timeline", "latest", Kind.STRING, RECOVERY),
    Rule("recovery_target_action", "pause", Kind.ENUM, RECOVERY),
    Rule("recovery_min_apply_delay", "0", Kind.INTEGER, RECOVERY),
    Rule("primary_conninfo", "", Kind.STRING, RECOVERY),
    Rule("primary_slot_name", "", Kind.STRING, RECOVERY),
    Rule("promote_trigger_file", "", Kind.STRING, RECOVERY, until=15),
    Rule("archive_cleanup_command", "", Kind.STRING, RECOVERY),
    Rule("recovery_end_command", "", Kind.STRING, RECOVERY),
    Rule("archive_mode", "off", Kind.ENUM, NO_WAL_OUT),
    Rule("archive_command", "", Kind.STRING, NO_WAL_OUT),
    Rule("archive_library", "", Kind.STRING, NO_WAL_OUT, since=15),
)

# The recovery targets, of which PostgreSQL takes at most one.
TARGETS = ("recovery_target", "recovery_target_lsn", "recovery_target_name", "recovery_target_time",
           "recovery_target_xid")

# Reset wherever pg_db_role_setting names them, never given on the command line: `role` set per role or
# database makes restoreproof's sessions (the checks') act as another, possibly unprivileged, role.
SESSION_ONLY = {"role": "restoreproof's sessions act as the superuser, not another role"}

# Set by restoreproof for the target's plumbing (paths in the target, the socket).
PLUMBING_WHY = "the target's own files and socket"

# Values never copied into a report: a connection string may hold a password.
SECRET_NAMES = frozenset({"primary_conninfo"})
NOT_SHOWN = "(set, not shown)"
# In a command (restore_command, archive_command...), what follows a word naming a secret.
_SECRET_IN_COMMAND = re.compile(r"(?i)([\w-]*(?:pass|secret|token|key)[\w-]*\s*[=:]\s*)('[^']*'|\"[^\"]*\"|\S+)")
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")

PGBACKREST_HEADER = "# Recovery settings generated by pgBackRest restore on "
_AUTO_CONF_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*'(.*)'\s*$")

# What pg_settings shows for a value, by setting: archive_command reads "(disabled)" while archive_mode is off.
SHOWN_AS = {("archive_command", "(disabled)"): ""}
# pg_settings sources that come from the command line (or PostgreSQL itself, data_directory).
FORCED_SOURCES = frozenset({"command line", "override"})

# Equivalent spellings that change nothing restoreproof reads: messages are untranslated in these
# locales, and these zones print "UTC" in the log prefix.
_ENGLISH_MESSAGES = re.compile(r"(?i)^(c|posix|c\..*|en|en_.*)$")
_UTC_ZONES = frozenset({"utc", "etc/utc"})
_BOOL_WORDS = {"on": "on", "off": "off", "true": "on", "false": "off", "yes": "on", "no": "off",
               "1": "on", "0": "off"}
_ZERO = re.compile(r"^[+-]?0+(\.0*)?\s*[a-z]*$")


class SettingsError(Exception):
    """Restoreproof's settings cannot be made to win (a message naming the setting and the fix)."""


@dataclass(frozen=True)
class Forced:
    """What the restored server is started with: each setting's value and why, by name."""

    values: dict[str, str]
    why: dict[str, str]
    kinds: dict[str, Kind]
    session: tuple[str, ...]  # the names restoreproof's own sessions give as client options

    def command_line(self, extra: Mapping[str, str] | None = None) -> str:
        """`pg_ctl -o`: the forced settings, then `extra` (postgres.server_options, none of them forced).
        pg_ctl hands it to a shell, so each `-c name=value` is quoted for one."""
        values = {**self.values, **(extra or {})}
        return " ".join(f"-c {shlex.quote(f'{name}={value}')}" for name, value in values.items())

    def client_options(self) -> str:
        """PGOPTIONS for restoreproof's own sessions: outranks whatever pg_db_role_setting holds, so
        those sessions can read and reset it. Backslash-escaped as libpq's options are split."""
        return " ".join(f"-c {name}={_escape_option(self.values[name])}" for name in self.session)

    def names(self) -> list[str]:
        return list(self.values)


def _escape_option(value: str) -> str:
    return re.sub(r"([\s\\])", r"\\\1", value)


def pgbackrest_recovery(auto_conf: str) -> dict[str, str]:
    """The recovery settings pgBackRest restore wrote for the plan: the block after its last header in
    postgresql.auto.conf (it writes `name = 'value'`, unescaped, one per line)."""
    lines = auto_conf.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(PGBACKREST_HEADER)]
    if not starts:
        raise SettingsError("pgbackrest restore wrote no recovery settings into postgresql.auto.conf (its "
                            f"{PGBACKREST_HEADER.strip()!r} block is missing): recovery cannot be held to the plan")
    written: dict[str, str] = {}
    for line in lines[starts[-1] + 1:]:
        if match := _AUTO_CONF_LINE.match(line):
            written[match.group(1).lower()] = match.group(2)
    if not written.get("restore_command"):
        raise SettingsError("pgbackrest restore wrote no restore_command into postgresql.auto.conf: WAL could "
                            "not be fetched from the planned repository")
    return written



# What pgBackRest writes for a point in time and not for latest (its type default): the target and what
# to do on reaching it.
POINT_ONLY = (*TARGETS, "recovery_target_action", "recovery_target_inclusive")
POINT_REMOVED = "# removed by restoreproof: recovery goes on to the archive's end"


def latest_recovery(auto_conf: str) -> str:
    """postgresql.auto.conf as pgBackRest writes it for a restore to latest: its block (after its last
    header) without the point's settings, each commented out as pgBackRest comments out what it removes.
    The restore command and the timeline stay as it wrote them."""
    lines = auto_conf.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(PGBACKREST_HEADER)]
    if not starts:
        raise SettingsError(f"postgresql.auto.conf has no {PGBACKREST_HEADER.strip()!r} block: the recovery "
                            "pgBackRest wrote cannot be changed to go on to the archive's end")
    for i in range(starts[-1] + 1, len(lines)):
        if (match := _AUTO_CONF_LINE.match(lines[i])) and match.group(1).lower() in POINT_ONLY:
            lines[i] = f"# {lines[i]} {POINT_REMOVED}"
    return "\n".join(lines) + "\n"

def forced_settings(major: int, plumbing: Mapping[str, str], recovery: Mapping[str, str],
                    floors: Mapping[str, str] | None = None) -> Forced:
    """Every setting the restored server of this major version is started with: the target's plumbing,
    the values recovery needs at least (`floors`, from the backup's pg_control), the safe values, and
    recovery as pgBackRest wrote it for the plan (the rest of recovery and archiving left at values
    that fetch and send nothing)."""
    values: dict[str, str] = {}
    why: dict[str, str] = {}
    kinds: dict[str, Kind] = {}
    for name, value in plumbing.items():
        values[name], why[name], kinds[name] = value, PLUMBING_WHY, Kind.STRING
    for name, value in (floors or {}).items():
        values[name], why[name], kinds[name] = value, FLOOR_WHY, Kind.INTEGER
    for rule in SAFE_RULES + RECOVERY_RULES:
        if not rule.exists_in(major):
            continue
        value = recovery.get(rule.name, rule.value) if rule in RECOVERY_RULES else rule.value
        values[rule.name], why[rule.name], kinds[rule.name] = value, rule.why, rule.kind
    # PostgreSQL refuses a recovery target emptied after another was set ("multiple recovery targets
    # specified", its assign hooks see them in command-line order): the one target set goes last.
    for name in [name for name in TARGETS if values.get(name)]:
        values[name] = values.pop(name)
    session = tuple(rule.name for rule in SAFE_RULES if rule.session and rule.exists_in(major))
    return Forced(values, why, kinds, session)


def server_option_conflicts(options: Mapping[str, str], forced: Forced) -> list[str]:
    """postgres.server_options naming a forced setting: each an error naming it (the configuration
    cannot weaken what restoreproof forces either)."""
    conflicts = []
    for name, value in options.items():
        key = name.lower()
        if key in forced.values:
            conflicts.append(f"postgres.server_options sets {name} = {value!r}, which restoreproof forces to "
                             f"{forced.values[key]!r} ({forced.why[key]}): remove it from postgres.server_options")
        elif key in SESSION_ONLY:
            conflicts.append(f"postgres.server_options sets {name} = {value!r}, which restoreproof leaves unset "
                             f"({SESSION_ONLY[key]}): remove it from postgres.server_options")
    return conflicts


def canonical(kind: Kind, value: str) -> str:
    """A value as pg_settings would show it, as far as the comparison needs: booleans in one
    spelling, enums in lower case, a zero in any unit as 0."""
    text = value.strip()
    if kind is Kind.BOOL:
        return _BOOL_WORDS.get(text.lower(), text.lower())
    if kind is Kind.ENUM:
        return text.lower()
    if kind is Kind.INTEGER:
        return "0" if _ZERO.match(text.lower()) else text.lower()
    return value


def same_effect(name: str, kind: Kind, backup: str, forced: str) -> bool:
    """Whether the backup's value does what the forced one does (then nothing was overridden)."""
    if name == "lc_messages":
        return bool(_ENGLISH_MESSAGES.match(backup.strip())) and bool(_ENGLISH_MESSAGES.match(forced))
    if name == "log_timezone":
        return backup.strip().lower() in _UTC_ZONES and forced.lower() in _UTC_ZONES
    return canonical(kind, backup) == canonical(kind, forced)


def shown(name: str, value: str) -> str:
    """A backup's value as the report may show it: never a connection string, no secret of a command."""
    if name in SECRET_NAMES:
        return NOT_SHOWN if value else ""
    return scrubbed(value)


# -- what the server says ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileSetting:
    file: str
    line: int
    seqno: int
    name: str
    setting: str


@dataclass(frozen=True)
class RoleSetting:
    """One entry of pg_db_role_setting: database and role None where the entry is for all."""

    database: str | None
    role: str | None
    name: str
    setting: str

    def _target(self) -> str:
        """Whom the entry is for, as ALTER spells it."""
        if self.role is not None:
            where = f" IN DATABASE {quote_ident(self.database)}" if self.database is not None else ""
            return f"ROLE {quote_ident(self.role)}{where}"
        if self.database is not None:
            return f"DATABASE {quote_ident(self.database)}"
        return "ROLE ALL"

    def source(self) -> str:
        return f"ALTER {self._target()} SET (pg_db_role_setting)"

    def reset(self) -> str:
        return f"ALTER {self._target()} RESET {quote_ident(self.name)}"


@dataclass(frozen=True)
class ServerSetting:
    name: str
    setting: str
    source: str


@dataclass(frozen=True)
class ServerState:
    files: tuple[FileSetting, ...] = ()
    roles: tuple[RoleSetting, ...] = ()
    settings: tuple[ServerSetting, ...] = ()


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _roles_sql() -> str:
    return ("(select coalesce(json_agg(json_build_object('database_oid', s.setdatabase, 'role_oid', s.setrole, "
            "'database', d.datname, 'role', r.rolname, 'setting', c.setting) order by s.setdatabase, s.setrole, c.n), "
            "'[]') from pg_catalog.pg_db_role_setting s cross join lateral unnest(s.setconfig) with ordinality "
            "as c(setting, n) left join pg_catalog.pg_database d on d.oid = s.setdatabase "
            "left join pg_catalog.pg_authid r on r.oid = s.setrole)")


# What the backup's files and catalog set: read in a session of restoreproof's own (client options).
BACKUP_STATE_SQL = (
    "select json_build_object('files', (select coalesce(json_agg(json_build_object('file', sourcefile, 'line', "
    "sourceline, 'seqno', seqno, 'name', name, 'setting', setting) order by seqno), '[]') from "
    "pg_catalog.pg_file_settings where name is not null), 'roles', " + _roles_sql() + ")")


def in_effect_sql(names: Iterable[str]) -> str:
    """What a plain session (as the checks' are) sees of the forced settings, and what pg_db_role_setting
    still holds."""
    listed = ", ".join("'" + name.replace("'", "''") + "'" for name in names)
    return ("select json_build_object('settings', (select coalesce(json_agg(json_build_object('name', name, "
            "'setting', setting, 'source', source) order by name), '[]') from pg_catalog.pg_settings where name in ("
            + listed + ")), 'roles', " + _roles_sql() + ")")


def parse_state(text: str) -> ServerState:
    """psql's one line of JSON (either query above) as a ServerState; ValueError when it is not one."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError("no output")
    data: Any = json.loads(lines[-1])
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object: {lines[-1][:200]!r}")
    files = tuple(FileSetting(str(f["file"]), int(f["line"]), int(f["seqno"]), str(f["name"]).lower(),
                              str(f["setting"] or "")) for f in data.get("files", ()))
    roles: list[RoleSetting] = []
    for entry in data.get("roles", ()):
        name, _, value = str(entry["setting"]).partition("=")
        database_oid, role_oid = int(entry["database_oid"]), int(entry["role_oid"])
        if (database_oid and entry["database"] is None) or (role_oid and entry["role"] is None):
            continue  # the entry of a database or role no longer there: no session ever gets it
        # An entry for all databases or all roles has oid 0, and no name from the joins.
        roles.append(RoleSetting(entry["database"], entry["role"], name.lower(), value))
    settings = tuple(ServerSetting(str(s["name"]).lower(), str(s["setting"] or ""), str(s["source"]))
                     for s in data.get("settings", ()))
    return ServerState(files, tuple(roles), settings)


def _relative(path: str, data: str) -> str:
    prefix = data.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def overridden(state: ServerState, forced: Forced, data: str) -> list[OverriddenSetting]:
    """Each forced setting the backup gave another value: the value its files would have set (the last
    line naming it), then each pg_db_role_setting entry naming it."""
    found: list[OverriddenSetting] = []
    last: dict[str, FileSetting] = {}
    for line in sorted(state.files, key=lambda f: f.seqno):
        last[line.name] = line
    for name, value in forced.values.items():
        entry = last.get(name)
        if entry is not None and not same_effect(name, forced.kinds[name], entry.setting, value):
            found.append(OverriddenSetting(name, shown(name, entry.setting), value,
                                           f"{_relative(entry.file, data)}:{entry.line}", forced.why[name]))
    for role in state.roles:
        if role.name in forced.values:
            if not same_effect(role.name, forced.kinds[role.name], role.setting, forced.values[role.name]):
                found.append(OverriddenSetting(role.name, shown(role.name, role.setting), forced.values[role.name],
                                               role.source(), forced.why[role.name]))
        elif role.name in SESSION_ONLY:
            found.append(OverriddenSetting(role.name, role.setting, "(reset)", role.source(), SESSION_ONLY[role.name]))
    return found


def role_resets(state: ServerState, forced: Forced) -> list[str]:
    """The statements that take every forced setting out of pg_db_role_setting (its sessions would
    otherwise outrank the command line)."""
    return [role.reset() for role in state.roles if role.name in forced.values or role.name in SESSION_ONLY]


def not_in_effect(state: ServerState, forced: Forced) -> list[str]:
    """Each forced setting a plain session does not see as forced: an error naming it."""
    errors: list[str] = []
    seen = {s.name: s for s in state.settings}
    for name, value in forced.values.items():
        setting = seen.get(name)
        if setting is None:
            errors.append(f"the restored server does not show the setting {name} that restoreproof forces")
        # pg_settings shows values canonical already; the forced one may be spelled as pgBackRest wrote it.
        elif (setting.source not in FORCED_SOURCES
              or SHOWN_AS.get((name, setting.setting), setting.setting) != canonical(forced.kinds[name], value)):
            errors.append(f"the setting {name} is {setting.setting!r} (from {setting.source}) in the restored server, "
                          f"not {value!r} as restoreproof forced it ({forced.why[name]})")
    for role in state.roles:
        if role.name in forced.values or role.name in SESSION_ONLY:
            errors.append(f"the setting {role.name} is still set by {role.source()} in the restored server "
                          f"after restoreproof reset it")
    return errors


# -- after the start: reset what outranks the command line, then read back -------------------------------


# Runs one SQL text in the restored server (psql) with `env` added to its environment: whether it
# succeeded, and what it printed.
Query = Callable[[str, dict[str, str]], tuple[bool, str]]


@dataclass
class Settled:
    """What enforcing the forced settings in the started server found."""

    overridden: list[OverriddenSetting]
    errors: list[str]
    # The server's own words (the queries' outputs), kept as evidence.
    said: str


def scrubbed(text: str) -> str:
    """A value or output that may quote a secret (a password, a key), with it masked."""
    return _SECRET_IN_COMMAND.sub(r"\1(not shown)", _URL_PASSWORD.sub(r"\1(not shown)@", text))


def rendered(state: ServerState, data: str) -> str:
    """A state as evidence, one setting a line, values as the report may show them."""
    lines = [f"{_relative(f.file, data)}:{f.line}: {f.name} = {shown(f.name, f.setting)!r}" for f in state.files]
    lines += [f"{r.source()}: {r.name} = {shown(r.name, r.setting)!r}" for r in state.roles]
    lines += [f"{s.name} = {shown(s.name, s.setting)!r} (source: {s.source})" for s in state.settings]
    return "\n".join(lines) or "(none)"


def settle(query: Query, forced: Forced, data: str) -> Settled:
    """In the started server: read what the backup's files and catalog set (in a session of restoreproof's
    own, whose client options outrank the catalog's), reset the catalog's forced entries, then check in a
    plain session, as the checks' are, that every forced value is in effect."""
    own = {"PGOPTIONS": forced.client_options()}
    evidence: list[str] = []

    def read(sql: str, env: dict[str, str], what: str) -> ServerState | str:
        ok, said = query(sql, env)
        if not ok:
            evidence.append(f"-- {what}: failed\n{scrubbed(said.strip())}")
            return f"cannot read the restored server's {what}: {scrubbed(said.strip())[-300:]}"
        try:
            state = parse_state(said)
        except (ValueError, KeyError, TypeError) as exc:
            evidence.append(f"-- {what}: unrecognised\n{scrubbed(said.strip())}")
            return f"cannot read the restored server's {what} (unrecognised output: {exc})"
        evidence.append(f"-- {what}\n{rendered(state, data)}")
        return state

    def done(found: list[OverriddenSetting], errors: list[str]) -> Settled:
        return Settled(found, errors, "\n\n".join(evidence) + "\n")

    backup = read(BACKUP_STATE_SQL, own, "settings from its files and catalog (pg_file_settings, pg_db_role_setting)")
    if isinstance(backup, str):
        return done([], [backup])
    found = overridden(backup, forced, data)
    if resets := role_resets(backup, forced):
        ok, said = query("; ".join(resets), own)
        evidence.append(f"-- {'; '.join(resets)}: {'done' if ok else 'failed'}\n{scrubbed(said.strip())}")
        if not ok:
            return done(found, [f"cannot reset the restored server's per-database and per-role settings "
                                f"({'; '.join(resets)}): {scrubbed(said.strip())[-300:]}"])
    effect = read(in_effect_sql(forced.names()), {}, "settings in effect (pg_settings, pg_db_role_setting)")
    if isinstance(effect, str):
        return done(found, [effect])
    return done(found, not_in_effect(effect, forced))
