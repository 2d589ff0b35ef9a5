"""Signing keys for the evidence bundle: Ed25519 (public-key, the default) or HMAC-SHA256 (shared secret).

Keys come from configuration (`evidence.signing_key` or `evidence.signing_key_file`). Without either,
Ed25519 uses a key made once in the state folder. No message, exception or repr here ever holds key
material: only file names, setting names and key ids (fingerprints).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, Protocol

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from verification.config import Settings
from verification.errors import ConfigError

Algorithm = Literal["ed25519", "hmac"]
ALGORITHMS: Final[tuple[Algorithm, ...]] = ("ed25519", "hmac")
STATE_KEY_NAME = "evidence-signing.pem"


class Signer(Protocol):
    """Signs the manifest's bytes; `key_id` names the key in the bundle without revealing it."""

    @property
    def algorithm(self) -> Algorithm: ...

    @property
    def key_id(self) -> str: ...

    def sign(self, data: bytes) -> bytes: ...


class Verifier(Protocol):
    @property
    def algorithm(self) -> Algorithm: ...

    @property
    def key_id(self) -> str: ...

    def verify(self, data: bytes, signature: bytes) -> bool:
        """True only when `signature` is this key's signature of exactly `data`."""
        ...


def ed25519_key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def hmac_key_id(secret: bytes) -> str:
    # Keyed, not a plain hash of the secret: a published id must not let anyone test guesses of a
    # weak secret offline faster than by forging signatures.
    return "hmac:" + hmac.new(secret, b"restoreproof evidence key id", hashlib.sha256).hexdigest()[:16]


class Ed25519Signer:
    algorithm: Final = "ed25519"

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.key_id = ed25519_key_id(private_key.public_key())

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)

    def verifier(self) -> Ed25519Verifier:
        return Ed25519Verifier(self._key.public_key())

    def __repr__(self) -> str:
        return f"Ed25519Signer(key_id={self.key_id!r})"


class Ed25519Verifier:
    algorithm: Final = "ed25519"

    def __init__(self, public_key: Ed25519PublicKey) -> None:
        self.public_key = public_key
        self.key_id = ed25519_key_id(public_key)

    def verify(self, data: bytes, signature: bytes) -> bool:
        try:
            self.public_key.verify(signature, data)
        except InvalidSignature:
            return False
        return True

    def __repr__(self) -> str:
        return f"Ed25519Verifier(key_id={self.key_id!r})"


class HmacKey:
    """HMAC-SHA256 with a shared secret: the same object signs and verifies."""

    algorithm: Final = "hmac"

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ConfigError("the HMAC signing secret is empty")
        self._secret = secret
        self.key_id = hmac_key_id(secret)

    def sign(self, data: bytes) -> bytes:
        return hmac.new(self._secret, data, hashlib.sha256).digest()

    def verify(self, data: bytes, signature: bytes) -> bool:
        # Constant-time comparison: a timing difference would leak the expected MAC byte by byte.
        return hmac.compare_digest(self.sign(data), signature)

    def __repr__(self) -> str:
        return f"HmacKey(key_id={self.key_id!r})"


