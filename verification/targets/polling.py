"""Waiting for something to become true, with tenacity: readiness of targets, ends of processes."""

from __future__ import annotations

from collections.abc import Callable

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed


def poll_until(check: Callable[[], bool], timeout: float, interval: float) -> bool:
    """Call `check` every `interval` seconds until it returns True (then True) or `timeout` seconds
    have passed (then False). An exception from `check` is not retried: it ends the wait and is
    raised, so a target that died while starting is said at once, not after the whole timeout."""
    retrying = Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(interval),
                        retry=retry_if_result(lambda done: not done), retry_error_callback=lambda _: False)
    return bool(retrying(check))
