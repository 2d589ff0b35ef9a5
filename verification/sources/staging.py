"""Stage mode: the files a restore plan reads, downloaded from object storage into a local folder laid
out like the source, which the target then reads read-only exactly as it reads a local repository.

One folder per database's verification (`rp-stage-*` under s3.staging_dir, by default
<state_dir>/staging), recorded among the leftovers like a local target's folder so `restoreproof reap`
removes it after a killed run; the pipeline removes it when the database's verification ends.

The download is boto3's transfer manager (s3transfer), `s3.threads` transfers at once on the source's
own client (its connection pool is sized to the same threads), large objects fetched in ranged parts.

What is checked, and where:

- here, every object: every GET carries If-Match with the ETag the listing gave when the plan was
  made (the transfer manager adds it to ranged parts itself once told the object's ETag; an event
  handler adds it to the whole-object GETs it sends without one), so an object rewritten since the
  plan is an error naming its URL, never other bytes staged as the same file, and an object deleted
  since is too (an object a store listed without an ETag is held to its listed LastModified instead,
  If-Unmodified-Since, to the second, and counted apart in the phase's details); the file written has
  the listed size; where S3 keeps a full-object checksum of the object (CRC32, SHA-1, SHA-256; CRC32C
  and CRC-64/NVME where awscrt is installed) the staged bytes are hashed and compared with it. The
  value is the one the whole-object GET's response carried (botocore has then also checked the body
  against it while reading), or a HEAD's for an object fetched in ranged parts (whose responses carry
  none);
- not here, and said in the phase's details: a composite checksum (a multipart upload's checksum of
  its parts' checksums, which only the parts' boundaries could recompute), CRC32C and CRC-64/NVME
  without awscrt, and objects S3 keeps no checksum for (their size and ETag only);
- after this, by the engines, on the staged copy: the backup tool's own checks of its files (for a
  pgBackRest repository, `pgbackrest verify` in the target checks every staged backup file against
  the SHA-1 and size its manifest records, and every staged WAL segment against the checksum in its
  name), the checks of the backup files without a server, and the evidence's SHA-256 of every file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from io import RawIOBase
from pathlib import Path
from typing import Any, TypeVar

from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.compat import HAS_CRT
from botocore.exceptions import BotoCoreError, ClientError, FlexibleChecksumError
from botocore.httpchecksum import Crc32Checksum, Sha1Checksum, Sha256Checksum
from s3transfer.exceptions import RetriesExceededError, S3DownloadFailedError
from s3transfer.subscribers import BaseSubscriber

from verification.atomic import write_text_atomically
from verification.errors import SourceError
from verification.model import IncompleteUpload, PhaseName, PhaseStatus, PhaseTiming
from verification.phase_events import ByteCounter
from verification.redaction import Redactor
from verification.sources.base import Fingerprint
from verification.sources.local import LocalSource
from verification.sources.s3 import ObjectInfo, S3Source, whole_seconds
from verification.sources.s3_errors import MISSING_KEY, client_error_code, translate

T = TypeVar("T")
R = TypeVar("R")

# Objects up to this size are fetched by one GET; larger ones in parts of this size, in parallel.
PART_BYTES = 8 * 1024 * 1024
READ_BYTES = 1024 * 1024  # reading a staged file back for its checksum
STATE_KIND = "staging"
FOLDER_PREFIX = "rp-stage-"
# The staged copy is read by the target's own OS user (a container's postgres or mssql, the local
# target's postgres): its folders open to read and traverse, its files to read. The staging folder
# above the copies lets others pass, not list: a copy is reached only by its (random) name.
FOLDER_MODE, FILE_MODE, BASE_MODE = 0o755, 0o644, 0o711

CHECKSUM_CLASSES: dict[str, Callable[[], Any]] = {"CRC32": Crc32Checksum, "SHA1": Sha1Checksum,
                                                  "SHA256": Sha256Checksum}
if HAS_CRT:  # pragma: no cover - awscrt is not among restoreproof's requirements
    from botocore.httpchecksum import CrtCrc32cChecksum, CrtCrc64NvmeChecksum

    CHECKSUM_CLASSES |= {"CRC32C": CrtCrc32cChecksum, "CRC64NVME": CrtCrc64NvmeChecksum}
ALGORITHMS = ("CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1")

# How botocore says a body did not match the checksum its response carried.
BOTOCORE_MISMATCH = re.compile(r"Expected checksum (\S+) did not match calculated checksum: (\S+)")
NOT_CHECKED_COMPOSITE = "composite (a multipart upload's checksum of its parts' checksums)"
NOT_CHECKED_NONE = "no checksum kept by S3 (size and ETag only)"


# What the target sees of the source, said in the phase: a check of the whole repository run in it
# covers the staged files.
SCOPE = "the plan's files only: a check the target runs over the whole repository covers these"


@dataclass
class StagedCopy:
    """The plan's files as staged: `root` laid out like the source, removed by `remove()`."""

    root: Path
    source_url: str
    files: tuple[str, ...]
    bytes: int
    seconds: float
    threads: int
    state_file: Path
    # What was checked per object (If-Match, size, checksums by algorithm) and what was not, and why.
    checks: dict[str, Any] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)

    def phase(self) -> PhaseTiming:
        """The `download` phase, measured."""
        return PhaseTiming(PhaseName.DOWNLOAD, PhaseStatus.MEASURED, seconds=self.seconds, bytes=self.bytes,
                           details={"objects": len(self.files), "bytes": self.bytes, "threads": self.threads,
                                    "source": self.source_url, "requests": self.requests, "checked": self.checks,
                                    "staged_in": str(self.root), "scope": SCOPE})

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self.root.exists():
            raise SourceError(f"cannot remove the staged copy {self.root}; `restoreproof reap` removes it")
        self.state_file.unlink(missing_ok=True)


