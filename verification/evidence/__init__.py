"""The signed evidence bundle auditors verify: hashes of every file of a run folder (and of the backup
files the restore read), signed with an Ed25519 or HMAC key. See docs/evidence-bundle.md."""

from verification.evidence.backup_hashes import FileHash, hash_source_files, parse_sha256sums, render_sha256sums
from verification.evidence.bundle import (
    BundleInfo,
    EvidenceError,
    Finding,
    VerifyResult,
    verify_bundle,
    write_bundle,
)
from verification.evidence.signing import (
    KeyPair,
    Signer,
    Verifier,
    generate_key_pair,
    load_public_key_file,
    load_signer,
    load_verifier,
)

__all__ = [
    "BundleInfo",
    "EvidenceError",
    "FileHash",
    "Finding",
    "KeyPair",
    "Signer",
    "Verifier",
    "VerifyResult",
    "generate_key_pair",
    "hash_source_files",
    "load_public_key_file",
    "load_signer",
    "load_verifier",
    "parse_sha256sums",
    "render_sha256sums",
    "verify_bundle",
    "write_bundle",
]
