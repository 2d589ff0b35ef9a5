"""A backup's manifest read and proven offline, as pgBackRest loads it before it restores that backup.

What pgBackRest 2.45 does, from its source (src/info/manifest.c manifestLoadFile, src/info/info.c
infoLoad and infoNewLoad, src/common/ini.c in strict mode, src/command/restore/restore.c):

- `backup.manifest` is tried, then `backup.manifest.copy`, whatever made the first unusable (missing,
  not decrypting, not an info file, a wrong checksum or format); only when neither loads does a
  restore stop ("unable to load backup manifest file '…' or '….copy'");
- each is decrypted with the key backup.info keeps ([cipher] cipher-pass) when the repository is
  encrypted, read as it is otherwise;
- an info file is INI as pgBackRest writes it: no trimming, every value JSON (a key may hold '=': the
  value starts at the first '=' after which the rest is valid JSON); `[backrest] backrest-format` is 5,
  and `[backrest] backrest-checksum` is the SHA-1 of every other value laid out as one JSON object,
  sections and keys in file order: `{"section":{"key":value,...},...}` (keys JSON-escaped of `"`, `\\`
  and the five control characters pgBackRest escapes; values as written);
- once one has loaded, the restore requires its `[backup] backup-label` to be the backup's and that it
  lists files (restoreManifestValidate): failing either, the copy is not tried.

Each manifest keeps, in its own `[cipher] cipher-pass`, the key its backup's files are encrypted with;
it is kept here as a secret, never shown. Backup files themselves are not read (too slow for planning:
`pgbackrest verify` in the target checks them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import SecretStr

from verification.engines.postgres.cipher import UndecryptableError, decrypt, is_encrypted
from verification.errors import ArchivedObjectError
from verification.sources.base import Source

MANIFEST = "backup.manifest"
COPY = ".copy"
MISSING = "missing"
REPOSITORY_FORMAT = 5  # pgBackRest's REPOSITORY_FORMAT, in every info file it writes
# What pgBackRest's JSON writer escapes in a string (src/common/type/json.c): these, nothing else.
_JSON_ESCAPES = str.maketrans({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                               "\b": "\\b", "\f": "\\f"})


class InfoFormatError(ValueError):
    """Content that is not a pgBackRest info file as pgBackRest would load it. Its message never
    quotes a value: a decrypted file holds a key."""


@dataclass(frozen=True)
class InfoFile:
    """A loaded info file: each section's keys and their values, as JSON text. Its values stay out of
    its repr: a decrypted file holds a key ([cipher] cipher-pass), and a repr reaches tracebacks and logs."""

    sections: dict[str, dict[str, str]] = field(repr=False)

    def value(self, section: str, key: str) -> Any:
        raw = self.sections.get(section, {}).get(key)
        return None if raw is None else json.loads(raw)


def info_values(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) of each line, in order, as pgBackRest's strict INI reader splits them."""
    values: list[tuple[str, str, str]] = []
    section = ""
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        if line[0] == "[" and line[-1] == "]":
            section = line[1:-1]
            if not section:
                raise InfoFormatError(f"an empty section name at line {number}")
            continue
        if not section:
            raise InfoFormatError(f"a value outside any section at line {number}")
        equal = line.find("=")
        if equal < 0:
            raise InfoFormatError(f"no key=value at line {number}")
        while True:  # a key may hold '=': the value is what follows the first '=' that leaves valid JSON
            try:
                json.loads(line[equal + 1:])
                break
            except ValueError:
                equal = line.find("=", equal + 1)
                if equal < 0:
                    raise InfoFormatError(f"a value that is not JSON at line {number}") from None
        if equal == 0:
            raise InfoFormatError(f"an empty key at line {number}")
        values.append((section, line[:equal], line[equal + 1:]))
    return values


def info_checksum(values: list[tuple[str, str, str]]) -> str:
    """pgBackRest's checksum of an info file's values (its own backrest-checksum left out)."""
    digest = hashlib.sha1(b"{")
    last: str | None = None
    for section, key, value in values:
        if (section, key) == ("backrest", "backrest-checksum"):
            continue
        if section != last:
            digest.update(b"}," if last is not None else b"")
            digest.update(f'"{section}":{{'.encode("utf-8", "surrogateescape"))
            last = section
        else:
            digest.update(b",")
        digest.update(f'"{key.translate(_JSON_ESCAPES)}":{value}'.encode("utf-8", "surrogateescape"))
    digest.update(b"}}")
    return digest.hexdigest()


def load_info(data: bytes) -> InfoFile:
    """An info file's content, checked as pgBackRest checks it on load: its format and its checksum."""
    # Bytes that are not UTF-8 are kept as they are (pgBackRest reads bytes): the checksum covers them.
    values = info_values(data.decode("utf-8", "surrogateescape"))
    sections: dict[str, dict[str, str]] = {}
    for section, key, value in values:
        sections.setdefault(section, {})[key] = value
    info = InfoFile(sections)
    if info.value("backrest", "backrest-format") != REPOSITORY_FORMAT:
        raise InfoFormatError(f"[backrest] backrest-format is not {REPOSITORY_FORMAT}")
    expected = info.value("backrest", "backrest-checksum")
    if not isinstance(expected, str):
        raise InfoFormatError("no [backrest] backrest-checksum")
    if info_checksum(values) != expected:
        raise InfoFormatError("its content does not match its backrest-checksum (SHA-1)")
    return info