class StagedSource:
    """The source as a restore from a staged copy reads it: the staged files from the local copy, every
    other answer (the catalogue, files outside the plan) from the source itself. What the engines'
    checks of the backup files and the evidence's hashes read is then the bytes the restore read."""

    def __init__(self, origin: S3Source, copy: StagedCopy) -> None:
        self.origin = origin
        self.copy = copy
        self.local = LocalSource(copy.root)
        self._staged = frozenset(copy.files)

    def describe(self) -> str:
        return f"{self.origin.describe()} (staged in {self.copy.root})"

    def exists(self, path: str) -> bool:
        return self.origin.exists(path)

    def is_dir(self, path: str) -> bool:
        return self.origin.is_dir(path)

    def list_dir(self, path: str) -> list[str]:
        return self.origin.list_dir(path)

    def size(self, path: str) -> int:
        return self.origin.size(path)

    def modified(self, path: str) -> datetime | None:
        return self.origin.modified(path)

    def incomplete_uploads(self) -> list[IncompleteUpload]:
        return self.origin.incomplete_uploads()

    def identity(self) -> str:
        # The object store's: a staged copy holds the very objects (held to their listed ETags).
        return self.origin.identity()

    def fingerprint(self, path: str) -> Fingerprint | None:
        return self.origin.fingerprint(path)

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        if path in self._staged:
            return self.local.read_bytes(path, offset, length)
        return self.origin.read_bytes(path, offset, length)

    def open_binary(self, path: str) -> RawIOBase | None:
        """A staged file opened for one long scan; None for one read from object storage (ranged GETs)."""
        return self.local.open_binary(path) if path in self._staged else None

    @property
    def parallel_reads(self) -> int:
        return self.origin.parallel_reads


class _Listed(BaseSubscriber):  # type: ignore[misc]
    """Tells the transfer manager the object's size and ETag as listed: no HEAD before the download,
    and If-Match with that ETag on every ranged part."""

    def __init__(self, info: ObjectInfo, moved: ByteCounter | None = None) -> None:
        self.info = info
        self.moved = moved

    def on_progress(self, future: Any, bytes_transferred: int, **kwargs: Any) -> None:
        if self.moved is not None:
            self.moved.add(bytes_transferred)

    def on_queued(self, future: Any, **kwargs: Any) -> None:
        future.meta.provide_transfer_size(self.info.size)
        # Without one (a store that lists none), the manager HEADs the object for its ETag itself: its
        # ranged parts then carry that one, and the guard holds every GET to the listed LastModified.
        if self.info.etag is not None:
            future.meta.provide_object_etag(self.info.etag)


