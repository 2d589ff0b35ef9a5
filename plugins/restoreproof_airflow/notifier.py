"""A failure summary: always a log line; a JSON POST to RESTOREPROOF_WEBHOOK_URL when it is set."""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
import urllib.request
from typing import Any

from airflow.sdk.bases.notifier import BaseNotifier

log = logging.getLogger("restoreproof.notifier")


class RestoreproofFailureNotifier(BaseNotifier):
    def __init__(self, webhook_url: str | None = None) -> None:
        super().__init__()
        self.webhook_url = webhook_url

    def summary(self, context: Any) -> dict[str, Any]:
        dag_run = context.get("dag_run")
        ti = context.get("ti") or context.get("task_instance")
        return {
            "dag_id": getattr(dag_run, "dag_id", None),
            "run_id": getattr(dag_run, "run_id", None),
            "task_id": getattr(ti, "task_id", None),
            "map_index": getattr(ti, "map_index", None),
            "reason": str(context.get("exception") or context.get("reason") or "failed"),
        }

    def notify(self, context: Any) -> None:
        summary = self.summary(context)
        log.error("restoreproof verification failed: %s", json.dumps(summary, default=str))
        url = self.webhook_url or os.environ.get("RESTOREPROOF_WEBHOOK_URL")
        if not url:
            return
        request = urllib.request.Request(url, data=json.dumps(summary, default=str).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10):
                pass
        except OSError as exc:  # a notification must never hide the failure it reports
            # Only the host: Slack- and Teams-style webhooks carry their token in the path.
            log.warning("restoreproof webhook at %s did not answer: %s", urllib.parse.urlsplit(url).hostname, exc)
