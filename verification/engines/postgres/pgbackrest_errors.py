"""What pgBackRest's error codes say about who is at fault: the backups, or the way to them.

Every version the images ship (2.33, 2.45, 2.55.1, 2.60.0) numbers these codes alike (build/error.yaml
at release/2.33 and main, src/build/error/error.yaml at 2.45 and 2.55.1; 2.33 has no [105] yet) and
words the storage messages below alike. Its restore errors as captured from each (tests/fixtures/
postgres/pgbackrest-<version>/pgbackrest-restore-*.out) read the same: `ERROR: [029]: raised from
local-1 protocol: zlib threw error: [-3] data error` for a flipped byte, `[055] unable to open missing
file '…' for read` for a file gone. 2.55.1 on print them in the console log on stdout (`<time> P00
ERROR: [029]: …`; log-level-stderr defaults to off there), not on stderr as 2.33 and 2.45 do: they are
read wherever they are in the output (ERROR_LINE is not anchored).

The codes and names are src/build/error/error.yaml at the release/2.45 tag; where each is thrown was
read in that tag's src/:

- [039] ProtocolError: every failed HTTP request to an object store (common/io/http/request.c
  httpRequestError: `HTTP request failed with <code> (<reason>):` then `*** Path/Query ***:`, the
  verb and path, and the response content), the S3/GCS credential lookups (storage/s3/storage.c,
  storage/gcs/storage.c), `unexpected TLS eof` (common/io/tls/session.c), socket options
  (common/io/socket), and the protocol between pgBackRest's own processes (protocol/client.c,
  server.c: greetings, states, commands). None of these reads a file's content: on a posix repository
  [039] can only mean pgBackRest's processes did not understand each other, never a bad file.
- [049] HostConnectError: name resolution, socket creation, connect timeouts (common/io/socket).
- [101] ServiceError: an HTTP 5xx after its retries (common/io/http/request.c), TLS errors
  (common/io/tls/session.c).
- [105] AccessError: `access denied` (protocol/helper.c).
- [055] FileMissingError: `unable to open missing file '<path>' for read` from every storage driver
  (posix, S3, GCS, Azure read.c; storage/storage.intern.h STORAGE_ERROR_READ_MISSING), and
  `unable to open file '<path>' for write in missing path` (storage/posix/write.c).
- [040] PathNotEmptyError: `unable to restore to path '<path>' because it contains files`
  (command/restore/restore.c): the destination, never the repository.
- [041] FileOpenError: `unable to open file '<path>' for read: [errno] <strerror>` and `... for write:
  [errno] <strerror>` (storage/posix/read.c, write.c; the write one is the restore's destination:
  EACCES, EROFS, EDQUOT, ENOSPC), `unable to load info file '<path>' or '<path>.copy':` (info/info.c),
  and sockets and links (common/io/socket/server.c, storage/posix/storage.c).
- [046] VersionNotSupportedError: `invalid PostgreSQL version <n>`, `unexpected control version = ...`,
  `unexpected WAL magic ...` (postgres/interface.c), each with `HINT: is this version of PostgreSQL
  supported?`: the pgBackRest that runs does not know the backup's version, which an older pgBackRest
  in the target's image does not, however sound the backup.
"""

from __future__ import annotations

import posixpath
import re

# The repository's content is bad: format, archive mismatch or duplicate, a missing or unreadable file,
# the backup set. [039] is not among them (see above): it never judges a file. [046] neither: it says
# what the target's pgBackRest does not know (see above).
DATA_ERROR_CODES = frozenset({"029", "040", "041", "044", "045", "055", "075"})
# Codes that blame the path they name: the backups' fault only when that path is in the repository; a
# path in the target (its data folder, its work folder) is the target's fault, and none named is no
# file's at all (a socket).
PATH_ERROR_CODES = frozenset({"040", "041", "055"})
# The way to the repository's storage failed (network, HTTP, TLS, credentials): restoreproof's or the
# infrastructure's problem, never a verdict on the backups.
TRANSPORT_ERRORS = {"039": "ProtocolError", "049": "HostConnectError", "101": "ServiceError", "105": "AccessError"}
FILE_MISSING = "055"

QUOTED_PATH = re.compile(r"'(?P<path>/[^']*)'")
ERROR_LINE = re.compile(r"ERROR: \[(?P<code>\d{3})\]: (?P<message>.*)")
MISSING_FILE = re.compile(r"unable to open missing file '(?P<path>[^']+)' for read")
# httpRequestError's layout: the request's verb and path under `*** Path/Query ***:`.
HTTP_REQUEST = re.compile(r"\*\*\* Path/Query \*\*\*:\s*\n\s*(?P<request>[A-Z]+ \S+)")
# An S3 error document in the response content.
S3_ERROR = re.compile(r"<Code>(?P<code>[^<]*)</Code>(?:\s*<Message>(?P<message>[^<]*)</Message>)?")


def code_of(code: str) -> str:
    """A code as error.yaml numbers it (three digits): pgBackRest's verify prints `[39]`, its log `[039]`."""
    return code.zfill(3)


def is_transport(code: str) -> bool:
    return code_of(code) in TRANSPORT_ERRORS


def transport_cause(code: str, message: str, output: str) -> str:
    """A transport error said with its cause: the code's name, pgBackRest's first line, and for a failed
    HTTP request the request and the store's own error code and message."""
    code = code_of(code)
    said = f"[{code}] {TRANSPORT_ERRORS.get(code, 'error')}: {message.strip().rstrip(':')}"
    if request := HTTP_REQUEST.search(output):
        said += f" ({request['request']})"
    if s3 := S3_ERROR.search(output):
        said += f": {s3['code']}" + (f" {s3['message']}" if s3["message"] else "")
    return said


def missing_files(output: str) -> list[str]:
    """The paths pgBackRest could not find, as it named them (its storage's paths), each once."""
    return list(dict.fromkeys(m["path"] for m in MISSING_FILE.finditer(output)))


def named_paths(message: str) -> list[str]:
    """The absolute paths an error message quotes, as pgBackRest named them, each once."""
    return list(dict.fromkeys(m["path"] for m in QUOTED_PATH.finditer(message)))


def is_under(path: str, root: str) -> bool:
    """Whether `path` is `root` or inside it (as strings: pgBackRest names paths absolute and normal)."""
    root = posixpath.normpath(root)
    path = posixpath.normpath(path)
    return path == root or path.startswith(root.rstrip("/") + "/")


def blames_repository(code: str, message: str, repository: str, target: str) -> bool:
    """Whether an error judges the repository's content: a data code, and for a code that blames a path,
    a path named inside `repository` (as the target's pgBackRest names it) and outside the target's
    own folder `target` (a repository rooted at / in an object store holds every path)."""
    code = code_of(code)
    if code not in DATA_ERROR_CODES:
        return False
    if code not in PATH_ERROR_CODES:
        return True
    return any(is_under(path, repository) and not is_under(path, target) for path in named_paths(message))
