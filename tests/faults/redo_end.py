"""Real clusters for the end-of-redo proof (issue 28, class 3): initdb -k, real pgBackRest archive-push,
and WAL damaged the way an archive really holds it.

The damage is made in the repository's own copy of a segment: decompressed, changed, compressed again
with the same compression, and renamed with the SHA-1 of its new content, as pgBackRest names what it
was given (pgBackRest 2.45's archive-get does not check that SHA-1, measured; `pgbackrest verify` does:
renamed, the archive holds the damaged WAL as if archive-push had been handed it, and only the WAL's
own records can tell).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from verification.config import load_settings
from verification.demo.source import DATA, _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id

STANZA = "redo"
RECORD_RE = re.compile(r"^rmgr: (?P<rmgr>\S+) +len \(rec/tot\): +\d+/ *(?P<total>\d+), tx: +(?P<xid>\d+), "
                       r"lsn: (?P<hi>[0-9A-F]+)/(?P<lo>[0-9A-F]+), prev \S+, desc: ?(?P<desc>.*)$")


@dataclass(frozen=True)
class Record:
    lsn: int
    rmgr: str
    total: int
    xid: int
    desc: str


@dataclass
class Snapshot:
    """A repository as the cluster left it, with the records of its last archived segment."""

    repo: Path
    segment: str               # the archive's last segment
    records: list[Record]      # pg_waldump of it, in order
    segment_size: int

    def commits(self) -> list[Record]:
        return [r for r in self.records if r.rmgr == "Transaction" and r.desc.startswith("COMMIT")]

    def copy(self, to: Path) -> Snapshot:
        shutil.copytree(self.repo, to, symlinks=True)
        return Snapshot(to, self.segment, self.records, self.segment_size)

    def archived(self) -> Path:
        (found,) = (self.repo / "archive" / STANZA).rglob(f"{self.segment}-*")
        return found

    def damage(self, change: Callable[[bytearray], None]) -> None:
        """Change the archived copy of the last segment and store it as pgBackRest names its files."""
        old = self.archived()
        assert old.suffix == ".gz", f"pgBackRest's default compression (gz) expected: {old.name}"
        content = bytearray(gzip.decompress(old.read_bytes()))
        change(content)
        old.unlink()
        new = old.with_name(f"{self.segment}-{hashlib.sha1(content).hexdigest()}.gz")
        new.write_bytes(gzip.compress(bytes(content), compresslevel=6))


def parse_records(text: str) -> list[Record]:
    return [Record((int(m["hi"], 16) << 32) | int(m["lo"], 16), m["rmgr"], int(m["total"]), int(m["xid"]), m["desc"])
            for m in map(RECORD_RE.match, text.splitlines()) if m]


class RedoCluster:
    """One small real cluster archiving into `repo` with pgBackRest (stanza 'redo')."""

    def __init__(self, repo: Path) -> None:
        settings = load_settings()
        self.repo = repo
        self.client = docker_client()
        image = ensure_image(settings.docker.postgres_image, settings.docker.build_context)
        self.cluster = _SourceCluster(self.client, image, STANZA, repo, new_run_id())

    def start(self) -> None:
        self.cluster.setup()
        self.cluster.psql("create table t (id serial primary key, note text not null)")
        self.cluster.backup("full")

    def commits(self, count: int, note: str) -> None:
        """`count` transactions of one row each."""
        self.cluster.sh(f"for i in $(seq 1 {count}); do echo \"insert into t (note) values ('{note}');\"; done"
                        " | psql -X -q -h /tmp -d postgres")

    def segment_number(self) -> int:
        return int(self.cluster.psql("select floor((pg_current_wal_insert_lsn() - '0/0') / setting::numeric) "
                                     "from pg_settings where name = 'wal_segment_size'"))

    def fill_segment(self) -> None:
        """Write until the current segment is full and archived (no switch: the next one is being written),
        then commit a little more in the next one, which the archive does not hold."""
        start = self.segment_number()
        while self.segment_number() == start:
            self.cluster.psql("insert into t (note) select repeat(md5(i::text), 8) from generate_series(1, 20000) i")
        full = self.cluster.psql(f"select pg_walfile_name('0/0'::pg_lsn + {start} * setting::numeric + 1) "
                                 "from pg_settings where name = 'wal_segment_size'")
        self.cluster.sh("for i in $(seq 1 100); do [ \"$(psql -X -A -t -h /tmp -d postgres -c 'select last_archived_wal "
                        f"from pg_stat_archiver')\" = {full} ] && exit 0; sleep 0.2; done; exit 1")
        self.commits(3, "after-fill")

    def switch(self) -> None:
        """`pgbackrest check`: a restore point, an XLOG SWITCH, the segment archived."""
        self.cluster.sh(f"pgbackrest --stanza={STANZA} check")

    def stop(self) -> None:
        # A clean stop: with archiving on, PostgreSQL switches WAL first (xlog.c ShutdownXLOG), so the
        # archive ends in an XLOG SWITCH, and the archiver pushes that segment before it exits.
        self.cluster.sh(f"pg_ctl stop -w -m fast -D {DATA} >/dev/null")

    def snapshot(self, to: Path) -> Snapshot:
        """The repository as it is now, readable by any target, with its last segment's records."""
        self.cluster.sh(f"chmod a+rX /repo /repo/backup /repo/archive && chmod -R a+rX /repo/backup/{STANZA} "
                        f"/repo/archive/{STANZA}", user="root")
        names = sorted(p.name[:24] for p in (self.repo / "archive" / STANZA).rglob("*-*")
                       if re.fullmatch(r"[0-9A-F]{24}-[0-9a-f]{40}\.gz", p.name))
        last = names[-1]
        dump = self.cluster.sh(f"rm -rf /tmp/d && mkdir /tmp/d && pgbackrest --stanza={STANZA} archive-get {last} "
                               f"/tmp/d/{last} && pg_waldump -p /tmp/d {last} {last}")
        (found,) = (self.repo / "archive" / STANZA).rglob(f"{last}-*")
        size = len(gzip.decompress(found.read_bytes()))
        snapshot = Snapshot(self.repo, last, parse_records(dump), size)
        return snapshot.copy(to)

    def close(self) -> None:
        self.cluster.remove()
        self.client.close()


def cluster(repo: Path) -> Iterator[RedoCluster]:
    made = RedoCluster(repo)
    try:
        made.start()
        yield made
    finally:
        made.close()


def flip_payload(record: Record, size: int) -> Callable[[bytearray], None]:
    """One byte of the record's data (past its 24-byte header) changed: its CRC no longer matches."""
    def change(content: bytearray) -> None:
        content[record.lsn % size + 30] ^= 0x5A
    return change


def set_total_length(record: Record, size: int, length: int) -> Callable[[bytearray], None]:
    """The record header's xl_tot_len (its first 4 bytes, little-endian) set to `length`."""
    def change(content: bytearray) -> None:
        struct.pack_into("<I", content, record.lsn % size, length)
    return change


def zero_from(record: Record, size: int) -> Callable[[bytearray], None]:
    """Zeros from the record's start to the end of the segment."""
    def change(content: bytearray) -> None:
        offset = record.lsn % size
        content[offset:] = bytes(len(content) - offset)
    return change
