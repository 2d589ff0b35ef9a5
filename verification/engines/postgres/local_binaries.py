"""The PostgreSQL programs a local-process target restores each backup with, chosen from the backup.

As for images (versions.py), a server opens only the data files of its own major: each database gets
the folder of its backup's major (postgres.bin_dirs, else postgres.bin_dir when it is set, else
Debian's /usr/lib/postgresql/<major>/bin), held to that major by its own `postgres --version`, and
the pgBackRest on PATH is held to the layouts the backup uses. A database no folder here serves is
refused alone, before any target starts; the others still restore.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from verification.config import PostgresSettings
from verification.engines.postgres.amcheck_sql import PG_AMCHECK_SINCE
from verification.engines.postgres.versions import SERVER, TOOL, layout_refusal, needs, said_versions
from verification.model import ChainStatus, RestorePlan

# What the restore, the server and the checks run from the folder (pg_amcheck only where it exists).
PROGRAMS = ("postgres", "pg_ctl", "pg_checksums", "psql")


def _said(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _folder(pg: PostgresSettings, major: str) -> tuple[Path, str]:
    if major in pg.bin_dirs:
        return pg.bin_dirs[major], f"postgres.bin_dirs[{major}]"
    if "bin_dir" in pg.model_fields_set:
        return pg.bin_dir, "postgres.bin_dir"
    return Path(f"/usr/lib/postgresql/{major}/bin"), "the default"


def bin_dir_for(pg: PostgresSettings, plan: RestorePlan) -> Path | str:
    """The folder whose programs restore `plan`'s backup, or why none here can (naming the setting)."""
    major = plan.written_by[SERVER]
    folder, setting = _folder(pg, major)
    fix = f"install postgresql-{major} or set postgres.bin_dirs: {{{major}: <its bin folder>}}"
    wanted = [*PROGRAMS, *(["pg_amcheck"] if major.isdigit() and int(major) >= PG_AMCHECK_SINCE else [])]
    if missing := [program for program in wanted if not (folder / program).is_file()]:
        return f"{needs(plan)}; the local target's {folder} ({setting}) has no {', '.join(missing)}; {fix}"
    has = said_versions({"postgres": _said([str(folder / "postgres"), "--version"])}).get(SERVER)
    if has is None or has.split(".")[0] != major:
        which = f"PostgreSQL {has}" if has else "no PostgreSQL that says its version"
        return f"{needs(plan)}; the local target's {folder} ({setting}) holds {which}; {fix}"
    if plan.needs:
        tool = shutil.which("pgbackrest")
        has_tool = said_versions({"pgbackrest": _said([tool, "version"])}).get(TOOL) if tool else None
        refusal = layout_refusal(plan, has_tool, f"the local target's pgbackrest ({tool or 'not on PATH'})",
                                 "`pgbackrest version` did not answer", f"PATH to a {TOOL} {{version}} or newer")
        if refusal is not None:
            return refusal
    return folder


def bin_dirs_for(pg: PostgresSettings, plans: list[RestorePlan]) -> tuple[dict[str, Path], dict[str, str]]:
    """Database -> its folder, and database -> why it has none, for every plan that will be restored."""
    chosen: dict[str, Path] = {}
    refused: dict[str, str] = {}
    for plan in plans:
        if plan.chain.status is not ChainStatus.COMPLETE or plan.target_backup is None or SERVER not in plan.written_by:
            continue  # not restored
        found = bin_dir_for(pg, plan)
        if isinstance(found, Path):
            chosen[plan.database] = found
        else:
            refused[plan.database] = found
    return chosen, refused
