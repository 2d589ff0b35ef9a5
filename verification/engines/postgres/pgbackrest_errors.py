"""What pgBackRest 2.45's error codes say about who is at fault: the backups, or the way to them.

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
  (posix, S3, GCS, Azure read.c; storage/storage.intern.h STORAGE_ERROR_READ_MISSING).
"""

from __future__ import annotations

import re

# The repository's content is bad: format, checksum, missing file, version, backup set. [039] is not
# among them (see above): it never judges a file.
DATA_ERROR_CODES = frozenset({"029", "040", "041", "044", "045", "046", "055", "075"})
# The way to the repository's storage failed (network, HTTP, TLS, credentials): restoreproof's or the
# infrastructure's problem, never a verdict on the backups.
TRANSPORT_ERRORS = {"039": "ProtocolError", "049": "HostConnectError", "101": "ServiceError", "105": "AccessError"}
FILE_MISSING = "055"

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
