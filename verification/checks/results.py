"""Great Expectations' validation results, read into restoreproof's checks.

Only what is recognised counts: an expectation that raised is an error (the check did not run),
a result whose shape is not one GX 1.x gives is an error, and a suite for which fewer results came
back than it holds expectations is an error. Nothing here turns an unknown into a pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """One expectation's outcome, in the report's words."""

    type: str
    kwargs: dict[str, Any]
    meta: dict[str, Any]
    success: bool | None  # None: it raised (did not run)
    observed: Any
    error: str | None
    sample: list[Any] = field(default_factory=list)  # a few unexpected values, where GX lists them
    rows: int | None = None  # the rows a column expectation looked at (GX's element_count)

    def describe(self) -> str:
        shown = ", ".join(f"{key}={value!r}" for key, value in self.kwargs.items())
        return f"{self.type}({shown})"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "kwargs": self.kwargs, "success": self.success,
                "observed": _jsonable(self.observed), **({"error": self.error} if self.error else {})}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return str(value)


def observed_value(result: dict[str, Any]) -> Any:
    """What GX observed: the value for aggregate expectations, the unexpected rows for the others."""
    if "observed_value" in result:
        return result["observed_value"]
    if "unexpected_count" in result:
        sample = list(result.get("partial_unexpected_list") or [])[:5]
        percent = result.get("unexpected_percent")
        share = f" ({percent:.3g}% of rows)" if isinstance(percent, int | float) else ""
        return f"{result['unexpected_count']} unexpected{share}" + (f", e.g. {sample}" if sample else "")
    return None


def _raised(info: Any) -> str | None:
    """The message of an exception GX caught while evaluating, wherever it put it."""
    if not isinstance(info, dict):
        return None
    if "raised_exception" in info:
        return str(info.get("exception_message") or "an exception without a message") if info["raised_exception"] \
            else None
    for inner in info.values():  # per metric: {metric id: {"raised_exception": ..., ...}}
        said = _raised(inner)
        if said:
            return said
    return None


class UnrecognisedResult(Exception):
    """A GX result without the fields every 1.x result has."""


def outcome_of(result: Any) -> Outcome:
    config = getattr(result, "expectation_config", None)
    kind = getattr(config, "type", None)
    if config is None or not isinstance(kind, str):
        raise UnrecognisedResult(f"a validation result without its expectation: {type(result).__name__}")
    kwargs = {k: v for k, v in dict(getattr(config, "kwargs", {}) or {}).items() if k != "batch_id"}
    meta = dict(getattr(config, "meta", None) or {})
    error = _raised(getattr(result, "exception_info", None))
    success = getattr(result, "success", None)
    if error is None and not isinstance(success, bool):
        raise UnrecognisedResult(f"{kind}: a result that says neither success nor failure ({success!r})")
    said = dict(result.result or {})
    rows = said.get("element_count")
    return Outcome(kind, kwargs, meta, None if error else success, observed_value(said), error,
                   list(said.get("partial_unexpected_list") or [])[:5], rows if isinstance(rows, int) else None)
