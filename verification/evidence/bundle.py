"""The signed evidence bundle: a manifest of every file in a run folder, and its signature.

manifest.json is written as the exact canonical JSON bytes that are signed (sorted keys, no spaces,
ASCII), so what an auditor reads is byte for byte what the signature covers: reformatting it, or
adding a duplicate key, breaks the signature instead of slipping past it. manifest.sig holds one
header line naming the format, algorithm and key id, then the base64 signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from verification.config import Settings
from verification.errors import RestoreproofError
from verification.evidence.backup_hashes import CHUNK_BYTES, parse_sha256sums
from verification.evidence.signing import ALGORITHMS, Signer, Verifier, load_signer

FORMAT = "restoreproof-evidence/1"
SIGNATURE_FORMAT = "restoreproof-signature/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
BACKUP_HASHES = "backup-files.sha256"
# Files of the report folder that a run's pages load from beside the run folder (its plotly.js,
# verification.reports.assets): "../assets/<name>". Signed by hash; checked wherever they are present.
SHARED_FOLDER = "assets"

FindingKind = Literal["changed", "missing", "added", "unsigned", "bad-signature", "wrong-key", "malformed"]


class EvidenceError(RestoreproofError):
    """A bundle could not be written or read at all (as opposed to a bundle that fails verification)."""


@dataclass(frozen=True)
class BundleInfo:
    run_dir: Path
    manifest: Path
    signature: Path
    run_id: str | None
    algorithm: str
    key_id: str
    files: int
    total_bytes: int


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a bundle; `message` starts with the file it is about."""

    path: str
    kind: FindingKind
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class VerifyResult:
    bundle: Path
    expected_key_id: str
    run_id: str | None = None
    algorithm: str | None = None
    key_id: str | None = None
    files_checked: int = 0
    findings: list[Finding] = field(default_factory=list)
    # Signed files the run's pages load from beside the folder, absent here (a copy of the run folder
    # alone): not evidence, so not a finding, but the report's charts need them.
    shared_absent: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def add(self, path: str, kind: FindingKind, problem: str) -> None:
        self.findings.append(Finding(path=path, kind=kind, message=f"{path}: {problem}"))

    def to_json(self) -> dict[str, Any]:
        return {"bundle": str(self.bundle), "ok": self.ok, "run_id": self.run_id, "algorithm": self.algorithm,
                "key_id": self.key_id, "expected_key_id": self.expected_key_id,
                "files_checked": self.files_checked, "shared_absent": self.shared_absent,
                "findings": [{"path": f.path, "kind": f.kind, "message": f.message} for f in self.findings]}


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def sha256_file(path: Path) -> tuple[int, str]:
    """(size, SHA-256 hex) of a local file, read in chunks so large logs never sit in memory."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _bundle_files(root: Path) -> list[str]:
    """Every file under root as a '/'-separated relative path, sorted; the manifest pair itself excluded."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        base = Path(folder)
        for name in files:
            relative = (base / name).relative_to(root).as_posix()
            if relative not in (MANIFEST, SIGNATURE):
                found.append(relative)
    return sorted(found)


def _read_run_id(run_dir: Path) -> str | None:
    try:
        report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    run_id = report.get("run_id") if isinstance(report, dict) else None
    return run_id if isinstance(run_id, str) else None


