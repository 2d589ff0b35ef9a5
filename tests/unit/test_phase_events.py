"""The phase events a run emits for a live display: what they say, and that a listener never costs the run."""

from __future__ import annotations

from verification.phase_events import (
    ByteCounter,
    PhaseBytes,
    PhaseEnded,
    PhaseEvent,
    PhaseStarted,
    RunPredicted,
    duration,
    emit,
    listening,
    phase,
    predicted_line,
)


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (0, 0.4, 45, 60, 72, 250, 3600, 7500)] == [
        "0 s", "0 s", "45 s", "1 min", "1 min 12 s", "4 min 10 s", "1 h", "2 h 5 min"]


def test_the_runs_predicted_total_names_each_database_in_sequence():
    run = RunPredicted({"db1": 250.0, "db2": 290.0}, basis="from 4 earlier runs on this host")
    assert predicted_line(run) == "predicted: db1 4 min 10 s, db2 4 min 50 s, total 9 min (from 4 earlier runs on " \
                                  "this host)"
    assert predicted_line(RunPredicted({"db1": None}, basis="no prediction yet (first run)")) == \
        "predicted: no prediction yet (first run)"
    assert predicted_line(RunPredicted({"db1": 60.0, "new": None}, basis="b")) == \
        "predicted: db1 1 min, new no prediction yet, total 1 min (b)"


def test_a_phase_is_started_and_ended_however_its_block_leaves():
    said: list[PhaseEvent] = []
    with listening(said.append):
        with phase("db1", "provision", 20.0):
            pass
        try:
            with phase("db1", "restore and checks"):
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
    emit(PhaseStarted("db1", "unheard"))  # no listener: nothing, and no error
    assert [(type(e).__name__, e.phase) for e in said if not isinstance(e, RunPredicted)] == [
        ("PhaseStarted", "provision"), ("PhaseEnded", "provision"),
        ("PhaseStarted", "restore and checks"), ("PhaseEnded", "restore and checks")]
    ended, stopped = said[1], said[3]
    assert isinstance(ended, PhaseEnded) and ended.predicted_seconds == 20.0 and 0 <= ended.seconds < 5
    assert isinstance(stopped, PhaseEnded) and (ended.finished, stopped.finished) == (True, False)


def test_a_listener_that_fails_never_costs_the_run_and_is_logged_once(caplog):
    def broken(_: object) -> None:
        raise RuntimeError("display broke")

    with listening(broken):
        for _ in range(3):
            with phase("db1", "provision"):
                done = True
    assert done and caplog.text.count("display broke") == 1


def test_a_byte_counter_tells_at_most_every_interval_and_once_more_when_closed():
    told: list[PhaseEvent] = []
    now = [0.0]
    with listening(told.append):
        counter = ByteCounter("db1", "download", 300, every=1.0, clock=lambda: now[0])
    counter.add(100)  # told: the first
    now[0] = 0.5
    counter.add(100)  # not told: within the interval
    now[0] = 1.5
    counter.add(-50)  # a part rewound for its retry
    counter.close()
    assert told == [PhaseBytes("db1", "download", 100, 300), PhaseBytes("db1", "download", 150, 300),
                    PhaseBytes("db1", "download", 150, 300)]


def test_a_byte_counter_made_with_no_listener_tells_nothing_and_counts():
    counter = ByteCounter("db1", "download", None)
    counter.add(10)
    counter.close()
    assert counter.done == 10
