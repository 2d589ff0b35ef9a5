"""Registers restoreproof with Airflow: its web page (an application in the Airflow 3 API server at
/restoreproof/, shown in the UI under Browse -> Restore verification, for whom Airflow's auth manager lets
read the DAG restore_verification), hook and notifier."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from restoreproof_airflow.hooks import RestoreproofHook
from restoreproof_airflow.web import app


class RestoreproofPlugin(AirflowPlugin):
    name = "restoreproof"
    hooks = [RestoreproofHook]
    fastapi_apps = [{"app": app, "url_prefix": "/restoreproof", "name": "restoreproof reports"}]
    external_views = [{"name": "Restore verification", "href": "/restoreproof/", "destination": "nav",
                       "category": "browse", "url_route": "restoreproof"}]
