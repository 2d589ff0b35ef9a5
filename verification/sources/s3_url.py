"""s3://bucket/prefix URLs: told apart from folder paths, and checked before any request is made."""

from __future__ import annotations

import re
from dataclasses import dataclass

from verification.errors import SourceError

SCHEME = "s3://"
# S3's own rule for bucket names (3 to 63 characters of lower-case letters, digits, dots and hyphens,
# beginning and ending with a letter or digit), widened to upper case and underscores: buckets made
# in us-east-1 before 2018, and several S3-compatible stores, still have such names.
BUCKET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,61}[A-Za-z0-9]$")
IP_ADDRESS_RE = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


def is_s3_url(text: str) -> bool:
    """Whether a source names object storage rather than a folder (case-insensitive scheme)."""
    return text[:len(SCHEME)].lower() == SCHEME


@dataclass(frozen=True)
class S3Url:
    bucket: str
    # The folder the source is, '' (the whole bucket) or ending with '/': keys are prefix + path.
    prefix: str

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix.rstrip('/')}".rstrip("/")

    def key(self, path: str) -> str:
        return self.prefix + path

    def of(self, path: str) -> str:
        """The URL of one object or folder of the source."""
        return f"{SCHEME}{self.bucket}/{self.key(path)}"


def _shown(url: str) -> str:
    """The URL as a message may show it: credentials written into it (s3://key:secret@bucket) masked."""
    rest = url[len(SCHEME):]
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "********@" + authority.rpartition("@")[2]
    return f"{SCHEME}{authority}{slash}{path}"


def parse_s3_url(url: str) -> S3Url:
    """`s3://bucket[/prefix[/]]`, or a SourceError naming the URL and what is wrong with it."""
    if not is_s3_url(url):
        raise SourceError(f"{url!r} is not an S3 URL: expected s3://bucket/prefix")
    shown = _shown(url)
    rest = url[len(SCHEME):]
    bucket, _, prefix = rest.partition("/")
    if "@" in bucket:
        raise SourceError(f"malformed S3 URL {shown}: credentials are not taken from the URL; set "
                          "s3.access_key_id and s3.secret_access_key, or use the AWS credential chain")
    if any(char in url for char in "?#"):
        raise SourceError(f"malformed S3 URL {shown}: '?' and '#' (a query or a fragment) are not part of "
                          "an s3://bucket/prefix URL")
    if not bucket:
        raise SourceError(f"malformed S3 URL {shown}: no bucket name (expected s3://bucket/prefix)")
    if not BUCKET_RE.match(bucket) or ".." in bucket or IP_ADDRESS_RE.match(bucket):
        raise SourceError(f"malformed S3 URL {shown}: {bucket!r} is not a valid bucket name (3 to 63 letters, "
                          "digits, dots, hyphens or underscores, beginning and ending with a letter or digit)")
    if any(ord(char) < 32 or ord(char) == 127 for char in prefix):
        raise SourceError(f"malformed S3 URL {shown}: the prefix holds a control character")
    parts = prefix.rstrip("/").split("/") if prefix.rstrip("/") else []
    # The source is read as a tree of '/'-separated paths: an empty or dot segment names no folder.
    if prefix.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise SourceError(f"malformed S3 URL {shown}: the prefix {prefix!r} has an empty, '.' or '..' "
                          "segment; give the folder as s3://bucket/a/b")
    return S3Url(bucket, "/".join(parts) + "/" if parts else "")
