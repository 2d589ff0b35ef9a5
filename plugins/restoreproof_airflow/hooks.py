"""RestoreproofHook: the one place Airflow code gets restoreproof's settings and steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.sdk.bases.hook import BaseHook

from verification.config import Settings, load_settings
from verification.errors import ConfigError


class RestoreproofHook(BaseHook):
    """Settings come from restoreproof's own configuration, so the CLI and the DAGs verify with the
    same settings: the YAML file given (a DAG run's `config` param, an operator's `config`), else
    RESTOREPROOF_CONFIG in the worker's environment, then RESTOREPROOF_* variables. A file that
    cannot be read or is invalid fails the task naming it: never a silent fall-back to defaults."""

    conn_name_attr = "restoreproof_conn_id"
    hook_name = "restoreproof"

    def __init__(self, config: str | Path | None = None, **overrides: Any) -> None:
        super().__init__()
        self.config = Path(config) if config else None
        self.overrides = overrides

    def get_conn(self) -> Settings:
        if self.config is not None and not self.config.is_file():
            raise ConfigError(f"configuration file {self.config} does not exist (the run's `config` parameter)")
        return load_settings(self.config, **self.overrides)

    @property
    def settings(self) -> Settings:
        return self.get_conn()