def _backup_files(run_dir: Path) -> dict[str, dict[str, str]]:
    """Each database's backup hashes (evidence/<db>/backup-files.sha256), keyed by the evidence folder."""
    section: dict[str, dict[str, str]] = {}
    for listing in sorted((run_dir / "evidence").glob(f"*/{BACKUP_HASHES}")):
        try:
            section[listing.parent.name] = parse_sha256sums(listing.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise EvidenceError(f"cannot read the backup hashes {listing}: {exc}") from exc
    return section


def _write_atomically(path: Path, data: bytes) -> None:
    # A crash mid-write must leave the old manifest or the new one, never half of one.
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_bytes(data)
        os.replace(temp, path)
    except OSError as exc:
        raise EvidenceError(f"cannot write {path}: {exc.strerror or type(exc).__name__}") from exc
    finally:
        temp.unlink(missing_ok=True)


def _entry(run_dir: Path, relative: str) -> dict[str, Any]:
    """A manifest entry: the file's path under the run folder, its size and SHA-256."""
    try:
        size, digest = sha256_file(run_dir / relative)
    except OSError as exc:
        raise EvidenceError(f"cannot hash {run_dir / relative}: {exc.strerror or type(exc).__name__}") from exc
    return {"path": relative, "size": size, "sha256": digest}


def write_bundle(run_dir: Path, settings: Settings, *, extra: dict[str, Any] | None = None,
                 signer: Signer | None = None, shared: Sequence[str] = ()) -> BundleInfo:
    """Hash every file of the run folder into manifest.json and sign it into manifest.sig.

    Call it last: a file written into the folder afterwards shows up as "added" on verification.
    `extra` (tool versions and the like) is recorded, and signed, as given; it must be JSON-serialisable.
    `shared` names files the run's pages load from the report folder ("../assets/<name>"): hashed and
    signed as "shared_files", so a replaced plotly.js, which runs in report.html, is found too.
    """
    if not run_dir.is_dir():
        raise EvidenceError(f"run folder {run_dir} does not exist or is not a folder")
    signer = signer or load_signer(settings)
    entries = []
    total = 0
    for relative in _bundle_files(run_dir):
        entries.append(_entry(run_dir, relative))
        total += entries[-1]["size"]
    shared_files = []
    for relative in shared:
        if not _valid_shared(relative):
            raise EvidenceError(f"{relative} is not a file the report folder shares (../{SHARED_FOLDER}/<name>)")
        shared_files.append(_entry(run_dir, relative))
    run_id = _read_run_id(run_dir)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "run_id": run_id,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "algorithm": signer.algorithm,
        "key_id": signer.key_id,
        "files": entries,
        "backup_files": _backup_files(run_dir),
        "extra": extra or {},
    }
    if shared_files:  # only then: a bundle without any keeps the manifest of earlier versions
        manifest["shared_files"] = sorted(shared_files, key=lambda entry: entry["path"])
    data = canonical_json(manifest)
    signature = signer.sign(data)
    _write_atomically(run_dir / MANIFEST, data)
    header = f"{SIGNATURE_FORMAT} {signer.algorithm} {signer.key_id}"
    _write_atomically(run_dir / SIGNATURE, f"{header}\n{base64.b64encode(signature).decode('ascii')}\n".encode())
    return BundleInfo(run_dir=run_dir, manifest=run_dir / MANIFEST, signature=run_dir / SIGNATURE,
                      run_id=run_id, algorithm=signer.algorithm, key_id=signer.key_id,
                      files=len(entries), total_bytes=total)


