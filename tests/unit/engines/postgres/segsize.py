"""A stanza upgraded into a cluster of another WAL segment size, composed from the real files of
tests/fixtures/postgres/segsize (pgBackRest 2.45, PostgreSQL 15, `initdb --wal-segsize=64` and `=1`):
what `pgbackrest stanza-upgrade` leaves after the old cluster is dumped and restored into a new one.

The old cluster's backups keep db-id 1 and its archive id 15-1; the new cluster becomes [db] db-id 2,
archive id 15-2; [db:history] of backup.info and archive.info lists both, each file signed with its
backrest-checksum as pgBackRest signs it. The old cluster's backups are moved a day back, their labels
too (the upgrade came after them); everything else, archive file names and the first segment's head included, is real.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.conftest import FIXTURES, write_manifest
from verification.engines.postgres.manifest import info_checksum, info_values

SEGSIZE = FIXTURES / "segsize"
MIB = 1024 * 1024
SIZES = {"seg64": 64 * MIB, "seg1": MIB}
STANZA = "up"
DAY = 86400
HEAD = '[backrest]\nbackrest-format=5\nbackrest-version="2.45"\n'


@dataclass(frozen=True)
class Cluster:
    fixture: str
    archive_id: str
    labels: list[str]  # its backups, oldest first
    finish: datetime  # its newest backup's end (as backup.info records it here)


def _signed(text: str) -> str:
    return text + f'\n[backrest]\nbackrest-checksum="{info_checksum(info_values(text))}"\n'


def _section(text: str, name: str) -> list[tuple[str, str]]:
    body = text.split(f"[{name}]\n", 1)[1].split("\n\n", 1)[0]
    return [tuple(line.split("=", 1)) for line in body.splitlines() if line]  # type: ignore[misc]


def _backups(fixture: str, db_id: int, shift: int) -> list[tuple[str, dict[str, object]]]:
    text = (SEGSIZE / fixture / "backup.info").read_text()
    if shift:  # labels and references name the day the backup was taken
        text = text.replace("20261128-", "20261127-")
    found = []
    for label, raw in _section(text, "backup:current"):
        data = json.loads(raw)
        data["db-id"] = db_id
        for key in ("backup-timestamp-start", "backup-timestamp-stop"):
            data[key] -= shift
        found.append((label, data))
    return found


def upgraded(root: Path, old: str, new: str) -> tuple[Cluster, Cluster]:
    """Write the stanza under `root` (a repository folder); the old and the new cluster."""
    backup, archive = root / "backup" / STANZA, root / "archive" / STANZA
    backup.mkdir(parents=True)
    archive.mkdir(parents=True)
    clusters = []
    lines, history, archive_history = [], [], []
    for db_id, fixture, shift in ((1, old, DAY), (2, new, 0)):
        here = SEGSIZE / fixture
        archive_id = f"15-{db_id}"
        entries = _backups(fixture, db_id, shift)
        lines += [f"{label}={json.dumps(data, separators=(',', ':'))}" for label, data in entries]
        history.append(f"{db_id}={_section(here.joinpath('backup.info').read_text(), 'db:history')[0][1]}")
        archive_history.append(f"{db_id}={_section(here.joinpath('archive.info').read_text(), 'db:history')[0][1]}")
        for label, _ in entries:
            (backup / label).mkdir()
            write_manifest(backup / label, label)
        head = (here / "first-segment-head.gz").read_bytes()
        for index, name in enumerate((here / "archive-files.txt").read_text().split()):
            path = archive / re.sub(r"^15-1/", f"{archive_id}/", name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(head if index == 0 else b"")
        stop = max(int(str(data["backup-timestamp-stop"])) for _, data in entries)
        clusters.append(Cluster(fixture, archive_id, [label for label, _ in entries],
                                datetime.fromtimestamp(stop, UTC)))
    new_db = dict(_section((SEGSIZE / new / "backup.info").read_text(), "db"))
    new_archive_db = dict(_section((SEGSIZE / new / "archive.info").read_text(), "db"))
    new_db["db-id"] = new_archive_db["db-id"] = "2"
    db = "".join(f"{key}={value}\n" for key, value in new_db.items())
    archive_db = "".join(f"{key}={value}\n" for key, value in new_archive_db.items())
    info = (f"{HEAD}\n[backup:current]\n" + "\n".join(sorted(lines)) + f"\n\n[db]\n{db}\n[db:history]\n"
            + "\n".join(history) + "\n")
    (backup / "backup.info").write_text(_signed(info))
    (archive / "archive.info").write_text(_signed(f"{HEAD}\n[db]\n{archive_db}\n[db:history]\n"
                                                 + "\n".join(archive_history) + "\n"))
    return clusters[0], clusters[1]
