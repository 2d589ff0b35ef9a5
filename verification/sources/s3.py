"""Backups in S3 (or any S3-compatible store): a `Source` for s3://bucket/prefix.

The prefix is listed once, when the source is opened, into an in-memory catalogue (key, size, ETag,
last modified, checksum algorithm): every question about the tree (exists, is_dir, list_dir, size,
modified) is answered from it, without a request. Listing runs in parallel: the folders a few levels
down are found with Delimiter '/' (Ola Hallengren's <server>/<db>/FULL|DIFF|LOG/, pgBackRest's
archive/<stanza>/<version>/<timeline>/ and backup/<stanza>/<label>/), then each is listed whole, each
by its own paginator, in a thread pool whose size the connection pool matches.

Reads are ranged GETs (one GET for a whole small file such as backup.info), each made with If-Match
on the ETag listed: an object rewritten since the listing is an error naming it, never other bytes
read as the same file. A store that lists an object without an ETag (some S3-compatible ones) has it
read with If-Unmodified-Since its listed LastModified instead, and checked for a change by its size,
LastModified (to the second: HTTP dates have no finer unit) and the checksum S3 keeps where one is
known; such an object has no fingerprint (nothing tells two versions written in the same second
apart), so nothing found in it is kept against one. An object listed without a Key, Size or
LastModified is a SourceError naming it and the field.

The first 16 KiB of an object are fetched once and kept for the small reads at its start (a SQL
Server header is read as 8, 16, then 16 KiB from offset 0), so a backup's headers cost two GETs, its
head and its trailer; an object of at most 64 KiB is fetched whole, once.

Unfinished multipart uploads under the prefix (what a failed backup leaves) are listed too.

Objects in an archive storage class (GLACIER, DEEP_ARCHIVE, as the listing names each object's class)
cannot be read until they are restored: each is asked once, by a HEAD, whether a restored copy is there
(`x-amz-restore: ongoing-request="false"`); one not restored, or still being restored, is kept in
`archived` with why, and a read of it is an ArchivedObjectError naming it and its class, never a GET
answered "access denied". GLACIER_IR (Instant Retrieval) is read like any other class. An object in an
Intelligent-Tiering archive tier (listed as INTELLIGENT_TIERING) is known as such only when a GET is
refused with InvalidObjectState: that read is an ArchivedObjectError too.
"""

from __future__ import annotations

import logging
import platform
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import boto3
import botocore
import botocore.session
import botocore.utils
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential
from urllib3.exceptions import ProtocolError

from verification import __version__
from verification.config import S3Settings
from verification.errors import ArchivedObjectError, SourceError
from verification.model import IncompleteUpload
from verification.redaction import MIN_SECRET_LENGTH, Redactor
from verification.sources.base import Fingerprint
from verification.sources.s3_errors import S3Error, translate
from verification.sources.s3_url import S3Url, parse_s3_url

T = TypeVar("T")
R = TypeVar("R")

# Reads that fall within an object's first HEAD_BYTES are served from one GET of those bytes; an
# object of at most SMALL_BYTES is fetched whole by its first read instead (one GET, not a head and a
# trailer: small log backups are most of an Ola Hallengren folder).
HEAD_BYTES = 16 * 1024
SMALL_BYTES = 64 * 1024
HEADS_KEPT = 256  # at most 16 MiB of them in memory
# How far down folders are found with a delimiter before each is listed whole, and when to stop
# early: enough folders to keep every thread busy.
DISCOVERY_DEPTH = 4
FOLDERS_PER_THREAD = 4
# Storage classes whose objects S3 serves only once restored (GLACIER_IR, Instant Retrieval, is read
# as it is): an object listed in one is asked whether a restored copy is there.
ARCHIVE_CLASSES = frozenset({"GLACIER", "DEEP_ARCHIVE"})
# Errors of reading a response body: botocore retries a request, not the stream after it.
BODY_ERRORS = (IncompleteReadError, ReadTimeoutError, ResponseStreamingError, ProtocolError)


class _BodyCut(Exception):
    """A GET's body stopped before its end (retried here: botocore retried the request only)."""