def verify_bundle(bundle: Path, verifier: Verifier) -> VerifyResult:
    """Check a run folder (or a .tar.gz of one) against its signed manifest; every problem is a finding.

    Raises EvidenceError only when there is nothing to verify: the path does not exist or is not a
    folder or tar archive.
    """
    if not bundle.exists():
        raise EvidenceError(f"{bundle} does not exist")
    if bundle.is_dir():
        return _verify_folder(bundle, bundle, verifier)
    if not tarfile.is_tarfile(bundle):
        raise EvidenceError(f"{bundle} is neither a run folder nor a tar archive of one")
    # The temporary folder goes away however verification ends.
    with tempfile.TemporaryDirectory(prefix="restoreproof-bundle-") as temp:
        root = Path(temp)
        try:
            with tarfile.open(bundle) as archive:
                # The "data" filter refuses absolute paths, links out of the folder and device files.
                archive.extractall(root, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise EvidenceError(f"cannot extract {bundle}: {exc}") from exc
        run_folder = _archive_root(root)
        result = _verify_folder(run_folder, bundle, verifier)
        _name_beside(root, run_folder, result)
        return result


def _name_beside(root: Path, run_folder: Path, result: VerifyResult) -> None:
    """Every file an archive holds outside its run folder and not signed as a shared file is "added": a
    page or script carried beside the run would otherwise travel with a bundle that verifies."""
    if run_folder == root:
        return
    signed = {(run_folder / entry).resolve() for entry in _shared_paths(run_folder)}
    for path in sorted(p for p in root.rglob("*") if not p.is_dir()):
        if path.is_relative_to(run_folder) or path.resolve() in signed:
            continue
        result.add(path.relative_to(root).as_posix(), "added",
                   "beside the run folder in the archive but not signed (not a shared file of its manifest)")


def _shared_paths(run_folder: Path) -> list[str]:
    try:
        manifest = json.loads((run_folder / MANIFEST).read_bytes())
        entries = manifest.get("shared_files", []) if isinstance(manifest, dict) else []
    except (OSError, ValueError):
        return []
    return [e["path"] for e in entries if isinstance(e, dict) and _valid_shared_entry(e)]


def _archive_root(root: Path) -> Path:
    # `tar czf run.tar.gz <run_id>/` puts the folder at the top; `tar czf run.tar.gz -C <run_id> .` does not;
    # `tar czf run.tar.gz -C REPORT_DIR <run_id> assets` carries the report folder's plotly.js beside it.
    if (root / MANIFEST).exists():
        return root
    folders = [entry for entry in root.iterdir() if entry.is_dir() and (entry / MANIFEST).exists()]
    if len(folders) == 1:
        return folders[0]
    entries = list(root.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return root


def _verify_folder(root: Path, bundle: Path, verifier: Verifier) -> VerifyResult:
    result = VerifyResult(bundle=bundle, expected_key_id=verifier.key_id)
    try:
        manifest_bytes = (root / MANIFEST).read_bytes()
    except FileNotFoundError:
        result.add(MANIFEST, "unsigned", "missing; this folder is not an evidence bundle (or its manifest was removed)")
        return result
    signed = _check_signature(root, manifest_bytes, verifier, result)
    manifest = _parse_manifest(manifest_bytes, result)
    if manifest is None:
        return result
    result.run_id = manifest.get("run_id") if isinstance(manifest.get("run_id"), str) else None
    if signed and (manifest.get("algorithm"), manifest.get("key_id")) != (result.algorithm, result.key_id):
        result.add(MANIFEST, "malformed", f"names key {manifest.get('key_id')} ({manifest.get('algorithm')}) but "
                                          f"manifest.sig was made with key {result.key_id} ({result.algorithm})")
    _compare_files(root, manifest["files"], result)
    _compare_shared(root, manifest.get("shared_files", []), result)
    return result


def _check_signature(root: Path, manifest_bytes: bytes, verifier: Verifier, result: VerifyResult) -> bool:
    """True when manifest.sig is the expected key's signature of manifest.json; findings otherwise."""
    try:
        text = (root / SIGNATURE).read_text(encoding="ascii")
    except FileNotFoundError:
        result.add(SIGNATURE, "unsigned", "missing; the bundle is unsigned")
        return False
    except (OSError, UnicodeDecodeError):
        result.add(SIGNATURE, "malformed", "not a restoreproof signature file (unreadable or not ASCII)")
        return False
    lines = text.split()
    if len(lines) != 4 or lines[0] != SIGNATURE_FORMAT or lines[1] not in ALGORITHMS:
        result.add(SIGNATURE, "malformed", f"not a restoreproof signature file (expected '{SIGNATURE_FORMAT} "
                                           "<algorithm> <key id>' and a base64 signature)")
        return False
    _, algorithm, key_id, encoded = lines
    result.algorithm, result.key_id = algorithm, key_id
    if algorithm != verifier.algorithm:
        result.add(SIGNATURE, "wrong-key", f"signed with {algorithm} key {key_id}, but the expected key is "
                                           f"{verifier.algorithm} key {verifier.key_id}")
        return False
    if key_id != verifier.key_id:
        result.add(SIGNATURE, "wrong-key", f"signed with key {key_id}, not the expected key {verifier.key_id}")
        return False
    try:
        signature = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        result.add(SIGNATURE, "malformed", "the signature is not valid base64")
        return False
    if not verifier.verify(manifest_bytes, signature):
        result.add(MANIFEST, "bad-signature", f"signature does not verify with key {verifier.key_id} "
                                              "(manifest.json or manifest.sig was altered)")
        return False
    return True


def _parse_manifest(data: bytes, result: VerifyResult) -> dict[str, Any] | None:
    """The manifest when its structure is usable for comparing files; a finding otherwise."""
    try:
        manifest = json.loads(data)
    except ValueError:
        result.add(MANIFEST, "malformed", "not valid JSON")
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        result.add(MANIFEST, "malformed", f"format is {found!r}, expected {FORMAT!r}")
        return None
    files = manifest.get("files")
    if not isinstance(files, list) or not all(_valid_entry(entry) for entry in files):
        result.add(MANIFEST, "malformed", "the files list is missing or has an entry without a safe relative "
                                          "path, a size and a SHA-256")
        return None
    return manifest


def _valid_entry(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    path, size, digest = entry.get("path"), entry.get("size"), entry.get("sha256")
    if not (isinstance(path, str) and isinstance(size, int) and isinstance(digest, str)):
        return False
    parts = PurePosixPath(path).parts
    # Only paths inside the bundle: a forged manifest must not make the verifier read elsewhere.
    return bool(parts) and not path.startswith("/") and ".." not in parts and "\\" not in path


def _valid_shared(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return (len(parts) == 3 and parts[:2] == ("..", SHARED_FOLDER) and parts[2] not in (".", "..")
            and "\\" not in path)


def _valid_shared_entry(entry: Any) -> bool:
    # Outside the run folder, but only ever in the report folder's assets/: never anywhere else.
    return (isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("size"), int)
            and isinstance(entry.get("sha256"), str) and _valid_shared(entry["path"]))


def _hash_checked(root: Path, path: str, result: VerifyResult) -> tuple[int, str] | None:
    """A listed file's size and SHA-256, counted as checked; None (and said) when it cannot be read."""
    try:
        hashed = sha256_file(root / path)
    except OSError as exc:
        result.add(path, "changed", f"cannot be read: {exc.strerror or type(exc).__name__}")
        return None
    result.files_checked += 1
    return hashed


def _compare_shared(root: Path, entries: Any, result: VerifyResult) -> None:
    """The report folder's shared files the manifest signed, where present beside the run folder."""
    if not isinstance(entries, list) or not all(_valid_shared_entry(e) for e in entries):
        result.add(MANIFEST, "malformed", f"the shared_files list has an entry that is not ../{SHARED_FOLDER}/<name> "
                                          "with a size and a SHA-256")
        return
    for entry in entries:
        path, size, expected = entry["path"], entry["size"], entry["sha256"]
        if not (root / path).is_file():
            result.shared_absent.append(path)
            continue
        if (hashed := _hash_checked(root, path, result)) is None:
            continue
        found_size, found = hashed
        if (found, found_size) != (expected, size):
            result.add(path, "changed", f"the report folder's shared file differs from the manifest (expected "
                                        f"{size} bytes, SHA-256 {expected}; found {found_size} bytes, {found}): "
                                        "report.html runs another script than the one signed")


def _compare_files(root: Path, entries: list[dict[str, Any]], result: VerifyResult) -> None:
    present = set(_bundle_files(root))
    listed = set()
    for entry in entries:
        path, size, expected = entry["path"], entry["size"], entry["sha256"]
        listed.add(path)
        if path not in present:
            result.add(path, "missing", "missing (listed in the manifest)")
            continue
        if (hashed := _hash_checked(root, path, result)) is None:
            continue
        found_size, found = hashed
        problems = []
        if found != expected:
            problems.append(f"SHA-256 differs from the manifest (expected {expected}, found {found})")
        if found_size != size:
            problems.append(f"size differs from the manifest (expected {size} bytes, found {found_size})")
        if problems:
            result.add(path, "changed", "; ".join(problems))
    for path in sorted(present - listed):
        result.add(path, "added", "present but not in the manifest (added after signing)")
