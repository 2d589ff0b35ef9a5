"""RestoreproofHook: the one place Airflow code reaches restoreproof's settings and its results store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.sdk.bases.hook import BaseHook

from verification.config import Settings, load_settings
from verification.errors import ConfigError
from verification.results import ResultStore


class RestoreproofHook(BaseHook):
    """What Airflow talks to through restoreproof: its results store (`get_conn`), opened with
    restoreproof's own configuration, so the CLI and the DAGs verify and record with the same
    settings: the YAML file given (a DAG run's `config` param), else RESTOREPROOF_CONFIG in the
    worker's environment, else the worker's user or system file, then RESTOREPROOF_* variables. A file
    that cannot be read or is invalid fails the task naming it: never a silent fall-back to defaults.

    Use it as a context manager, so the store's connections are released when the task is done."""

    conn_name_attr = "restoreproof_conn_id"
    hook_name = "restoreproof"

    def __init__(self, config: str | Path | None = None, **overrides: Any) -> None:
        super().__init__()
        self.config = Path(config) if config else None
        self.overrides = overrides
        self._settings: Settings | None = None
        self._store: ResultStore | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            if self.config is not None and not self.config.is_file():
                raise ConfigError(f"configuration file {self.config} does not exist (the run's `config` parameter)")
            self._settings = load_settings(self.config, **self.overrides)
        return self._settings

    def get_conn(self) -> ResultStore:
        """The results store, opened once per hook (and brought to the current schema)."""
        if self._store is None:
            self._store = ResultStore(self.settings.results_database_url, self.settings.results_retry)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> RestoreproofHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