@dataclass(frozen=True)
class ManifestRead:
    """What planning found of one backup's manifest."""

    label: str
    manifest: str  # path of backup.manifest, relative to the source
    used: str | None = None  # the file that loaded (the manifest or its copy); None when neither did
    refused: tuple[tuple[str, str], ...] = ()  # each file tried and not loaded: (path, why)
    problem: str | None = None  # why the loaded manifest does not serve the backup, or why none loaded
    present: bool = True  # False: neither file exists
    files: int = 0  # files the manifest lists
    encrypted: bool = False
    # Why it could not be read here at all (an object in an archive storage class): neither damaged nor proven.
    unread: str | None = None
    # The [backup] keys that say how the backup's files are laid out (e.g. backup-bundle), set on
    # (true, or any value but false and null): what a target's pgBackRest must know to read them.
    layout: tuple[str, ...] = ()
    # [backup] backup-lsn-start and -stop: where the backup began and ended, as PostgreSQL said.
    lsn_start: str | None = None
    lsn_stop: str | None = None
    # The key the backup's files are encrypted with ([cipher] cipher-pass), for whoever reads them.
    files_key: SecretStr | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.used is not None and self.problem is None

    @property
    def damaged(self) -> bool:
        return not self.ok and self.unread is None

    @property
    def damaged_files(self) -> tuple[str, ...]:
        """The files that are there and do not serve: those refused, and the one loaded when it does not fit."""
        refused = [path for path, why in self.refused if why != MISSING]
        return tuple(dict.fromkeys([*refused, *([self.used] if self.used and self.problem else [])]))

    def said_refused(self) -> str:
        return "; ".join(f"{path}: {why}" for path, why in self.refused)


def read_manifest(source: Source, folder: str, label: str, backup_key: SecretStr | None) -> ManifestRead:
    """Load the manifest of the backup in `folder` as pgBackRest would, decrypted with `backup_key`
    (backup.info's [cipher] cipher-pass) when the repository is encrypted (`backup_key` not None)."""
    manifest = f"{folder}/{MANIFEST}"
    refused: list[tuple[str, str]] = []
    for candidate in (manifest, manifest + COPY):
        if not source.exists(candidate):
            refused.append((candidate, MISSING))
            continue
        try:
            info = load_info(_plain(source.read_bytes(candidate), backup_key))
        except ArchivedObjectError as exc:
            # Nothing can read it until it is restored from the archive class: not judged here (the run
            # names the object among what it could not read, and cannot pass).
            return ManifestRead(label, manifest, refused=tuple(refused), unread=str(exc))
        except (UndecryptableError, InfoFormatError) as exc:
            refused.append((candidate, str(exc)))
            continue
        return _validated(label, manifest, candidate, tuple(refused), info, backup_key is not None)
    read = ManifestRead(label, manifest, refused=tuple(refused), present=any(why != MISSING for _, why in refused))
    return replace(read, problem=f"neither {MANIFEST} nor its copy loads as pgBackRest loads them: "
                                 f"{read.said_refused()}")


def _plain(data: bytes, backup_key: SecretStr | None) -> bytes:
    if backup_key is None:
        return data
    if not is_encrypted(data):
        raise InfoFormatError("not encrypted, in an encrypted repository (no 'Salted__' header)")
    try:
        return decrypt(data, backup_key.get_secret_value())
    except UndecryptableError as exc:
        # backup.info's key was proven by backup.info itself: a manifest it does not open is damaged.
        raise UndecryptableError(f"does not decrypt with the key backup.info keeps for the manifests ({exc})") from None


def _validated(label: str, manifest: str, used: str, refused: tuple[tuple[str, str], ...], info: InfoFile,
               encrypted: bool) -> ManifestRead:
    files = len(info.sections.get("target:file", {}))
    try:
        named = info.value("backup", "backup-label")
        key = info.value("cipher", "cipher-pass")
    except ValueError:  # checked as JSON on load: cannot happen, said rather than raised if it does
        named = key = None
    problem = None
    if named != label:
        problem = (f"{used} is the manifest of {f'backup {named}' if isinstance(named, str) else 'no backup'}, "
                   f"not of {label} ([backup] backup-label)")
    elif not files:
        problem = f"{used} lists no files ([target:file] is empty)"
    elif encrypted and (not isinstance(key, str) or not key):
        problem = f"{used} keeps no [cipher] cipher-pass, the key of its backup's files"
    lsns = [info.value("backup", key) for key in ("backup-lsn-start", "backup-lsn-stop")]
    start, stop = (value if isinstance(value, str) else None for value in lsns)
    return ManifestRead(label, manifest, used, refused, problem, files=files, encrypted=encrypted,
                        layout=layout_of(info), lsn_start=start, lsn_stop=stop,
                        files_key=SecretStr(key) if isinstance(key, str) and key else None)


# The [backup] keys every pgBackRest from 2.33 to 2.60 writes that describe the backup, not how its
# files are laid out (src/info/manifest.c, MANIFEST_KEY_BACKUP_*).
DESCRIPTIVE_KEYS = frozenset({
    "backup-archive-start", "backup-archive-stop", "backup-label", "backup-lsn-start", "backup-lsn-stop",
    "backup-prior", "backup-reference", "backup-timestamp-copy-start", "backup-timestamp-start",
    "backup-timestamp-stop", "backup-type"})


def layout_of(info: InfoFile) -> tuple[str, ...]:
    said = []
    for key in info.sections.get("backup", {}):
        if key in DESCRIPTIVE_KEYS:
            continue
        try:
            value = info.value("backup", key)
        except ValueError:  # checked as JSON on load
            value = None
        if value is not None and value is not False:
            said.append(key)
    return tuple(said)