THREAD_PREFIX = "restoreproof-s3"
# boto3 adds its own "Botocore/<version>" after it.
USER_AGENT = f"restoreproof/{__version__} Python/{platform.python_version()}"

# botocore logs every request's headers at DEBUG, the signing access key among them: kept out of a
# log whose root is at DEBUG unless botocore's own level was set on purpose.
for _name in ("botocore", "boto3", "s3transfer", "urllib3"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.INFO)


@dataclass(frozen=True)
class ObjectInfo:
    """One object as the listing (and, for its checksum value, a HEAD) found it."""

    url: str
    key: str
    size: int
    # As S3 gives it (quoted); None where the store gives none (absent or empty).
    etag: str | None
    last_modified: datetime
    # S3's additional checksum: its algorithm (CRC32, CRC32C, CRC64NVME, SHA1, SHA256) as listed, and
    # its value (base64, as S3 gives it) once a HEAD asked for it; type FULL_OBJECT or COMPOSITE.
    checksum_algorithm: str | None = None
    checksum: str | None = None
    checksum_type: str | None = None
    # As the listing names it (STANDARD, GLACIER, ...); None where a store lists none.
    storage_class: str | None = None


def etag_of(value: object) -> str | None:
    """An ETag as a response gives it, None where it gives none: absent, or empty ('""')."""
    text = "" if value is None else str(value)
    return text if text.strip('"').strip() else None


def required(response: dict[str, Any], name: str, url: str, operation: str) -> Any:
    """A field every S3 response of `operation` about an object carries; a SourceError naming the object
    and the field where a store left it out (never a bare KeyError)."""
    value = response.get(name)
    if value is None:
        raise SourceError(f"{url}: the S3 endpoint's {operation} response gives no {name} for the object; "
                          f"restoreproof cannot read an object without its {name}")
    return value


def whole_seconds(moment: datetime) -> datetime:
    """A time as HTTP dates carry it: a listing may give milliseconds, a HEAD gives whole seconds."""
    return moment.replace(microsecond=0)


def restore_state(header: str | None) -> str | None:
    """What an archived object's `x-amz-restore` header (a HEAD's `Restore`) says: None when a restored
    copy can be read now, else why not."""
    if header is None:
        return "has not been restored"
    said = header.replace(" ", "").lower()
    if 'ongoing-request="true"' in said:
        return "is being restored (the restore is still in progress)"
    if 'ongoing-request="false"' in said:
        return None
    return f"gives a restore status restoreproof does not know ({header!r})"


def archived_reason(url: str, storage_class: str | None, state: str) -> str:
    """Why an archived object cannot be read, naming it and its storage class."""
    kind = f"the archive storage class {storage_class}" if storage_class else "an archive storage class"
    return (f"{url} is in {kind} and {state}: it cannot be read until it is restored (S3 RestoreObject, "
            "e.g. `aws s3api restore-object`) and the restore has completed")


@dataclass
class S3Stats:
    """Requests made (by S3 operation, every HTTP attempt counted) and bytes of object data read."""

    requests: Counter[str] = field(default_factory=Counter)
    bytes_read: int = 0
    bytes_by_path: Counter[str] = field(default_factory=Counter)
    # GETs without a Range header (a whole object read), by path.
    whole_reads: Counter[str] = field(default_factory=Counter)

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    def copy(self) -> S3Stats:
        return S3Stats(Counter(self.requests), self.bytes_read, Counter(self.bytes_by_path), Counter(self.whole_reads))


_LOADER: list[Any] = []  # botocore's service models, parsed once per process
_LOADER_LOCK = threading.Lock()


def parse_timestamp(text: str) -> datetime:
    """S3's two timestamp forms, ISO 8601 in listings (2026-11-25T01:33:02.000Z) and HTTP dates in
    headers (Wed, 25 Nov 2026 01:33:02 GMT), parsed by the standard library in 0.1 and 3 us where
    botocore's default (dateutil) takes 37 and 49 us: per object listed and per GET. Anything else
    goes to botocore's own parser, so the values are the same as without this."""
    try:
        found = datetime.fromisoformat(text) if text[:1].isdigit() else parsedate_to_datetime(text)
        if found.tzinfo is not None:
            return found
    except (TypeError, ValueError):
        pass
    return botocore.utils.parse_timestamp(text)  # type: ignore[no-any-return]


