"""Steps run beside each other: each timed on its own, and which phases shared time said."""

from __future__ import annotations

import threading
import time

import pytest

from verification.engines.alongside import Alongside, Spans
from verification.errors import TargetError
from verification.model import PhaseName, PhaseStatus, PhaseTiming


def test_a_step_alongside_runs_while_the_caller_goes_on_and_hands_back_its_result() -> None:
    release = threading.Event()
    step = Alongside("waits", lambda: release.wait(5) and "done")
    assert not step.done()  # still running: the caller was not held up
    release.set()
    assert step.result() == "done"
    assert step.done() and step.seconds is not None and step.seconds >= 0


def test_what_a_step_alongside_raised_is_raised_to_whoever_waits_for_it() -> None:
    def fails() -> None:
        raise TargetError("the container went away")

    step = Alongside("fails", fails)
    step.wait()  # waiting alone says nothing
    with pytest.raises(TargetError, match="the container went away"):
        step.result()


def test_a_step_alongside_is_timed_from_its_own_start_to_its_own_end() -> None:
    step = Alongside("sleeps", lambda: time.sleep(0.2))
    time.sleep(0.5)  # the caller's own wait is not the step's
    step.result()
    assert step.seconds == pytest.approx(0.2, abs=0.1)


def test_phases_that_shared_time_name_each_other_and_the_others_are_left_alone() -> None:
    spans = Spans()
    spans.add(PhaseName.TRANSFER, 0.0, 4.0)
    spans.add(PhaseName.REDO, 4.0, 6.0)  # starts as the transfer ends: no time shared
    spans.add(PhaseName.REPOSITORY_VERIFY, 4.0, 9.0)
    spans.add(PhaseName.DATA_CHECKS, 6.5, 10.0)
    spans.add(PhaseName.INTEGRITY_CHECK, 6.5, 8.0)
    spans.add(PhaseName.INTEGRITY_CHECK, 10.0, 11.0)  # the stop and pg_checksums, after the data checks
    phases = [PhaseTiming(name, PhaseStatus.MEASURED, seconds=1.0) for name in
              (PhaseName.TRANSFER, PhaseName.REDO, PhaseName.DATA_CHECKS, PhaseName.INTEGRITY_CHECK,
               PhaseName.REPOSITORY_VERIFY)]
    phases.append(PhaseTiming.not_reached(PhaseName.RECOVERY_END, "an earlier step did not complete"))
    spans.mark(phases)
    said = {p.name: p.details.get("alongside") for p in phases}
    assert said == {
        PhaseName.TRANSFER: None,
        PhaseName.REDO: [PhaseName.REPOSITORY_VERIFY],
        PhaseName.DATA_CHECKS: [PhaseName.INTEGRITY_CHECK, PhaseName.REPOSITORY_VERIFY],
        PhaseName.INTEGRITY_CHECK: [PhaseName.DATA_CHECKS, PhaseName.REPOSITORY_VERIFY],
        PhaseName.REPOSITORY_VERIFY: [PhaseName.DATA_CHECKS, PhaseName.INTEGRITY_CHECK, PhaseName.REDO],
        PhaseName.RECOVERY_END: None,  # not reached: never said to share anything
    }
    assert spans.shared(PhaseName.INTEGRITY_CHECK, PhaseName.DATA_CHECKS) == pytest.approx(1.5)
    assert spans.shared(PhaseName.INTEGRITY_CHECK, PhaseName.REPOSITORY_VERIFY) == pytest.approx(1.5)


def test_a_few_milliseconds_in_common_is_no_running_alongside() -> None:
    spans = Spans()
    spans.add(PhaseName.TRANSFER, 0.0, 4.0)
    spans.add(PhaseName.REPOSITORY_VERIFY, 3.99, 9.0)
    assert spans.alongside(PhaseName.TRANSFER) == []
    spans.add(PhaseName.REPOSITORY_VERIFY, 3.0, 3.5)
    assert spans.alongside(PhaseName.TRANSFER) == [PhaseName.REPOSITORY_VERIFY]
