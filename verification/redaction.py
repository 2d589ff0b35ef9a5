"""Keep every configured secret out of everything restoreproof writes.

The secrets are found in the settings themselves, not listed by hand: every `SecretStr` field
(the pgBackRest cipher passphrase, the evidence signing key, whatever a later setting adds) and
the password of every URL setting (the results store, the Pushgateway). A tool that echoes its
environment, a failing query that quotes its text, an exception that prints a URL: whatever
carries a secret is rewritten before it reaches a reason, a check, the report, the store, JUnit,
metrics, evidence or a log line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from pydantic import BaseModel, SecretStr

from verification.config import Settings

MASK = "********"
# Shorter values would mask ordinary words; no real passphrase or key is this short.
MIN_SECRET_LENGTH = 4

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def _url_passwords(value: str) -> Iterator[str]:
    """A URL's password: after the user name, or as a query parameter (`?password=`, which libpq and
    SQLAlchemy take as well)."""
    if "://" not in value:
        return
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return
    if password:
        yield unquote(password)
    yield from (v for k, v in parse_qsl(parts.query) if k.lower() == "password" and v)


def _secrets(value: Any) -> Iterator[str]:
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _secrets(getattr(value, name))
    elif isinstance(value, str):
        yield from _url_passwords(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _secrets(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _secrets(item)


def masked(secrets: Iterable[str]) -> list[str]:
    """What to mask for these secrets: each, longest first (so a secret containing another is masked
    whole), a multi-line one (a PEM key) also by each of its lines."""
    found: set[str] = set()
    for secret in secrets:
        found.add(secret)
        found.update(line.strip() for line in secret.splitlines())
    return sorted((s for s in found if len(s) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def configured_secrets(settings: Settings) -> list[str]:
    """Every secret in the settings, as `masked` lists them."""
    return masked(_secrets(settings))


class Redactor:
    """Replaces the configured secrets in text and in data (dicts, lists, dataclasses) with a mask."""

    def __init__(self, settings: Settings | None = None, secrets: list[str] | None = None) -> None:
        self.secrets = secrets if secrets is not None else (configured_secrets(settings) if settings else [])

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Redactor:
        """A redactor of values known only at run time (a target's password), not from the settings."""
        return cls(secrets=masked(secrets))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def data(self, value: T) -> T:
        """A copy of JSON-like data with every string redacted (keys too)."""
        if not self.secrets:
            return value
        return self._data(value)  # type: ignore[no-any-return]

    def _data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self._data(k): self._data(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._data(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._data(v) for v in value)
        return value

    def model(self, value: M) -> M:
        """A copy of a typed report model with every string redacted."""
        if not self.secrets:
            return value
        return type(value).model_validate(self._data(value.model_dump(mode="python")))

    def in_place(self, obj: Any, *names: str) -> None:
        """Redact the named attributes of a dataclass (strings, lists, dicts, and nested dataclasses)."""
        for name in names:
            setattr(obj, name, self._deep(getattr(obj, name)))

    def _deep(self, value: Any) -> Any:
        if is_dataclass(value) and not isinstance(value, type):
            for item in fields(value):
                setattr(value, item.name, self._deep(getattr(value, item.name)))
            return value
        if isinstance(value, list):
            return [self._deep(v) for v in value]
        return self._data(value)
