"""Whether a container starves for memory without the kernel's OOM killer ending it.

A container at its memory limit need not be OOM-killed: the kernel first drops the pages it can read
back from disk (the binaries' code, mapped files) and reads them in again at the next touch. While
that frees enough, no process is killed, and every process of the container, the `timeout` that
bounds each command included, crawls: a restore or a recovery that would have been OOM-killed in
seconds can instead go on for as long as its budget (half an hour for a recovery). What shows it is
the container's memory use at its limit while its processes fault pages in from disk (major page
faults) at a sustained rate no healthy workload has: a restore reads its files with read(), which
faults nothing, and a program's code is faulted in once.

Pure: fed the Docker engine's stats, one sample at a time (DockerTarget polls them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Major page faults a second, sustained, that are thrashing: a starved 32 MiB PostgreSQL target showed
# ~900 a second, a process looping over a binary in a 24 MiB container ~7,000; a healthy restore,
# recovery or check shows a few hundred once, as each program's code is first read.
STARVED_FAULT_RATE = 100.0
# The share of the limit in use that is "at" it: the kernel reclaims just below the limit.
AT_LIMIT = 0.95


@dataclass(frozen=True)
class MemorySample:
    at: float            # monotonic seconds, when it was taken
    usage: int           # bytes in use, page cache included (what the limit holds)
    limit: int           # bytes
    major_faults: int    # since the container started

    @classmethod
    def from_stats(cls, at: float, stats: dict[str, Any]) -> MemorySample | None:
        """From the engine's stats (GET /containers/{id}/stats); None when they lack a figure (the
        container stopped, or a platform that does not report it)."""
        memory = stats.get("memory_stats") or {}
        numbers = memory.get("stats") or {}
        # cgroup v1 says total_pgmajfault (the container's whole hierarchy), cgroup v2 pgmajfault.
        faults = numbers.get("total_pgmajfault", numbers.get("pgmajfault"))
        usage, limit = memory.get("usage"), memory.get("limit")
        if not (isinstance(faults, int) and isinstance(usage, int) and isinstance(limit, int)) or limit <= 0:
            return None
        return cls(at, usage, limit, faults)


@dataclass
class Starvation:
    """Decides, sample after sample, whether the container has starved for `after` seconds on end."""

    after: float
    rate: float = STARVED_FAULT_RATE
    previous: MemorySample | None = None
    since: MemorySample | None = None  # the sample the current stretch of starving began at

    def feed(self, sample: MemorySample) -> str | None:
        """What the starvation is, said for a reason, once it has lasted `after` seconds; else None."""
        previous, self.previous = self.previous, sample
        if previous is None or sample.at <= previous.at:
            return None
        rate = (sample.major_faults - previous.major_faults) / (sample.at - previous.at)
        if sample.usage < AT_LIMIT * sample.limit or rate < self.rate:
            self.since = None
            return None
        if self.since is None:
            self.since = previous
        lasted = sample.at - self.since.at
        if lasted < self.after:
            return None
        faults = sample.major_faults - self.since.major_faults
        return (f"it stayed at its memory limit for {lasted:.0f} s, reading back from disk {faults / lasted:.0f} "
                f"pages a second that the kernel had dropped to make room (major page faults), and the kernel's "
                f"OOM killer did not end it")
