"""Where the configuration comes from: which YAML file, and which RESTOREPROOF_* variables are settings.

The file, the first of: ``--config FILE`` (or a DAG run's ``config``), ``RESTOREPROOF_CONFIG``, the user
file ``$XDG_CONFIG_HOME/restoreproof/config.yaml`` (default ``~/.config/...``), the system file
``/etc/restoreproof/config.yaml`` (``RESTOREPROOF_SYSTEM_CONFIG`` names another). A file named explicitly
must exist; the user and system files are used when they do; none at all is the defaults and the
environment.

A ``RESTOREPROOF_*`` variable that is no setting is warned about with the nearest known name, not
refused as an unknown YAML key is: the environment is shared with other tools (compose files, CI, shells
that export a deployment's variables), so a name this restoreproof does not know may be another's.
Under a section (``RESTOREPROOF_POSTGRES__...``) the settings' own validation still refuses it.
"""

from __future__ import annotations

import difflib
import logging
import os
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

PREFIX = "RESTOREPROOF_"
DELIMITER = "__"
CONFIG_ENV = "RESTOREPROOF_CONFIG"
SYSTEM_CONFIG_ENV = "RESTOREPROOF_SYSTEM_CONFIG"
SYSTEM_CONFIG = Path("/etc/restoreproof/config.yaml")
# Test-only variables (golden files, sample folders, version matrices) belong under this prefix.
RESERVED_TEST_PREFIX = "RESTOREPROOF_TEST_"
USER_FILE, SYSTEM_FILE = "the user file", "the system file"

# Variables restoreproof and its deployment read that are not settings, and who reads each: never warned.
NOT_SETTINGS: dict[str, str] = {
    CONFIG_ENV: "the configuration file",
    SYSTEM_CONFIG_ENV: "the system configuration file",
    "RESTOREPROOF_SECRETS_DIR": "a folder of one file per secret setting",
    "RESTOREPROOF_SCHEDULE": "dags/restore_verification.py: the cron schedule",
    "RESTOREPROOF_SOURCE": "dags/restore_verification.py: the default source",
    "RESTOREPROOF_POOL": "dags/restore_verification.py: the Airflow pool of targets",
    "RESTOREPROOF_WORKER_HOSTNAME": "plugins/restoreproof_airflow/hostname.py: the worker's name",
    "RESTOREPROOF_WEBHOOK_URL": "plugins/restoreproof_airflow/notifier.py: the failure webhook",
    # docker/compose.yaml's own, exported in the shell that runs compose (and restoreproof).
    "RESTOREPROOF_BACKUPS": "docker/compose.yaml", "RESTOREPROOF_EXECUTOR": "docker/compose.yaml",
    "RESTOREPROOF_BROKER_PASSWORD": "docker/compose.yaml", "RESTOREPROOF_CELERY_WORKERS": "docker/compose.yaml",
    "RESTOREPROOF_STATE_ROOT": "docker/compose.yaml", "RESTOREPROOF_API_PORT": "docker/compose.yaml",
    "RESTOREPROOF_S3_PORT": "docker/compose.yaml", "RESTOREPROOF_POOL_SLOTS": "docker/compose.yaml",
    "RESTOREPROOF_WORKER_CONCURRENCY": "docker/compose.yaml",
    # Set by restoreproof in the environment of the commands it runs in a target.
    "RESTOREPROOF_AMCHECK_SQL": "a target's command", "RESTOREPROOF_SQL": "a target's command",
    "RESTOREPROOF_SEP": "a target's command", "RESTOREPROOF_TEXT": "a target's command",
    # The tests' own, older than the reserved prefix.
    "RESTOREPROOF_GOLDEN": "tests: rewrite golden files", "RESTOREPROOF_MSSQL_SAMPLES": "tests: SQL Server samples",
}

log = logging.getLogger(__name__)
_warned: set[str] = set()


@dataclass(frozen=True)
class ConfigLocation:
    path: Path | None
    found_by: str  # "--config", RESTOREPROOF_CONFIG, "the user file", "the system file", or "none"

    def describe(self) -> str:
        return f"{self.path} ({self.found_by})" if self.path else "none (the defaults and the environment)"

    @property
    def unnamed(self) -> bool:
        """A file found by looking (the user's, the system's), which the command line did not name."""
        return self.path is not None and self.found_by in (USER_FILE, SYSTEM_FILE)


def user_config_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "restoreproof" / "config.yaml"


