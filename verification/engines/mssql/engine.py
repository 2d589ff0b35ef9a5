"""The SQL Server engine: offline catalog and chain planning from backup headers.

Restoring into a disposable SQL Server container needs the mcr.microsoft.com/mssql/server image,
which cannot be obtained on this project's machines; that part of the engine is not in this
version, and `verify` says so instead of pretending.
"""

from __future__ import annotations

from datetime import datetime

from verification.config import Settings
from verification.engines.base import Evidence, RestoreOutcome, SourcePlan, UnreadableFile
from verification.engines.mssql import chain
from verification.engines.mssql.catalog import scan, walk
from verification.engines.mssql.mtf import COMPRESSED_MAGIC
from verification.errors import RestoreproofError
from verification.model import RestorePlan
from verification.sources.base import Source
from verification.targets.base import Target

DETECT_FILES = 200


class MssqlEngine:
    name = "mssql"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def detect(self, source: Source) -> bool:
        for path in walk(source)[:DETECT_FILES]:
            magic = source.read_bytes(path, 0, 8)
            if magic.startswith(b"TAPE") or magic == COMPRESSED_MAGIC:
                return True
        return False

    def plan(self, source: Source, at: datetime | None) -> SourcePlan:
        catalog = scan(source)
        plans = [chain.plan(db, catalog.display_name(db), at) for db in catalog.databases]
        unreadable = [UnreadableFile(u.path, u.kind, u.reason) for u in catalog.unreadable]
        return SourcePlan(plans, unreadable)

    def restore_and_check(self, plan: RestorePlan, target: Target, evidence: Evidence) -> RestoreOutcome:
        raise RestoreproofError("restoring SQL Server backups is not available in this version")
