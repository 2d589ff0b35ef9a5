"""When a container starves for memory, decided on the Docker engine's own stats: captured here from a
24 MiB container of our image, first idle, then with 18 MiB held by one process while another ran
PostgreSQL's binary over and over (its code dropped and read back from disk at every run), cgroup v1."""

from __future__ import annotations

import json
from pathlib import Path

from verification.targets.starvation import STARVED_FAULT_RATE, MemorySample, Starvation

CAPTURED = json.loads((Path(__file__).parents[2] / "fixtures" / "docker" / "stats-cgroup-v1.json").read_text())
LIMIT = 24 * 2**20


def test_the_engines_stats_give_usage_limit_and_major_faults() -> None:
    idle = MemorySample.from_stats(0.0, CAPTURED["idle"])
    first, second = (MemorySample.from_stats(t, stats) for t, stats in zip((6.0, 11.0), CAPTURED["starving"],
                                                                           strict=True))
    assert idle == MemorySample(0.0, 1781760, LIMIT, 18)
    assert first == MemorySample(6.0, 25010176, LIMIT, 45851)
    assert second == MemorySample(11.0, 25116672, LIMIT, 81822)


def test_cgroup_v2_stats_name_the_faults_pgmajfault() -> None:
    # cgroup v2: the engine passes the kernel's memory.stat keys as they are (no total_ prefix).
    stats = {"memory_stats": {"usage": 1000, "limit": 2000, "stats": {"anon": 600, "file": 300, "pgmajfault": 42}}}
    assert MemorySample.from_stats(3.0, stats) == MemorySample(3.0, 1000, 2000, 42)


def test_stats_without_a_figure_are_no_sample() -> None:
    # A stopped container: the engine answers with empty memory stats.
    assert MemorySample.from_stats(0.0, {"memory_stats": {}}) is None
    assert MemorySample.from_stats(0.0, {"memory_stats": {"usage": 5, "limit": 0, "stats": {"pgmajfault": 1}}}) is None
    assert MemorySample.from_stats(0.0, {}) is None


def test_the_captured_starving_container_is_starved_once_it_lasted_long_enough() -> None:
    first, second = (MemorySample.from_stats(t, stats) for t, stats in zip((0.0, 5.0), CAPTURED["starving"],
                                                                           strict=True))
    assert first is not None and second is not None
    starvation = Starvation(after=5.0)
    assert starvation.feed(first) is None
    said = starvation.feed(second)
    # (81822 - 45851) / 5 s
    assert said == ("it stayed at its memory limit for 5 s, reading back from disk 7194 pages a second that the "
                    "kernel had dropped to make room (major page faults), and the kernel's OOM killer did not end it")
    # Not before it lasted `after`.
    starvation = Starvation(after=5.1)
    starvation.feed(first)
    assert starvation.feed(second) is None


def at(t: float, faults: int, usage: int = LIMIT) -> MemorySample:
    return MemorySample(t, usage, LIMIT, faults)


def test_the_stretch_must_be_unbroken_and_starts_where_the_rate_first_was_reached() -> None:
    rate = int(STARVED_FAULT_RATE)
    starvation = Starvation(after=20.0)
    assert starvation.feed(at(0, 0)) is None
    assert starvation.feed(at(10, 10 * rate)) is None       # starving from 0 s
    assert starvation.feed(at(15, 10 * rate + 5 * rate - 1)) is None  # just under the rate: the stretch breaks
    assert starvation.feed(at(25, 25 * rate)) is None       # starving again from 15 s: 10 s so far
    assert starvation.feed(at(34, 34 * rate)) is None       # 19 s
    assert starvation.feed(at(35, 35 * rate)) == (
        f"it stayed at its memory limit for 20 s, reading back from disk {rate} pages a second that the kernel had "
        f"dropped to make room (major page faults), and the kernel's OOM killer did not end it")


def test_faulting_below_the_limit_or_at_the_limit_without_faulting_is_not_starving() -> None:
    starvation = Starvation(after=1.0)
    starvation.feed(at(0, 0))
    # A program's code read in at its start, with room to spare.
    assert starvation.feed(at(10, 100_000, usage=int(0.94 * LIMIT))) is None
    # A restore filling the page cache to the limit: reads, no faults.
    assert starvation.feed(at(20, 100_000 + 10)) is None
    assert starvation.feed(at(30, 100_000 + 20)) is None
    assert starvation.since is None


def test_a_clock_that_did_not_move_decides_nothing() -> None:
    starvation = Starvation(after=0.0)
    starvation.feed(at(5, 0))
    assert starvation.feed(at(5, 10**6)) is None
