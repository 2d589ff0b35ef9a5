"""pgBackRest's repository encryption (`repo1-cipher-type=aes-256-cbc`), read without pgBackRest.

The format, as pgBackRest 2.45 writes it (src/common/crypto/cipherBlock.c, src/info/info.c):

- every file of an encrypted repository is in OpenSSL's salted format: the magic `Salted__`, an
  8-byte salt, then the content in AES-256-CBC with PKCS#7 padding (backup files in bundles or
  block-incremental maps leave the header out; planning never reads those);
- the key and IV come from the passphrase and the salt as OpenSSL's EVP_BytesToKey derives them:
  one iteration of SHA-1, pgBackRest's digest when it names none (no caller names one);
- the passphrases chain: the repository's own (repo1-cipher-pass) opens backup.info and
  archive.info; each keeps another in its `[cipher] cipher-pass`: backup.info's opens the backups'
  manifests, archive.info's the WAL archive (segments, timeline history files); each manifest keeps
  the one its backup's files are encrypted with (a full's, kept by the diffs and incrs on it).

The cipher itself is the `cryptography` library's; only the key derivation, which it does not
offer, is spelt out here (a hash chain over its SHA-1).
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from verification.errors import ConfigError
from verification.model import BackupEncryption, EncryptionState

# The one cipher pgBackRest has (repo1-cipher-type is "none" or this).
CIPHER = "aes-256-cbc"
MAGIC = b"Salted__"
SALT_SIZE = 8
HEADER_SIZE = len(MAGIC) + SALT_SIZE
KEY_SIZE, IV_SIZE, BLOCK_SIZE = 32, 16, 16
PASSPHRASE_SETTING = "postgres.repo_cipher_pass"


class UndecryptableError(Exception):
    """The content does not decrypt with the passphrase: a wrong passphrase, or damaged content.
    Never says more (its callers name the file and decide which)."""


class PassphraseMissingError(ConfigError):
    """The repository is encrypted and no passphrase is configured."""


class WrongPassphraseError(ConfigError):
    """No info file of a stanza decrypts with the configured passphrase (`files`: those tried)."""

    def __init__(self, message: str, files: list[str]) -> None:
        super().__init__(message)
        self.files = files


def is_encrypted(data: bytes) -> bool:
    """Whether a repository file is in pgBackRest's encrypted (OpenSSL salted) format."""
    return data.startswith(MAGIC)


def derive_key_iv(passphrase: bytes, salt: bytes) -> tuple[bytes, bytes]:
    """OpenSSL's EVP_BytesToKey with SHA-1 and one iteration, as pgBackRest calls it: hash blocks
    D_i = SHA1(D_{i-1} || passphrase || salt), concatenated, give the key then the IV."""
    derived, block = b"", b""
    while len(derived) < KEY_SIZE + IV_SIZE:
        digest = hashes.Hash(hashes.SHA1())
        digest.update(block + passphrase + salt)
        block = digest.finalize()
        derived += block
    return derived[:KEY_SIZE], derived[KEY_SIZE:KEY_SIZE + IV_SIZE]


def decrypt(data: bytes, passphrase: str) -> bytes:
    """The plain content of an encrypted repository file; UndecryptableError when it is not in the
    format, or its padding is wrong (what a wrong passphrase gives, 255 times in 256)."""
    if not is_encrypted(data):
        raise UndecryptableError("no 'Salted__' header")
    body = data[HEADER_SIZE:]
    if not body or len(body) % BLOCK_SIZE:
        raise UndecryptableError(f"{len(body)} bytes after the header: not whole {BLOCK_SIZE}-byte blocks")
    key, iv = derive_key_iv(passphrase.encode("utf-8"), data[len(MAGIC):HEADER_SIZE])
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    padded = decryptor.update(body) + decryptor.finalize()
    unpadder = padding.PKCS7(BLOCK_SIZE * 8).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise UndecryptableError("the padding is not valid") from None


def backup_encryption(cipher: str | None, info_file: str, manifest_read: bool) -> BackupEncryption:
    """Whether a backup of the repository is encrypted, and how that is known: from its stanza's
    backup.info (`info_file`, the file read, or its copy) and, once planning has loaded it
    (`manifest_read`), the backup's own manifest. pgBackRest encrypts every file of a repository
    alike (repo1-cipher-type), the backup's files with the key its manifest keeps."""
    read = f"read offline from the repository: {info_file}" + (" and the backup's manifest are" if manifest_read
                                                                 else " is")
    if cipher is None:
        return BackupEncryption(EncryptionState.NOT_ENCRYPTED,
                                f"{read} plain text, not pgBackRest's encrypted format (repo1-cipher-type none)")
    opened = ("decrypt, with the passphrase and the key backup.info keeps for the manifests; the backup's files "
              "are encrypted with the key its manifest keeps" if manifest_read else "decrypts with the passphrase")
    return BackupEncryption(EncryptionState.ENCRYPTED,
                            f"{read} in pgBackRest's encrypted format ({cipher}, repo1-cipher-type) and {opened}",
                            algorithm=cipher)


def missing_passphrase(where: str) -> PassphraseMissingError:
    return PassphraseMissingError(f"encrypted repository ({CIPHER}): set {PASSPHRASE_SETTING} ({where} is encrypted)")


def wrong_passphrase(failed: list[str], where: str) -> WrongPassphraseError:
    return WrongPassphraseError(
        f"wrong passphrase: {PASSPHRASE_SETTING} does not decrypt {failed[0]} of the encrypted repository "
        f"({CIPHER}) at {where}" + (f", nor {', '.join(failed[1:])}" if failed[1:] else "")
        + " (one of them decrypting would prove the passphrase and show the others damaged)", failed)
