"""Waiting until something is true: at once, after a few tries, never, or ended by an error."""

import time

import pytest

from verification.errors import TargetError
from verification.targets.polling import poll_until


def test_true_at_once_or_after_some_tries() -> None:
    assert poll_until(lambda: True, 1.0, 0.01) is True
    answers = iter([False, False, True])
    calls = []
    assert poll_until(lambda: calls.append(1) or next(answers), 5.0, 0.01) is True
    assert len(calls) == 3


def test_never_true_is_false_once_the_time_is_up() -> None:
    started = time.monotonic()
    assert poll_until(lambda: False, 0.3, 0.05) is False
    assert 0.25 <= time.monotonic() - started < 5


def test_an_error_ends_the_wait_at_once_and_is_raised() -> None:
    def died() -> bool:
        raise TargetError("container t exited while starting: out of memory")

    started = time.monotonic()
    with pytest.raises(TargetError, match=r"^container t exited while starting: out of memory$"):
        poll_until(died, 60.0, 0.05)
    assert time.monotonic() - started < 5
