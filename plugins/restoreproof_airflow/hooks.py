"""RestoreproofHook: the one place Airflow code gets restoreproof's settings and steps."""

from __future__ import annotations

from typing import Any

from airflow.sdk.bases.hook import BaseHook

from verification.config import Settings, load_settings


class RestoreproofHook(BaseHook):
    """Settings come from restoreproof's own configuration (RESTOREPROOF_CONFIG, RESTOREPROOF_*
    environment variables), so the CLI and the DAGs verify with the same settings."""

    conn_name_attr = "restoreproof_conn_id"
    hook_name = "restoreproof"

    def __init__(self, **overrides: Any) -> None:
        super().__init__()
        self.overrides = overrides

    def get_conn(self) -> Settings:
        return load_settings(**self.overrides)

    @property
    def settings(self) -> Settings:
        return self.get_conn()