def _botocore_session() -> botocore.session.Session:
    """A fresh botocore session (credentials and configuration read anew) sharing the parsed service
    models: parsing S3's model costs most of a client's making (about 60 ms of 80 here); its
    responses' timestamps parsed by parse_timestamp."""
    session = botocore.session.get_session()
    with _LOADER_LOCK:
        if _LOADER:
            session.register_component("data_loader", _LOADER[0])
        else:
            _LOADER.append(session.get_component("data_loader"))
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
    return session


def _client(settings: S3Settings) -> tuple[Any, list[str]]:
    """A boto3 S3 client from the settings and the standard chain, and every credential it will sign
    with (to keep out of every message)."""
    session = boto3.session.Session(
        botocore_session=_botocore_session(), profile_name=settings.profile, region_name=settings.region,
        aws_access_key_id=settings.access_key_id.get_secret_value() if settings.access_key_id else None,
        aws_secret_access_key=settings.secret_access_key.get_secret_value() if settings.secret_access_key else None)
    credentials = session.get_credentials()
    secrets = []
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        secrets = [s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s]
    config = Config(
        connect_timeout=settings.connect_timeout, read_timeout=settings.read_timeout,
        retries={"mode": "standard", "total_max_attempts": settings.max_attempts},
        # One connection per thread, and a few for the HEADs and GETs made beside the listing.
        max_pool_connections=settings.threads + 4,
        s3={"addressing_style": settings.addressing_style}, tcp_keepalive=True,
        # A fixed User-Agent: botocore otherwise builds its own twice per request (about 14 % of its
        # CPU per GET here), to report which of its features each request used.
        user_agent=USER_AGENT,
        # Every call is restoreproof's own, with arguments of known types: botocore's check of them
        # against S3's model is about a tenth of its CPU per GET. S3 still refuses what is wrong.
        parameter_validation=False)
    verify: bool | str | None = None  # None: boto3's own (AWS_CA_BUNDLE, the system's store)
    if not settings.verify_tls:
        verify = False
    elif settings.ca_bundle is not None:
        if not settings.ca_bundle.is_file():
            raise SourceError(f"s3.ca_bundle {settings.ca_bundle} does not exist or is not a file")
        verify = str(settings.ca_bundle)
    client = session.client("s3", endpoint_url=settings.endpoint_url, config=config, verify=verify)
    return client, secrets