def system_config_file() -> Path:
    return Path(os.environ.get(SYSTEM_CONFIG_ENV) or SYSTEM_CONFIG)


def locate_config(given: Path | None, given_by: str = "--config") -> ConfigLocation:
    """The file to read: the one given, else the environment's, else the user's or the system's if it
    exists. A named one is returned whether it exists or not: reading it says it is missing."""
    if given is not None:
        return ConfigLocation(Path(given), given_by)
    if named := os.environ.get(CONFIG_ENV):
        return ConfigLocation(Path(named), CONFIG_ENV)
    for path, found_by in ((user_config_file(), USER_FILE), (system_config_file(), SYSTEM_FILE)):
        try:
            if path.is_file():
                return ConfigLocation(path, found_by)
        except PermissionError:
            # It may be there, meant for this service: reading it names it, rather than running unconfigured.
            return ConfigLocation(path, found_by)
    return ConfigLocation(None, "none")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _paths(annotation: Any, stem: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """Every variable path a value of this type takes: itself (a model or a dict as JSON), a model's
    fields, a dict's entries ("*": any key) and what is inside them."""
    yield stem
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            if arg is not type(None):
                yield from (p for p in _paths(arg, stem) if p != stem)
    elif model := _model_of(annotation):
        for name, field in model.model_fields.items():
            yield from _paths(field.annotation, (*stem, name))
    elif get_origin(annotation) is dict:
        yield from _paths(get_args(annotation)[1], (*stem, "*"))


def setting_paths(model: type[BaseModel]) -> list[tuple[str, ...]]:
    """The variable paths of the settings (lower case, as pydantic-settings matches them)."""
    return sorted(set(p for p in _paths(model, ()) if p))


def _segments(name: str) -> tuple[str, ...]:
    return tuple(name[len(PREFIX):].lower().split(DELIMITER))


def _matches(segments: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(segments) == len(path) and all(p in ("*", s) for s, p in zip(segments, path, strict=True))


def is_setting(name: str, paths: list[tuple[str, ...]]) -> bool:
    segments = _segments(name)
    return any(_matches(segments, path) for path in paths)


def is_reserved(name: str) -> bool:
    upper = name.upper()
    return upper in NOT_SETTINGS or upper.startswith(RESERVED_TEST_PREFIX)


def nearest(name: str, paths: list[tuple[str, ...]]) -> str | None:
    """The known name closest to a misspelt one (a dict's key taken from the name itself), or None."""
    segments = _segments(name)
    spelled: dict[str, str] = {}
    for path in paths:
        filled = [segments[i] if part == "*" and i < len(segments) else ("<name>" if part == "*" else part)
                  for i, part in enumerate(path)]
        spelled[DELIMITER.join(filled)] = PREFIX + DELIMITER.join(filled).upper()
    for known in NOT_SETTINGS:
        spelled[known[len(PREFIX):].lower()] = known
    # Compared without the prefix every name shares, which would make any two names look alike.
    found = difflib.get_close_matches(DELIMITER.join(segments), list(spelled), n=1, cutoff=0.6)
    return spelled[found[0]] if found else None


def ours(environ: Mapping[str, str]) -> list[str]:
    """The environment's RESTOREPROOF_* variables (any case, as pydantic-settings reads them)."""
    return sorted(name for name in environ if name.upper().startswith(PREFIX))


def applied_variables(model: type[BaseModel], environ: Mapping[str, str]) -> list[str]:
    """The variables that set a setting (names only: values may be secrets)."""
    paths = setting_paths(model)
    return [name for name in ours(environ) if is_setting(name, paths)]


def unknown_variables(model: type[BaseModel], environ: Mapping[str, str]) -> list[str]:
    """One line per RESTOREPROOF_* variable that is neither a setting nor reserved, naming the nearest."""
    paths = setting_paths(model)
    lines = []
    for name in ours(environ):
        if is_setting(name, paths) or is_reserved(name):
            continue
        near = nearest(name, paths)
        hint = f"did you mean {near}?" if near else "no setting has a similar name"
        lines.append(f"{name} is not a restoreproof setting: {hint}")
    return lines


def warn_unknown_variables(model: type[BaseModel], environ: Mapping[str, str]) -> None:
    """Warn (once per process) about each unknown variable: on stderr, or in a task's log under Airflow."""
    for line in unknown_variables(model, environ):
        if line not in _warned:
            _warned.add(line)
            log.warning("restoreproof: warning: %s", line)
