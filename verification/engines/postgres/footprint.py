"""What a planned restore reads from the repository, and what the backups secure over time.

`chain_files` lists every file of the chain (the backups' folders, the WAL segments replayed, the
info files) for the evidence bundle's hashes. `backup_history` gives the achieved RPO its points:
each backup's end, and each WAL segment's archive time (the file's modification time in the
repository, the only time a segment carries without reading it).
"""

from __future__ import annotations

from verification.engines.postgres.repository import Stanza, archive_id_for
from verification.engines.postgres.wal import parse_segment
from verification.model import BackupHistory, RestorePlan, SecuredPoint
from verification.sources.base import Source


def _walk(source: Source, folder: str) -> list[str]:
    files = []
    for name in source.list_dir(folder):
        path = f"{folder}/{name}"
        if source.is_dir(path):
            files.extend(_walk(source, path))
        else:
            files.append(path)
    return files


def chain_files(source: Source, stanza: Stanza, plan: RestorePlan, segment_size: int) -> list[str]:
    files = [f for f in (stanza.info_file, f"archive/{stanza.name}/archive.info") if source.exists(f)]
    for backup in plan.chain.backups:
        if backup.path:
            files.extend(_walk(source, backup.path))
    wal, target = plan.chain.wal, plan.target_backup
    if wal is not None and target is not None:
        archive = stanza.archives.get(archive_id_for(stanza, target))
        first, last = parse_segment(wal.first, segment_size).number, parse_segment(wal.last, segment_size).number
        if archive is not None:
            files.extend(a.file for s, a in sorted(archive.segments.items())
                         if first <= s.number <= last and s.timeline <= wal.timeline)
            files.extend(archive.history_files[t] for t in sorted(archive.history_files) if t <= wal.timeline)
    return list(dict.fromkeys(files))


def backup_history(source: Source, stanza: Stanza) -> BackupHistory:
    points = [SecuredPoint(b.label, b.finish) for b in stanza.backups if not b.error]
    for archive in stanza.archives.values():
        for segment, archived in archive.segments.items():
            when = source.modified(archived.file)
            if when is not None:
                points.append(SecuredPoint(segment.name(archive.segment_size), when))
    points.sort(key=lambda p: p.at)
    return BackupHistory(points, "backup end times, and WAL segment archive times (file modification times "
                                 "in the repository)")
