"""pgBackRest's encryption read back from files the real pgBackRest 2.45 wrote (conftest.encrypted_repo),
with the passphrase chain its info files keep."""

from __future__ import annotations

import configparser
import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.engines.postgres.conftest import HISTORY, EncryptedRepo
from verification.engines.postgres.cipher import (
    HEADER_SIZE,
    MAGIC,
    UndecryptableError,
    decrypt,
    derive_key_iv,
    is_encrypted,
)


def info(data: bytes) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read_string(data.decode("utf-8"))
    return parser


def sub_pass(parser: configparser.ConfigParser) -> str:
    value = json.loads(parser.get("cipher", "cipher-pass"))
    assert isinstance(value, str) and len(value) >= 32
    return value


def test_key_and_iv_are_openssls():
    # openssl enc -aes-256-cbc -md sha1 -S 0102030405060708 -pass pass:restoreproof -P  (OpenSSL 3.0.19)
    key, iv = derive_key_iv(b"restoreproof", bytes.fromhex("0102030405060708"))
    assert key.hex().upper() == "CCB8838C8BD55E4A129B9618073D041519C2A3DFE1FFF3885BAE20259BC06472"
    assert iv.hex().upper() == "2FEEAE827D5FD7F2B081486168541BE4"


def test_every_info_file_and_its_copy_opens_with_the_repository_passphrase(encrypted_repo: EncryptedRepo):
    for path in sorted(encrypted_repo.path.glob("*/*/*.info*")):
        data = path.read_bytes()
        assert is_encrypted(data), path
        parser = info(decrypt(data, encrypted_repo.passphrase))
        assert parser.get("db", "db-version") == '"15"'
        assert sub_pass(parser) != encrypted_repo.passphrase


def test_manifests_open_with_backup_info_s_key_and_hold_their_own(encrypted_repo: EncryptedRepo):
    backup = encrypted_repo.path / "backup" / encrypted_repo.stanza
    key = sub_pass(info(decrypt((backup / "backup.info").read_bytes(), encrypted_repo.passphrase)))
    labels = encrypted_repo.backup_labels()
    assert len(labels) == 2
    for label in labels:
        manifest = info(decrypt((backup / label / "backup.manifest").read_bytes(), key))
        assert json.loads(manifest.get("backup", "backup-label")) == label
        # ...and its own opens the backup's files: the full's PG_VERSION, gzip-compressed, as the cluster had it.
        files_key = sub_pass(manifest)
        if label == labels[0]:
            version = decrypt((backup / label / "pg_data" / "PG_VERSION.gz").read_bytes(), files_key)
            assert gzip.decompress(version) == b"15\n"
        with pytest.raises(UndecryptableError):  # the repository's own passphrase does not open it
            decrypt((backup / label / "backup.manifest").read_bytes(), encrypted_repo.passphrase)


def test_the_archive_opens_with_archive_info_s_key(encrypted_repo: EncryptedRepo):
    archive = encrypted_repo.path / "archive" / encrypted_repo.stanza
    key = sub_pass(info(decrypt((archive / "archive.info").read_bytes(), encrypted_repo.passphrase)))
    assert decrypt((archive / "15-1" / "00000002.history").read_bytes(), key).decode() == HISTORY
    segment = next((archive / "15-1" / "0000000100000000").glob("000000010000000000000001-*.gz"))
    assert len(gzip.decompress(decrypt(segment.read_bytes(), key))) == 16 * 1024 * 1024


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command on this host")
def test_decrypts_as_the_openssl_command_does(encrypted_repo: EncryptedRepo):
    path = encrypted_repo.path / "backup" / encrypted_repo.stanza / "backup.info"
    theirs = subprocess.run(["openssl", "enc", "-d", "-aes-256-cbc", "-md", "sha1", "-pass", "env:PASS", "-in", str(path)],
                            capture_output=True, check=True, env={"PASS": encrypted_repo.passphrase}).stdout
    assert decrypt(path.read_bytes(), encrypted_repo.passphrase) == theirs


@pytest.mark.parametrize("damage", ["padding byte flipped", "cut short", "no header"])
def test_what_does_not_decrypt_says_so(encrypted_repo: EncryptedRepo, damage: str):
    data = (encrypted_repo.path / "backup" / encrypted_repo.stanza / "backup.info").read_bytes()
    if damage == "padding byte flipped":
        # CBC: a byte flipped in the block before the last flips the same byte of the last plain block,
        # here its last, the padding's length (1 to 16), into something no padding has.
        at = len(data) - 17
        data = data[:at] + bytes([data[at] ^ 0xF0]) + data[at + 1:]
    elif damage == "cut short":
        data = data[:-5]
    else:
        data = data[len(MAGIC):]
    with pytest.raises(UndecryptableError):
        decrypt(data, encrypted_repo.passphrase)


def test_a_wrong_passphrase_never_gives_the_content(encrypted_repo: EncryptedRepo):
    data = (encrypted_repo.path / "backup" / encrypted_repo.stanza / "backup.info").read_bytes()
    refused = 0
    for wrong in (f"{encrypted_repo.passphrase}{n}" for n in range(16)):
        try:
            said = decrypt(data, wrong)
        except UndecryptableError:
            refused += 1
            continue
        assert b"[backrest]" not in said  # a padding that happens to look right: garbage all the same
    assert refused >= 12  # 255 in 256 refused by the padding itself


def test_a_plain_file_is_not_taken_for_encrypted(captured_repo: Path):
    assert not is_encrypted((captured_repo / "backup/demo1/backup.info").read_bytes())
    assert HEADER_SIZE == 16