def _load_private_pem(data: bytes, where: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise ConfigError(f"{where}: the private key is encrypted; give an unencrypted PEM key") from None
    except (ValueError, UnsupportedAlgorithm):
        # `from None`: the library's message and traceback are kept out of what users see and log.
        raise ConfigError(f"{where} is not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{where} holds a {type(key).__name__.lstrip('_')}, not an Ed25519 private key")
    return key


def _read_key_file(path: Path, setting: str) -> bytes:
    try:
        return path.expanduser().read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{setting} {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{setting} {path} is a folder, not a key file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {setting} {path}: {exc.strerror or type(exc).__name__}") from None


def _configured_key(settings: Settings) -> tuple[bytes, str] | None:
    """The configured key material and how to name it in messages, or None when nothing is configured."""
    evidence = settings.evidence
    if evidence.signing_key is not None and evidence.signing_key_file is not None:
        raise ConfigError("set evidence.signing_key or evidence.signing_key_file, not both")
    if evidence.signing_key is not None:
        return evidence.signing_key.get_secret_value().encode(), "evidence.signing_key"
    if evidence.signing_key_file is not None:
        where = f"evidence.signing_key_file {evidence.signing_key_file}"
        return _read_key_file(evidence.signing_key_file, "evidence.signing_key_file"), where
    return None


def create_file_once(path: Path, data: bytes, mode: int = 0o600) -> bool:
    """Write `path` with `mode` unless it exists; True when this call made it.

    The content goes to a private temporary file first and is hard-linked into place, so no reader
    ever sees a partial key and two concurrent first runs cannot end up signing with different keys.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp: a unique name made with O_EXCL and mode 0600, so the key is never readable by others.
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def _private_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def state_key_path(settings: Settings) -> Path:
    return settings.state_dir.expanduser() / STATE_KEY_NAME


def _state_key(settings: Settings, create: bool) -> Ed25519PrivateKey:
    path = state_key_path(settings)
    if create and not path.exists():
        # Losing a race to another first run is fine: both then read the one key that was linked in.
        try:
            create_file_once(path, _private_pem(Ed25519PrivateKey.generate()))
        except OSError as exc:
            raise ConfigError(f"cannot create the evidence signing key {path}: "
                              f"{exc.strerror or type(exc).__name__}") from None
    if not path.exists():
        raise ConfigError(f"no evidence signing key is configured and there is none at {path}; "
                          "set evidence.signing_key_file, or pass the signer's public key")
    return _load_private_pem(_read_key_file(path, "the state folder's signing key"), str(path))


def _configured_or_state_key(settings: Settings, *, create: bool) -> HmacKey | Ed25519PrivateKey:
    """The HMAC secret, or the Ed25519 private key: the configured one, else the state folder's."""
    configured = _configured_key(settings)
    if settings.evidence.signing == "hmac":
        if configured is None:
            raise ConfigError("evidence.signing is hmac but neither evidence.signing_key nor "
                              "evidence.signing_key_file is set")
        return HmacKey(configured[0].strip())
    if configured is None:
        return _state_key(settings, create=create)
    return _load_private_pem(*configured)


def load_signer(settings: Settings) -> Signer:
    """The signer the configuration names; for Ed25519 without a configured key, the state folder's key
    (made on first use)."""
    key = _configured_or_state_key(settings, create=True)
    return key if isinstance(key, HmacKey) else Ed25519Signer(key)


def load_verifier(settings: Settings) -> Verifier:
    """The verifier for the key `load_signer` would use; never makes a key (nothing could be signed by it)."""
    key = _configured_or_state_key(settings, create=False)
    return key if isinstance(key, HmacKey) else Ed25519Verifier(key.public_key())


def load_public_key_file(path: Path) -> Ed25519Verifier:
    """A verifier from a PEM public key file (what `evidence keygen` writes beside the private key)."""
    data = _read_key_file(path, "public key file")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError(f"public key file {path} is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"public key file {path} does not hold an Ed25519 public key")
    return Ed25519Verifier(key)


@dataclass(frozen=True)
class KeyPair:
    private_path: Path
    public_path: Path
    key_id: str


def generate_key_pair(out: Path) -> KeyPair:
    """A new Ed25519 key: the private key at `out` (0600) and the public key at `out`.pub (0644).

    Refuses to overwrite either file: replacing a signing key by accident orphans every bundle it signed.
    """
    public_path = out.with_name(out.name + ".pub")
    for path in (out, public_path):
        if path.exists():
            raise ConfigError(f"{path} already exists; not overwriting a key")
    key = Ed25519PrivateKey.generate()
    if not create_file_once(out, _private_pem(key), 0o600):
        raise ConfigError(f"{out} already exists; not overwriting a key")
    if not create_file_once(public_path, public_pem(key.public_key()), 0o644):
        raise ConfigError(f"{public_path} already exists; not overwriting a key")
    return KeyPair(private_path=out, public_path=public_path, key_id=ed25519_key_id(key.public_key()))
