"""Which point in time to test, so that nightly runs rotate through the retention window.

- latest: the end of the newest backup or log (the default);
- older-full: the end of a full backup other than the newest, chosen by the seed;
- random: a moment between the end of the oldest full and the end of the newest backup.

The seed defaults to the date (YYYYMMDD), so each night tests another point and a night's choice
can be reproduced; each database mixes its name into the seed, so databases do not move in step.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import StrEnum

from verification.model import BackupSet, BackupType, RuleCheck


class PointStrategy(StrEnum):
    LATEST = "latest"
    OLDER_FULL = "older-full"
    RANDOM = "random"


@dataclass(frozen=True)
class PointChoice:
    strategy: PointStrategy = PointStrategy.LATEST
    seed: int | None = None
    # The timeline whose history to restore (--timeline): where an archive holds two histories, the
    # point alone does not say which one; None: the newest timeline, PostgreSQL's default.
    timeline: int | None = None

    def effective_seed(self) -> int:
        return self.seed if self.seed is not None else int(date.today().strftime("%Y%m%d"))


def choose(choice: PointChoice, database: str, backups: list[BackupSet],
           continuous: bool = True) -> tuple[datetime | None, RuleCheck]:
    """The point to restore one database to (None: latest), and the rule that records why.

    `continuous`: any moment can be restored to (a WAL archive, SQL Server log backups). Without
    it (SQL Server's simple recovery model) only the ends of backups can, so "random" picks one.
    """
    if choice.strategy is PointStrategy.LATEST or not backups:
        return None, RuleCheck("restore-point", True, "latest: the end of the newest backup")
    seed = choice.effective_seed()
    digest = hashlib.sha256(f"{seed}:{database}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    fulls = sorted((b for b in backups if b.type is BackupType.FULL), key=lambda b: b.finish)
    if choice.strategy is PointStrategy.OLDER_FULL:
        older = fulls[:-1]
        if not older:
            return None, RuleCheck("restore-point", True,
                                   f"older-full: {database} has a single full, so latest is tested (seed {seed})")
        chosen = rng.choice(older)
        return chosen.finish, RuleCheck(
            "restore-point", True,
            f"older-full: the end of full {chosen.name} ({chosen.finish.isoformat()}), one of {len(older)} "
            f"older fulls (seed {seed})")
    if not fulls:
        return None, RuleCheck("restore-point", False, f"random: {database} has no full backup to start from")
    if not continuous:
        ends = sorted({b.finish for b in backups if b.finish >= fulls[0].finish})
        moment = rng.choice(ends)
        return moment, RuleCheck(
            "restore-point", True,
            f"random: {moment.isoformat()}, the end of one of {len(ends)} backups (no log backups: only backup "
            f"ends can be restored to) (seed {seed})")
    start = fulls[0].finish
    end = max(b.finish for b in backups)
    if end <= start:
        return end, RuleCheck("restore-point", True, f"random: the window is a single moment, {end.isoformat()}")
    moment = start + (end - start) * rng.random()
    moment = moment.replace(microsecond=0).astimezone(UTC)
    return moment, RuleCheck(
        "restore-point", True,
        f"random: {moment.isoformat()} within the retention window {start.isoformat()} .. {end.isoformat()} "
        f"(seed {seed})")