class S3Source:
    """A read-only tree of the objects under s3://bucket/prefix, catalogued once when opened.

    `client` is a boto3 S3 client (thread-safe) with the source's settings, for whoever downloads
    the plan's files; `key(path)` and `url(path)` name an object of the source."""

    def __init__(self, url: str, settings: S3Settings | None = None) -> None:
        self.settings = settings or S3Settings()
        self.location: S3Url = parse_s3_url(url)
        self.bucket = self.location.bucket
        self.prefix = self.location.prefix
        self.threads = self.settings.threads
        self._stats = S3Stats()
        self._lock = threading.Lock()
        self._heads: OrderedDict[str, bytes] = OrderedDict()
        self._objects: dict[str, ObjectInfo] = {}
        self._children: dict[str, set[str]] = {"": set()}
        # Keys that are no '/'-separated path (an empty, '.' or '..' segment): not addressable as
        # files of a folder tree, named here rather than silently dropped.
        self.skipped: list[str] = []
        self._uploads: list[IncompleteUpload] = []
        # Why the unfinished multipart uploads could not be listed (None: they were).
        self.uploads_unlisted: str | None = None
        # Objects in an archive storage class with no restored copy to read now: path -> why (naming
        # the object and its class). Listed as files all the same: a backup that exists but cannot be
        # read now is neither missing nor damaged.
        self.archived: dict[str, str] = {}
        self._scrub = Redactor(secrets=[])
        try:
            self.client, secrets = _client(self.settings)
        except (BotoCoreError, ValueError) as exc:
            raise self._error(exc, "opening an S3 client", str(self.location)) from None
        kept = {secret for secret in secrets if len(secret) >= MIN_SECRET_LENGTH}  # as the run's redactor does
        self._scrub = Redactor(secrets=sorted(kept, key=len, reverse=True))
        self.endpoint = str(self.client.meta.endpoint_url)
        self.client.meta.events.register("before-send.s3", self._count_request)
        try:
            self._catalogue()
        except BaseException:
            self.close()
            raise

    # -- the Source protocol ---------------------------------------------------------------------

    def describe(self) -> str:
        return str(self.location)

    def exists(self, path: str) -> bool:
        path = self._path(path)
        return path in self._objects or path in self._children

    def is_dir(self, path: str) -> bool:
        return self._path(path) in self._children

    def list_dir(self, path: str) -> list[str]:
        return sorted(self._children.get(self._path(path), ()))

    def size(self, path: str) -> int:
        return self._entry(path).size

    def modified(self, path: str) -> datetime | None:
        entry = self._objects.get(self._path(path))
        return entry.last_modified if entry else None

    def incomplete_uploads(self) -> list[IncompleteUpload]:
        """The unfinished multipart uploads under the prefix, as listed when the source was opened."""
        return list(self._uploads)

    def identity(self) -> str:
        # The endpoint too: a bucket of one name on another store (MinIO beside AWS) is another bucket.
        return f"{self.endpoint} {self.location}"

    def fingerprint(self, path: str) -> Fingerprint | None:
        """The ETag and size listed. S3 gives every object written an ETag derived from what was
        written (the MD5 of its bytes, of its parts' MD5s for a multipart upload, a value of its own
        for an encrypted one), so an object written again with other bytes has another ETag:
        `reliable`; and every read is made If-Match on it, so what was read is what the fingerprint
        names. (ListObjectsV2 gives no version id; a new version of an object has its own ETag.)"""
        entry = self._objects.get(self._path(path))
        if entry is None or entry.etag is None:
            return None  # a store that gives no ETag cannot tell versions apart
        return Fingerprint(f"etag={entry.etag};size={entry.size}", reliable=True)

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        entry = self._entry(path)
        if (why := self.archived.get(self._path(path))) is not None:
            raise ArchivedObjectError(why, entry.storage_class)  # a GET would be refused: none is made
        if offset < 0 or (length is not None and length < 0):
            raise ValueError(f"a negative offset or length reading {entry.url}")
        end = entry.size if length is None else min(entry.size, offset + length)
        if offset >= end:
            return b""  # never a zero-length or out-of-range GET: S3 answers those with an error
        kept = entry.size if entry.size <= SMALL_BYTES else HEAD_BYTES
        if end <= kept:
            return self._head(self._path(path), entry, kept)[offset:end]
        return self._get(self._path(path), entry, offset, end)

    # -- beyond the protocol: what a restore from S3 needs ------------------------------------------

    @property
    def parallel_reads(self) -> int:
        """How many reads to have in flight at once: S3 rewards parallel requests (a local disk does not)."""
        return self.threads

    def key(self, path: str) -> str:
        return self.location.key(self._path(path))

    def url(self, path: str) -> str:
        return self.location.of(self._path(path))

    def paths(self) -> list[str]:
        """Every object's path, sorted."""
        return sorted(self._objects)

    def listed(self, path: str) -> ObjectInfo:
        """The object as the listing found it, without a request: what a download holds it to."""
        return self._entry(path)

    def object_info(self, path: str) -> ObjectInfo:
        """Size, ETag and checksum of an object as listed. Where the listing names a checksum algorithm,
        its value is fetched once with a HEAD (S3 does not list values)."""
        path = self._path(path)
        entry = self._entry(path)
        if entry.checksum_algorithm is None or entry.checksum is not None:
            return entry
        fresh = self._head_object(path, entry)
        self._check_same(entry, fresh)
        known = replace(entry, checksum=fresh.checksum, checksum_type=fresh.checksum_type or entry.checksum_type)
        with self._lock:
            self._objects[path] = known
        return known

    def check_unchanged(self, paths: Iterable[str]) -> dict[str, ObjectInfo]:
        """HEAD each object (in parallel): its size, ETag (else LastModified), checksum and storage class
        now, against the listing (`_differences`). Any object gone, changed or moved into an archive
        storage class is a SourceError naming each (its URL and what changed); else the fresh infos,
        with their checksums."""
        wanted = [self._path(p) for p in paths]
        entries = {path: self._entry(path) for path in wanted}
        changed: list[str] = []
        fresh: dict[str, ObjectInfo] = {}

        def head(path: str) -> tuple[str, ObjectInfo | None, str | None]:
            try:
                return path, self._head_object(path, entries[path]), None
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "404", "NotFound"):
                    return path, None, f"{entries[path].url}: gone since the source was listed"
                raise

        for path, info, gone in self._parallel(head, wanted):
            if gone is not None:
                changed.append(gone)
            elif info is not None:
                difference = self._differences(entries[path], info)
                if difference:
                    changed.append(f"{info.url}: {difference}")
                fresh[path] = info
        if changed:
            raise SourceError(f"{len(changed)} object(s) of {self.describe()} changed since the source was "
                              "listed: " + "; ".join(changed))
        return fresh

    @property
    def stats(self) -> S3Stats:
        """A copy of the counts so far: requests by operation, bytes read (in all, by path)."""
        with self._lock:
            return self._stats.copy()

    def secrets(self) -> list[str]:
        """The credentials this source signs with (also those from the AWS chain), for a redactor."""
        return list(self._scrub.secrets)

    def close(self) -> None:
        """Close the client's connections (the source answers no more reads after this)."""
        client = getattr(self, "client", None)
        if client is not None:
            client.close()

    def __enter__(self) -> S3Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- listing ---------------------------------------------------------------------------------

    def _catalogue(self) -> None:
        """List the prefix once: folders found level by level with a delimiter, each then listed whole,
        all in parallel; the unfinished multipart uploads beside them."""
        with ThreadPoolExecutor(self.threads, thread_name_prefix=THREAD_PREFIX) as pool:
            uploads = pool.submit(self._list_uploads)
            try:
                frontier, depth = [self.prefix], 0
                while frontier and depth < DISCOVERY_DEPTH and len(frontier) < self.threads * FOLDERS_PER_THREAD:
                    found: list[str] = []
                    for objects, folders in self._parallel(lambda p: self._list(p, True), frontier, pool):
                        self._add(objects)
                        found += folders
                    frontier, depth = found, depth + 1
                for objects, _ in self._parallel(lambda p: self._list(p, False), frontier, pool):
                    self._add(objects)
                self.archived = self._archive_states(pool)
                self._uploads = uploads.result()
            except BaseException:
                uploads.cancel()
                raise
        if not self._objects and self.skipped:
            raise SourceError(f"{self.describe()} holds {len(self.skipped)} objects, none with a key that is a path "
                              f"(an empty, '.' or '..' segment), e.g. {self.skipped[0]!r}: nothing can be read")
        if not self._objects:
            pending = f" ({len(self._uploads)} unfinished multipart uploads are under it)" if self._uploads else ""
            raise SourceError(f"{self.describe()} holds no objects: the prefix does not exist or is empty{pending}")

    def _archive_states(self, pool: ThreadPoolExecutor) -> dict[str, str]:
        """The objects listed in an archive storage class that cannot be read now, with why: one HEAD
        each (in parallel), since a listing does not say whether a restored copy is there."""
        listed = sorted(path for path, info in self._objects.items() if info.storage_class in ARCHIVE_CLASSES)

        def state(path: str) -> str | None:
            entry = self._objects[path]
            try:
                found = self.client.head_object(Bucket=self.bucket, Key=entry.key)
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, "HeadObject", entry.url) from None
            return restore_state(found.get("Restore"))

        return {path: archived_reason(self._objects[path].url, self._objects[path].storage_class, why)
                for path, why in zip(listed, self._parallel(state, listed, pool), strict=True) if why is not None}

    def _list(self, prefix: str, delimited: bool) -> tuple[list[dict[str, Any]], list[str]]:
        arguments: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if delimited:
            arguments["Delimiter"] = "/"
        objects: list[dict[str, Any]] = []
        folders: list[str] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(**arguments):
                objects += page.get("Contents", [])
                folders += [str(required(common, "Prefix", self.location.of(prefix.removeprefix(self.prefix)),
                                         "ListObjectsV2 (CommonPrefixes)"))
                            for common in page.get("CommonPrefixes", [])]
        except (ClientError, BotoCoreError) as exc:
            folder = prefix.removeprefix(self.prefix).rstrip("/")
            raise self._error(exc, "ListObjectsV2", self.location.of(folder) if folder else self.describe()) from None
        return objects, folders

    def _list_uploads(self) -> list[IncompleteUpload]:
        found: list[IncompleteUpload] = []
        try:
            pages = self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=self.prefix)
            for page in pages:
                for upload in page.get("Uploads", []):
                    initiated = upload.get("Initiated")
                    key = str(required(upload, "Key", str(self.location), "ListMultipartUploads"))
                    upload_id = required(upload, "UploadId", f"s3://{self.bucket}/{key}", "ListMultipartUploads")
                    found.append(IncompleteUpload(
                        path=key[len(self.prefix):], upload_id=str(upload_id),
                        initiated=initiated.astimezone(UTC) if isinstance(initiated, datetime) else None))
        except ClientError as exc:
            error = self._error(exc, "ListMultipartUploads", str(self.location))
            # A read-only policy often grants s3:ListBucket and s3:GetObject, not
            # s3:ListBucketMultipartUploads, and some S3-compatible stores do not implement the call:
            # the backups are still read, and the run says what it could not see.
            if error.code in ("AccessDenied", "NotImplemented", "MethodNotAllowed"):
                self.uploads_unlisted = (f"unfinished multipart uploads under {self.describe()} not listed: "
                                         f"ListMultipartUploads was refused ({error.code}); what failed uploads "
                                         "left is not known (it needs s3:ListBucketMultipartUploads)")
                return []
            raise error from None
        except BotoCoreError as exc:
            raise self._error(exc, "ListMultipartUploads", str(self.location)) from None
        return sorted(found, key=lambda u: (u.path, u.initiated or datetime.min.replace(tzinfo=UTC)))

    def _add(self, objects: list[dict[str, Any]]) -> None:
        for item in objects:
            key = str(required(item, "Key", str(self.location), "ListObjectsV2"))
            path = key[len(self.prefix):]
            if path.endswith("/") and int(item.get("Size") or 0) == 0:
                path = path.rstrip("/")  # a folder marker (as consoles make): a folder, not a file
                if path and self._addressable(path):
                    self._add_folders(path)
                continue
            if not self._addressable(path):
                self.skipped.append(key)
                continue
            algorithms = item.get("ChecksumAlgorithm") or []
            url = self.location.of(path)
            self._objects[path] = ObjectInfo(
                url=url, key=key, size=int(required(item, "Size", url, "ListObjectsV2")),
                etag=etag_of(item.get("ETag")),
                last_modified=required(item, "LastModified", url, "ListObjectsV2").astimezone(UTC),
                checksum_algorithm=str(algorithms[0]) if algorithms else None,
                checksum_type=item.get("ChecksumType"), storage_class=item.get("StorageClass"))
            folder, _, name = path.rpartition("/")
            self._add_folders(folder)
            self._children[folder].add(name)

    def _add_folders(self, folder: str) -> None:
        self._children.setdefault(folder, set())
        while folder:
            parent, _, name = folder.rpartition("/")
            siblings = self._children.setdefault(parent, set())
            if name in siblings:
                return  # its parents are known already
            siblings.add(name)
            folder = parent

    @staticmethod
    def _addressable(path: str) -> bool:
        return bool(path) and all(part not in ("", ".", "..") for part in path.split("/"))

    # -- reads -----------------------------------------------------------------------------------

    def _path(self, path: str) -> str:
        cleaned = path.rstrip("/")
        # Names come from repository files: as for a folder, none may point outside the source.
        if cleaned and (path.startswith("/") or any(part in ("", ".", "..") for part in cleaned.split("/"))):
            raise SourceError(f"path {path!r} leaves the source {self.describe()}")
        return cleaned

    def _entry(self, path: str) -> ObjectInfo:
        cleaned = self._path(path)
        entry = self._objects.get(cleaned)
        if entry is None:
            what = "a folder, not an object" if cleaned in self._children else "not in the listing made at open"
            raise SourceError(f"{self.location.of(cleaned)} does not exist ({what})")
        return entry

    def _head(self, path: str, entry: ObjectInfo, length: int) -> bytes:
        """The object's first `length` bytes (all of a small one), fetched once and kept."""
        with self._lock:
            if path in self._heads:
                self._heads.move_to_end(path)
                return self._heads[path]
        data = self._get(path, entry, 0, length)
        with self._lock:
            self._heads[path] = data
            while len(self._heads) > HEADS_KEPT:
                self._heads.popitem(last=False)
        return data

    def _get(self, path: str, entry: ObjectInfo, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object, only as listed (If-Match on its ETag; If-Unmodified-Since its
        LastModified where the store listed no ETag)."""
        arguments: dict[str, Any] = {"Bucket": self.bucket, "Key": entry.key}
        if entry.etag is not None:
            arguments["IfMatch"] = entry.etag
        else:
            arguments["IfUnmodifiedSince"] = whole_seconds(entry.last_modified)
        whole = start == 0 and end == entry.size
        if whole:
            arguments["ChecksumMode"] = "ENABLED"  # botocore checks the body against S3's checksum, if any
        else:
            arguments["Range"] = f"bytes={start}-{end - 1}"
        retrying = Retrying(retry=retry_if_exception_type(_BodyCut), reraise=True,
                            stop=stop_after_attempt(self.settings.max_attempts),
                            wait=wait_exponential(multiplier=0.2, max=5))
        try:
            for attempt in retrying:
                with attempt:
                    response = self.client.get_object(**arguments)  # retried by botocore
                    try:
                        data = bytes(response["Body"].read())
                    except BODY_ERRORS as exc:
                        raise _BodyCut() from exc
        except (ClientError, BotoCoreError) as exc:
            error = self._error(exc, "GetObject", entry.url)
            if error.code == "InvalidObjectState":  # archived since the listing, or an archive tier
                said = exc.response.get("Error", {}).get("StorageClass") if isinstance(exc, ClientError) else None
                storage_class = str(said or entry.storage_class or "") or None
                raise ArchivedObjectError(archived_reason(entry.url, storage_class, "is not restored (GetObject: "
                                                          "InvalidObjectState, HTTP 403)"), storage_class) from None
            if error.code in ("PreconditionFailed", "412") and entry.etag is None:
                raise S3Error(f"{entry.url} changed since the source was listed (modified after its listed "
                              f"LastModified {whole_seconds(entry.last_modified).isoformat()}, the store having "
                              "listed no ETag; GetObject with If-Unmodified-Since: PreconditionFailed, HTTP 412)",
                              error.code) from None
            raise error from None
        except _BodyCut as cut:
            raise self._error(cut.__cause__ or cut, "GetObject (reading the body)", entry.url) from None
        if len(data) != end - start:
            raise SourceError(f"{entry.url}: asked for bytes {start}-{end - 1}, got {len(data)} bytes: the object "
                              f"is shorter than its listed {entry.size} bytes")
        with self._lock:
            self._stats.bytes_read += len(data)
            self._stats.bytes_by_path[path] += len(data)
            if whole:
                self._stats.whole_reads[path] += 1
        return data

    def _head_object(self, path: str, entry: ObjectInfo) -> ObjectInfo:
        try:
            found = self.client.head_object(Bucket=self.bucket, Key=entry.key, ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "HeadObject", entry.url) from None
        algorithm = next((name for name in ("CRC64NVME", "CRC32C", "CRC32", "SHA256", "SHA1")
                          if found.get(f"Checksum{name}")), None)
        return ObjectInfo(url=entry.url, key=entry.key,
                          size=int(required(found, "ContentLength", entry.url, "HeadObject")),
                          etag=etag_of(found.get("ETag")),
                          last_modified=required(found, "LastModified", entry.url, "HeadObject").astimezone(UTC),
                          checksum_algorithm=algorithm or entry.checksum_algorithm,
                          checksum=str(found[f"Checksum{algorithm}"]) if algorithm else None,
                          checksum_type=found.get("ChecksumType"),
                          storage_class=found.get("StorageClass") or entry.storage_class)

    @staticmethod
    def _differences(listed: ObjectInfo, now: ObjectInfo) -> str:
        """What tells the object now from the object listed: its size; its ETag, or where the store gives
        none, its LastModified (to the second) and the checksum S3 keeps (where both are known); and a
        move into an archive storage class (GLACIER, DEEP_ARCHIVE), which leaves both alone."""
        said = []
        if listed.size != now.size:
            said.append(f"size {listed.size} bytes when listed, {now.size} now")
        if listed.etag is not None and now.etag is not None:
            if listed.etag != now.etag:
                said.append(f"ETag {listed.etag} when listed, {now.etag} now")
        else:
            if whole_seconds(listed.last_modified) != whole_seconds(now.last_modified):
                said.append(f"LastModified {whole_seconds(listed.last_modified).isoformat()} when listed, "
                            f"{whole_seconds(now.last_modified).isoformat()} now (the store gives no ETag)")
            if (listed.checksum is not None and now.checksum is not None
                    and listed.checksum_algorithm == now.checksum_algorithm and listed.checksum != now.checksum):
                said.append(f"{listed.checksum_algorithm} checksum {listed.checksum} when listed, {now.checksum} now")
        # A lifecycle rule moves an object without rewriting it (same bytes, same ETag), yet once in an
        # archive class it cannot be read: the tool in the target would meet "access denied".
        if now.storage_class in ARCHIVE_CLASSES and now.storage_class != listed.storage_class:
            said.append(f"moved to storage class {now.storage_class} since the plan (archived objects cannot be "
                        "read until restored)")
        return ", ".join(said)

    def _check_same(self, listed: ObjectInfo, now: ObjectInfo) -> None:
        if difference := self._differences(listed, now):
            raise SourceError(f"{listed.url} changed since the source was listed: {difference}")

    # -- plumbing --------------------------------------------------------------------------------

    def _count_request(self, event_name: str, **_: Any) -> None:
        # before-send.s3.<Operation>: once per HTTP attempt, retries included.
        with self._lock:
            self._stats.requests[event_name.rsplit(".", 1)[-1]] += 1

    def _error(self, exc: BaseException, operation: str, url: str) -> S3Error:
        return translate(exc, url=url, operation=operation, endpoint=getattr(self, "endpoint", "the S3 endpoint"),
                         scrub=self._scrub, attempts=self.settings.max_attempts)

    def _parallel(self, work: Callable[[T], R], items: Sequence[T], pool: ThreadPoolExecutor | None = None
                  ) -> Iterator[R]:
        """work(item) for every item, in parallel, results in the items' order; the first failure
        cancels what has not started and is raised."""
        if len(items) <= 1:
            yield from (work(item) for item in items)
            return
        own = pool is None
        executor = pool or ThreadPoolExecutor(self.threads, thread_name_prefix=THREAD_PREFIX)
        futures: list[Future[R]] = [executor.submit(work, item) for item in items]
        try:
            done, _ = wait(futures, return_when="FIRST_EXCEPTION")
            failed = next((f for f in futures if f in done and f.exception() is not None), None)
            if failed is not None:
                raise failed.exception()  # type: ignore[misc]
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()
            if own:
                executor.shutdown(wait=True)
