"""Backup files hashed through an S3 source against a real endpoint (moto's server, its own process):
several files at once where the source serves parallel reads, with the same hashes, in the same order,
as one after the other."""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any

import pytest

from tests.unit.sources import conftest as s3_fixtures
from tests.unit.sources.conftest import Bucket
from verification.errors import SourceError
from verification.evidence.backup_hashes import CHUNK_BYTES, FileHash, hash_source_files
from verification.sources.s3 import S3Source

s3_endpoint, s3 = s3_fixtures.s3_endpoint, s3_fixtures.s3

# A chain as object storage holds it: many small WAL objects, and a backup file of several chunks.
WAL = {f"archive/demo1/15-1/0000000100000000/0000000100000000000000{index:02X}-x.gz": os.urandom(3000 + index)
       for index in range(40)}
BIG = {"backup/demo1/F/pg_data/base/1/1259.gz": os.urandom(2 * CHUNK_BYTES + 12345)}
FILES = {**BIG, **WAL, "backup/demo1/backup.info": b"", "backup/demo1/F/backup.manifest": b"[backup]\n" * 90}


def uploaded(s3: Bucket) -> S3Source:
    for key, body in FILES.items():
        s3.put(f"repo/{key}", body)
    return S3Source(s3.url("repo"))


def getters(source: S3Source) -> set[str]:
    """The names of the threads that send the source's GETs from now on."""
    seen: set[str] = set()

    def record(**_: Any) -> None:
        seen.add(threading.current_thread().name)

    source.client.meta.events.register("before-send.s3.GetObject", record)
    return seen


def test_files_are_hashed_several_at_once_with_the_hashes_of_one_after_the_other(s3: Bucket) -> None:
    source = uploaded(s3)
    assert source.parallel_reads == 16
    paths = list(FILES)
    threads = getters(source)
    parallel = hash_source_files(source, paths)
    assert parallel == [FileHash(path, len(body), hashlib.sha256(body).hexdigest()) for path, body in FILES.items()]
    assert len(threads) > 1 and all(name.startswith("restoreproof-hash") for name in threads)
    again = S3Source(s3.url("repo"))  # a new source: nothing kept from the first read
    one_by_one = getters(again)
    assert hash_source_files(again, paths, threads=1) == parallel
    assert one_by_one == {threading.current_thread().name}


def test_the_first_file_in_order_that_cannot_be_hashed_is_named(s3: Bucket) -> None:
    source = uploaded(s3)
    paths = list(FILES)
    first, later = paths[3], paths[30]
    for path in (later, first):
        s3.client.delete_object(Bucket=s3.name, Key=f"repo/{path}")
    with pytest.raises(SourceError) as raised:
        hash_source_files(source, paths)
    assert str(raised.value).startswith(f"cannot hash backup file {first} in {s3.url('repo')}: "
                                        f"{s3.url('repo')}/{first} does not exist (GetObject: NoSuchKey, HTTP 404)")


def test_after_a_file_that_cannot_be_hashed_no_pending_file_is_read(s3: Bucket) -> None:
    """Two threads: one reads a file of four chunks, the other meets a file deleted since the listing at
    once. The failure is said without the other files being read: none of those waiting is started,
    and the big one stops at its next chunk instead of being read to its end."""
    big = {"backup/demo1/F/pg_data/base/1/2619.gz": os.urandom(4 * CHUNK_BYTES)}
    gone = "archive/demo1/15-1/0000000100000000/000000010000000000000001-gone.gz"
    pending = {f"archive/demo1/15-1/0000000100000000/0000000100000000000000{index:02X}-p.gz": b"p" * 100
               for index in range(2, 22)}
    for key, body in {**big, gone: b"g" * 100, **pending}.items():
        s3.put(f"repo/{key}", body)
    source = S3Source(s3.url("repo"))
    s3.client.delete_object(Bucket=s3.name, Key=f"repo/{gone}")
    read: list[str] = []

    def record(request: Any, **_: Any) -> None:
        read.append(request.url.split("/repo/", 1)[1].split("?")[0])

    source.client.meta.events.register("before-send.s3.GetObject", record)
    with pytest.raises(SourceError) as raised:
        hash_source_files(source, [*big, gone, *pending], threads=2)
    assert str(raised.value).startswith(f"cannot hash backup file {gone} in {s3.url('repo')}: {s3.url('repo')}/{gone} "
                                        "does not exist (GetObject: NoSuchKey, HTTP 404)")
    assert [path for path in read if path in pending] == []  # no file waiting was read
    (path,) = big
    assert read.count(gone) == 1 and 1 <= read.count(path) < 4  # the big one stopped at its next chunk


class CountingSource:
    """A folder-like source in memory that sets `stop` once `after` chunks were read."""

    def __init__(self, files: dict[str, bytes], stop: threading.Event, after: int) -> None:
        self.files, self.stop, self.after = files, stop, after
        self.chunks = 0

    def describe(self) -> str:
        return "memory"

    def size(self, path: str) -> int:
        return len(self.files[path])

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        self.chunks += 1
        if self.chunks >= self.after:
            self.stop.set()
        body = self.files[path]
        return body[offset:offset + length if length is not None else None]


@pytest.mark.parametrize("threads", [1, 4])
def test_hashing_stopped_midway_raises_and_starts_nothing_more(threads: int) -> None:
    from verification.evidence.backup_hashes import HashingStopped

    stop = threading.Event()
    source = CountingSource({f"f{n}": bytes(10) for n in range(50)}, stop, after=3)
    with pytest.raises(HashingStopped, match="the verification was interrupted"):
        hash_source_files(source, list(source.files), threads=threads, stop=stop)
    assert source.chunks < 3 + threads  # each thread finished at most the read it was in
    assert isinstance(HashingStopped("x"), SourceError)  # the pipeline's handling of SourceError covers it