class _Guard:
    """Handlers on the source's client for one staging: If-Match on the listed ETag for the GETs the
    transfer manager sends without one (whole-object GETs), If-Unmodified-Since the listed
    LastModified on every GET of an object listed without an ETag, and the checksum each whole-object
    response carries, by key."""

    def __init__(self, bucket: str, infos: Iterable[ObjectInfo]) -> None:
        self.bucket = bucket
        self.infos = {info.key: info for info in infos}
        self.checksums: dict[str, tuple[str, str, str | None]] = {}
        self._lock = threading.Lock()
        self.id = f"restoreproof-staging-{id(self)}"

    def before(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        key = params.get("Key")
        if params.get("Bucket") != self.bucket or key not in self.infos:
            return
        info = self.infos[key]
        if info.etag is not None:
            params.setdefault("IfMatch", info.etag)
        else:
            params.setdefault("IfUnmodifiedSince", whole_seconds(info.last_modified))
        context["restoreproof_staged_key"] = key

    def after(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        key = context.get("restoreproof_staged_key")
        if key is None or "ContentRange" in parsed:  # a ranged part carries no full-object checksum
            return
        found = next(((name, str(parsed[f"Checksum{name}"])) for name in ALGORITHMS if parsed.get(f"Checksum{name}")),
                     None)
        if found is not None:
            with self._lock:
                self.checksums[key] = (found[0], found[1], parsed.get("ChecksumType"))

    def register(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build.s3.GetObject", self.before, unique_id=f"{self.id}-b")
        client.meta.events.register("after-call.s3.GetObject", self.after, unique_id=f"{self.id}-a")

    def unregister(self, client: Any) -> None:
        client.meta.events.unregister("before-parameter-build.s3.GetObject", unique_id=f"{self.id}-b")
        client.meta.events.unregister("after-call.s3.GetObject", unique_id=f"{self.id}-a")


class _Stopped(Exception):
    """A staged file's check stopped because another's failed (never raised to a caller)."""


def each(pool: ThreadPoolExecutor, work: Callable[[T], R], items: Sequence[T],
         stop: threading.Event | None = None) -> list[R]:
    """work(item) for every item on the pool, results in the items' order. The first failure is raised
    at once: what has not started is cancelled, and `stop` is set (a long check reads it between
    chunks) so the checks running end at their next chunk; of the failures, the first in order."""
    stop = stop or threading.Event()

    def one(item: T) -> R:
        if stop.is_set():
            raise _Stopped()
        try:
            return work(item)
        except _Stopped:
            raise
        except BaseException:
            stop.set()  # by the thread that failed, before it takes another item
            raise

    futures: list[Future[R]] = [pool.submit(one, item) for item in items]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
    finally:
        stop.set()
        for future in futures:
            future.cancel()
        wait(futures)  # the running ones end (at their next chunk) before anything is removed
    failures = [error for future in futures if not future.cancelled()
                and (error := future.exception()) is not None and not isinstance(error, _Stopped)]
    if failures:
        raise failures[0]
    return [future.result() for future in futures]


def transfer_config(threads: int) -> TransferConfig:
    """The transfer manager's settings for a source of `threads` parallel requests (also what the
    plain download the benchmark compares with uses)."""
    return TransferConfig(max_concurrency=threads, multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES,
                          # The classic manager: it honours the ETag given (If-Match on every part).
                          preferred_transfer_client="classic")


class Stager:
    """Stages plans' files from one object-storage source into folders under `folder`, each recorded in
    `leftovers` (the folder `restoreproof reap` reads) until it is removed."""

    def __init__(self, source: S3Source, folder: Path, leftovers: Path,
                 holder: Callable[[], dict[str, Any]] | None = None) -> None:
        self.source = source
        self.folder = folder
        self.leftovers = leftovers
        # Who stages (the lease holder's host, pid and process identity, as the reaper judges it);
        # given by the caller, which knows the process's lease (sources know no targets).
        self.holder = holder or (lambda: {"pid": os.getpid()})
        self._scrub = Redactor(secrets=source.secrets())

    def stage(self, files: Sequence[str], run_id: str, database: str,
              progress: Callable[[str], None] | None = None) -> StagedCopy:
        """Download `files` (source-relative paths) into a new folder; a SourceError names the first
        object that changed, vanished, or did not match its size or checksum, and nothing is left."""
        paths = list(dict.fromkeys(files))
        # As listed when the plan was made (no request): the ETag and size every check holds each to.
        infos = {path: self.source.listed(path) for path in paths}
        total = sum(info.size for info in infos.values())
        copy = self._make_folder(run_id, database, paths, total)
        if progress is not None:
            progress(f"{database}: downloading {len(paths)} objects ({total / 2**20:.1f} MiB) from "
                     f"{self.source.describe()} into {copy.root}")
        before = self.source.stats.requests
        started = time.monotonic()
        moved = ByteCounter(database, PhaseName.DOWNLOAD, total)  # shown live, as the parts arrive
        try:
            guard = self._download(copy.root, infos, moved)
            copy.checks = self._check(copy.root, infos, guard)
        except BaseException:
            copy.remove()
            raise
        moved.close()
        copy.seconds = time.monotonic() - started
        made = self.source.stats.requests - before
        copy.requests = dict(sorted(made.items()))
        return copy


    # -- the folder --------------------------------------------------------------------------------

    def _make_folder(self, run_id: str, database: str, paths: list[str], total: int) -> StagedCopy:
        if not self.folder.exists():
            # Only a folder made here gets its mode set: a configured folder that exists (/var/tmp, a
            # shared scratch disk) keeps its own, sticky bit and all.
            self.folder.mkdir(parents=True)
            os.chmod(self.folder, BASE_MODE)
        self.leftovers.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=self.folder))
        state_file = self.leftovers / f"{root.name}.json"
        write_text_atomically(state_file, json.dumps({"run_id": run_id, "database": database, "folder": str(root),
                                                      **self.holder(), "kind": STATE_KIND}))
        copy = StagedCopy(root, self.source.describe(), tuple(paths), total, 0.0, self.source.threads, state_file)
        try:
            os.chmod(root, FOLDER_MODE)
            made: set[Path] = set()
            for path in paths:
                self._inside(root, path)
                for parent in reversed(Path(path).parents[:-1]):
                    if parent not in made:
                        (root / parent).mkdir(exist_ok=True)
                        os.chmod(root / parent, FOLDER_MODE)  # whatever the umask
                        made.add(parent)
        except BaseException:  # a path refused or a folder not made: the copy and its record go at once
            copy.remove()
            raise
        return copy

    @staticmethod
    def _inside(root: Path, path: str) -> Path:
        target = (root / path).resolve()
        if root.resolve() not in target.parents:
            raise SourceError(f"path {path!r} leaves the staging folder {root}")
        return target

    # -- the download ------------------------------------------------------------------------------

    def _download(self, root: Path, infos: dict[str, ObjectInfo], moved: ByteCounter | None = None) -> _Guard:
        client = self.source.client
        guard = _Guard(self.source.bucket, infos.values())
        guard.register(client)
        try:
            # As a context manager: leaving it by an exception cancels every transfer not done and waits
            # for those running (s3transfer 0.19's shutdown(cancel=True) passes its flag as the message).
            with create_transfer_manager(client, transfer_config(self.source.threads)) as manager:
                futures = [(info, manager.download(
                    self.source.bucket, info.key, str(root / path),
                    # Asked for, so a whole-object response carries the checksum S3 keeps whatever
                    # the client's response_checksum_validation says.
                    extra_args={"ChecksumMode": "ENABLED"}, subscribers=[_Listed(info, moved)]))
                    for path, info in infos.items()]
                for info, future in futures:
                    try:
                        future.result()
                    except (ClientError, BotoCoreError, RetriesExceededError, S3DownloadFailedError) as exc:
                        raise self._error(exc, info, guard) from None
        finally:
            guard.unregister(client)
        return guard

    def _error(self, exc: BaseException, info: ObjectInfo, guard: _Guard) -> SourceError:
        if isinstance(exc, S3DownloadFailedError) and info.etag is None:  # s3transfer's word for any 412
            return SourceError(f"{info.url} changed since the source was listed (modified after its listed "
                               f"LastModified {whole_seconds(info.last_modified).isoformat()}, the store having "
                               "listed no ETag; GetObject with If-Unmodified-Since: PreconditionFailed, HTTP "
                               "412); not staged")
        if isinstance(exc, S3DownloadFailedError):  # what s3transfer makes of a 412 to If-Match
            return SourceError(f"{info.url} changed since the source was listed (its ETag is no longer the one "
                               "listed; GetObject with If-Match: PreconditionFailed, HTTP 412); not staged")
        if isinstance(exc, FlexibleChecksumError):  # botocore's own check of a whole-object GET's body
            # From the response where the guard saw it, else from the listing (botocore may raise first).
            algorithm = guard.checksums.get(info.key, ("",))[0] or info.checksum_algorithm or ""
            said = BOTOCORE_MISMATCH.search(str(exc))
            values = f"{said[1]} kept, {said[2]} computed" if said else self._scrub(str(exc))
            return SourceError(f"{info.url}: the bytes downloaded do not match the {algorithm or 'checksum'} "
                               f"{'checksum ' if algorithm else ''}S3 keeps for the object ({values}); not staged")
        if isinstance(exc, RetriesExceededError):
            cause = exc.last_exception
            return SourceError(f"{info.url}: the download kept failing ({type(cause).__name__}: "
                               f"{self._scrub(str(cause))}); not staged")
        if isinstance(exc, ClientError) and (client_error_code(exc)[0] in MISSING_KEY
                                             or client_error_code(exc)[1] == 404):
            code, status = client_error_code(exc)
            return SourceError(f"{info.url}: gone since the source was listed (GetObject: {code}, HTTP {status})")
        return translate(exc, url=info.url, operation="GetObject", endpoint=self.source.endpoint, scrub=self._scrub,
                         attempts=self.source.settings.max_attempts)

    # -- the checks --------------------------------------------------------------------------------

    def _check(self, root: Path, infos: dict[str, ObjectInfo], guard: _Guard) -> dict[str, Any]:
        for path, info in infos.items():
            staged = root / path
            size = staged.stat().st_size
            if size != info.size:
                raise SourceError(f"{info.url}: {size} bytes downloaded, {info.size} listed; not staged")
            os.chmod(staged, FILE_MODE)
        # The checksum S3 keeps: from the GET's response, else (parts carry none) from a HEAD, which
        # also holds the object to the listed ETag.
        wanted: dict[str, tuple[str, str, str | None] | None] = {}
        heads = [path for path, info in infos.items() if info.key not in guard.checksums and info.checksum_algorithm]
        stop = threading.Event()
        with ThreadPoolExecutor(self.source.threads, thread_name_prefix="restoreproof-stage") as pool:
            for path, fresh in zip(heads, each(pool, self.source.object_info, heads), strict=True):
                if fresh.checksum is not None and fresh.checksum_algorithm is not None:
                    wanted[path] = (fresh.checksum_algorithm, fresh.checksum, fresh.checksum_type)
            for path, info in infos.items():
                if path not in wanted:
                    wanted[path] = guard.checksums.get(info.key)
            verdicts = each(pool, lambda item: self._verify(root / item[0], infos[item[0]], item[1], stop),
                            list(wanted.items()), stop)
        checked: Counter[str] = Counter()
        not_checked: Counter[str] = Counter()
        for verified, why in verdicts:
            if verified is not None:
                checked[verified] += 1
            else:
                not_checked[why] += 1
        held = sum(1 for info in infos.values() if info.etag is not None)
        checks: dict[str, Any] = {"if_match_etag": held, "size": len(infos), "checksum": dict(sorted(checked.items())),
                                  "checksum_not_checked": dict(sorted(not_checked.items()))}
        if held < len(infos):  # objects a store listed without an ETag
            checks["if_unmodified_since"] = len(infos) - held
        return checks

    @staticmethod
    def _verify(staged: Path, info: ObjectInfo, kept: tuple[str, str, str | None] | None,
                stop: threading.Event | None = None) -> tuple[str | None, str]:
        """(the algorithm checked, "") or (None, why not); a SourceError when the bytes do not match.
        `stop`, once set (another file failed), ends the read at its next chunk."""
        if kept is None:
            return None, NOT_CHECKED_NONE
        algorithm, value, kind = kept
        multipart = info.etag is not None and "-" in info.etag.strip('"')
        if "-" in value or kind == "COMPOSITE" or (multipart and kind != "FULL_OBJECT"):
            return None, NOT_CHECKED_COMPOSITE
        make = CHECKSUM_CLASSES.get(algorithm)
        if make is None:
            return None, f"{algorithm} (computing it needs awscrt, not installed)"
        checksum = make()
        with staged.open("rb") as handle:
            for chunk in iter(lambda: handle.read(READ_BYTES), b""):
                if stop is not None and stop.is_set():
                    raise _Stopped()
                checksum.update(chunk)
        computed = str(checksum.b64digest())
        if computed != value:
            raise SourceError(f"{info.url}: the bytes downloaded do not match the {algorithm} checksum S3 keeps "
                              f"for the object ({value} kept, {computed} computed); not staged")
        return algorithm, ""
