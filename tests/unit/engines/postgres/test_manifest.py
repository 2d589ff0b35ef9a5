"""Manifests read and proven offline as pgBackRest loads them, on repositories the real pgBackRest 2.45
wrote (conftest: one encrypted, one plain), and on copies of them damaged as disks and people damage
them; what pgBackRest itself then does (`pgbackrest info --set`, which loads a backup's manifest as a
restore does) is asked beside each damage, so the two are held to agree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr

from tests.unit.engines.postgres.conftest import EncryptedRepo
from verification.config import Settings
from verification.engines.postgres.cipher import UndecryptableError, decrypt
from verification.engines.postgres.engine import PostgresEngine
from verification.engines.postgres.manifest import (
    InfoFormatError,
    info_checksum,
    info_values,
    load_info,
    read_manifest,
)
from verification.model import ChainStatus, EncryptionState, RestorePlan
from verification.sources import LocalSource


def backup_key(repo: EncryptedRepo) -> SecretStr | None:
    if not repo.passphrase:
        return None
    info = load_info(decrypt((repo.path / "backup" / repo.stanza / "backup.info").read_bytes(), repo.passphrase))
    return SecretStr(info.value("cipher", "cipher-pass"))


def plan_of(repo: EncryptedRepo) -> RestorePlan:
    settings = Settings()
    settings.postgres.repo_cipher_pass = SecretStr(repo.passphrase) if repo.passphrase else None
    (plan,) = PostgresEngine(settings).plan(LocalSource(repo.path), None).plans
    return plan


def pgbackrest_loads(repo: EncryptedRepo, label: str, tmp_path: Path) -> str:
    """What pgBackRest says of the backup's manifest: "ok", or its own error loading it."""
    cipher = {"PGBACKREST_REPO1_CIPHER_TYPE": "aes-256-cbc", "PGBACKREST_REPO1_CIPHER_PASS": repo.passphrase} \
        if repo.passphrase else {}
    said = subprocess.run(["pgbackrest", f"--stanza={repo.stanza}", f"--repo1-path={repo.path}",
                           f"--lock-path={tmp_path}", f"--log-path={tmp_path}", "--log-level-file=off",
                           "--log-level-console=warn", "info", f"--set={label}"],
                          capture_output=True, text=True, errors="replace", timeout=60, check=False,
                          env={"PATH": os.environ["PATH"], **cipher}).stdout
    if "status: ok" in said:
        return "ok"
    assert "unable to load backup manifest file" in said, said
    return said


def flip(path: Path) -> None:
    """One bit flipped: in an encrypted file, in the middle (CBC: one block garbled, a byte of the next
    changed); in a plain one, in the first digit of a file's size (a size that changed, still JSON)."""
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if data.startswith(b"Salted__") else data.index(b'"size":') + len(b'"size":')
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def newest(repo: EncryptedRepo) -> tuple[str, str]:
    label = repo.backup_labels()[-1]
    return label, f"backup/{repo.stanza}/{label}/backup.manifest"


# -- the format ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["encrypted", "plain"])
def test_every_info_file_and_manifest_pgbackrest_wrote_has_the_checksum_computed_here(
        kind: str, encrypted_repo: EncryptedRepo, plain_repo: EncryptedRepo) -> None:
    repo = encrypted_repo if kind == "encrypted" else plain_repo
    key = backup_key(repo)
    files = sorted(p for p in repo.path.glob("*/*/*.info*")) + sorted(
        p for p in repo.path.glob(f"backup/{repo.stanza}/2*/backup.manifest*"))
    assert len(files) == 8  # two info files, two manifests: each with its copy
    for path in files:
        data = path.read_bytes()
        if repo.passphrase:
            data = decrypt(data, repo.passphrase if path.name.endswith((".info", ".info.copy"))
                           else key.get_secret_value())  # type: ignore[union-attr]
        info = load_info(data)  # raises on a checksum that differs
        assert len(info.value("backrest", "backrest-checksum")) == 40
        # ...and one changed value would change it: the checksum covers the content.
        values = info_values(data.decode())
        section, name, value = values[2]
        assert info_checksum([(section, name, value + " "), *values[3:]]) != info_checksum(values[2:])


def test_a_manifest_s_key_opens_its_backup_s_files_and_is_neither_the_passphrase_nor_backup_info_s(
        encrypted_repo: EncryptedRepo) -> None:
    label, _ = newest(encrypted_repo)
    key = backup_key(encrypted_repo)
    read = read_manifest(LocalSource(encrypted_repo.path), f"backup/{encrypted_repo.stanza}/{label}", label, key)
    assert read.ok and read.encrypted and read.used == read.manifest and read.files > 900
    assert read.files_key is not None and "files_key" not in repr(read)  # never shown
    assert read.files_key.get_secret_value() not in (encrypted_repo.passphrase, key.get_secret_value())  # type: ignore[union-attr]


def test_a_key_holding_an_equals_sign_is_split_where_the_value_becomes_json() -> None:
    assert info_values('[target:file]\npg_data/a=b={"size":1}\n') == [("target:file", "pg_data/a=b", '{"size":1}')]
    # pgBackRest escapes a key's quote and backslash in the text it checksums, nothing else.
    assert info_checksum([("s", 'a"\\b', "1")]) == __import__("hashlib").sha1(b'{"s":{"a\\"\\\\b":1}}').hexdigest()


@pytest.mark.parametrize(("text", "said"), [
    ("x=1\n", "a value outside any section at line 1"),
    ("[]\n", "an empty section name at line 1"),
    ("[s]\nno value here\n", "no key=value at line 2"),
    ("[s]\nk=not json\n", "a value that is not JSON at line 2"),
    ("[s]\n=1\n", "an empty key at line 2"),
    ('[backrest]\nbackrest-format=4\nbackrest-checksum="x"\n', "[backrest] backrest-format is not 5"),
    ("[backrest]\nbackrest-format=5\n", "no [backrest] backrest-checksum"),
])
def test_what_pgbackrest_would_not_load_is_refused_saying_why_and_never_quoting_a_value(text: str, said: str) -> None:
    with pytest.raises(InfoFormatError) as refused:
        load_info(text.encode())
    assert str(refused.value) == said


# -- damaged manifests: a plan rule, failed, naming the files ------------------------------------------------


@pytest.mark.parametrize("kind", ["encrypted", "plain"])
def test_a_manifest_and_its_copy_damaged_fail_the_plan_naming_both(
        kind: str, encrypted_copy: EncryptedRepo, plain_copy: EncryptedRepo, tmp_path: Path) -> None:
    repo = encrypted_copy if kind == "encrypted" else plain_copy
    label, manifest = newest(repo)
    assert plan_of(repo).chain.status is ChainStatus.COMPLETE
    for path in (manifest, manifest + ".copy"):
        flip(repo.path / path)
    assert pgbackrest_loads(repo, label, tmp_path) != "ok"  # pgBackRest cannot load it either
    plan = plan_of(repo)
    assert plan.chain.status is ChainStatus.BROKEN
    (problem,) = plan.chain.problems
    assert problem.code == "damaged-manifest" and problem.files == (manifest, manifest + ".copy")
    assert problem.message.startswith(f"backup {label}, needed by {label}, cannot be restored: neither backup.manifest "
                                      f"nor its copy loads as pgBackRest loads them: {manifest}: ")
    assert f"; {manifest}.copy: " in problem.message
    if kind == "plain":  # a garbled block of an encrypted one may fail the padding, the format or the checksum
        assert problem.message.endswith(f"{manifest}.copy: its content does not match its backrest-checksum (SHA-1)")
    rule = next(r for r in plan.chain.rules if r.rule == "manifests-load")
    assert (rule.passed, rule.detail.endswith(f"; not: {label}")) == (False, True)
    # The chain is still listed (the manifest's backup exists), the others' manifests proven.
    assert [b.label for b in plan.chain.backups] == repo.backup_labels()
    assert rule.detail.startswith("1 of 2 manifests load")


@pytest.mark.parametrize("kind", ["encrypted", "plain"])
def test_a_damaged_manifest_with_a_sound_copy_plans_from_the_copy_as_pgbackrest_does(
        kind: str, encrypted_copy: EncryptedRepo, plain_copy: EncryptedRepo, tmp_path: Path) -> None:
    repo = encrypted_copy if kind == "encrypted" else plain_copy
    label, manifest = newest(repo)
    flip(repo.path / manifest)
    assert pgbackrest_loads(repo, label, tmp_path) == "ok"  # pgBackRest falls back to the copy
    plan = plan_of(repo)
    assert plan.chain.status is ChainStatus.COMPLETE and plan.chain.problems == []
    rule = next(r for r in plan.chain.rules if r.rule == "manifests-load")
    assert rule.passed and f"; {manifest}: " in rule.detail
    assert rule.detail.endswith(": its copy loaded instead, as pgBackRest does")


def test_an_encrypted_manifest_that_a_wrong_key_would_give_is_named_never_taken_for_a_wrong_passphrase(
        encrypted_copy: EncryptedRepo, tmp_path: Path) -> None:
    """The manifest of another repository (its own key) where this backup's was: backup.info's key does
    not open it. The passphrase was proven by backup.info, so it is the manifest that is wrong."""
    _, manifest = newest(encrypted_copy)
    key = backup_key(encrypted_copy)
    assert key is not None
    while True:  # about 1 in 256 random texts happens to end in valid padding: those decrypt into noise
        other = b"Salted__" + os.urandom(8) + os.urandom(16 * 64)
        try:
            decrypt(other, key.get_secret_value())
        except UndecryptableError:
            break
    for path in (manifest, manifest + ".copy"):
        (encrypted_copy.path / path).write_bytes(other)
    plan = plan_of(encrypted_copy)
    (problem,) = plan.chain.problems
    assert problem.code == "damaged-manifest" and problem.files == (manifest, manifest + ".copy")
    assert f"{manifest}: does not decrypt with the key backup.info keeps for the manifests" in problem.message


def test_a_plain_manifest_in_an_encrypted_repository_is_damaged(encrypted_copy: EncryptedRepo,
                                                                  plain_repo: EncryptedRepo) -> None:
    _, manifest = newest(encrypted_copy)
    (encrypted_copy.path / manifest).write_bytes((plain_repo.path / newest(plain_repo)[1]).read_bytes())
    (encrypted_copy.path / (manifest + ".copy")).unlink()
    (problem,) = plan_of(encrypted_copy).chain.problems
    assert problem.files == (manifest,)
    assert f"{manifest}: not encrypted, in an encrypted repository (no 'Salted__' header)" in problem.message


def test_a_sound_manifest_of_another_backup_is_refused_without_trying_its_copy(plain_copy: EncryptedRepo,
                                                                                tmp_path: Path) -> None:
    """pgBackRest checks the label once the manifest has loaded (restoreManifestValidate): no copy then."""
    full, incr = plain_copy.backup_labels()
    manifest = f"backup/{plain_copy.stanza}/{incr}/backup.manifest"
    (plain_copy.path / manifest).write_bytes((plain_copy.path / f"backup/{plain_copy.stanza}/{full}/backup.manifest")
                                             .read_bytes())
    (problem,) = plan_of(plain_copy).chain.problems
    assert problem.files == (manifest,)
    assert problem.message.endswith(f"cannot be restored: {manifest} is the manifest of backup {full}, not of {incr} "
                                    "([backup] backup-label)")


# -- the report's encryption -------------------------------------------------------------------------------


def test_each_backup_says_whether_it_is_encrypted_and_how_that_is_known(encrypted_repo: EncryptedRepo,
                                                                      plain_repo: EncryptedRepo) -> None:
    for repo, state in ((encrypted_repo, EncryptionState.ENCRYPTED), (plain_repo, EncryptionState.NOT_ENCRYPTED)):
        plan = plan_of(repo)
        encryptions = {b.encryption for b in plan.chain.backups}
        assert len(encryptions) == 1 and len(plan.chain.backups) == 2
        (encryption,) = encryptions
        assert encryption is not None and encryption.state is state
        info = f"backup/{repo.stanza}/backup.info"
        if state is EncryptionState.ENCRYPTED:
            assert encryption.algorithm == "aes-256-cbc"
            assert encryption.basis == (
                f"read offline from the repository: {info} and the backup's manifest are in pgBackRest's encrypted "
                "format (aes-256-cbc, repo1-cipher-type) and decrypt, with the passphrase and the key backup.info "
                "keeps for the manifests; the backup's files are encrypted with the key its manifest keeps")
        else:
            assert encryption.algorithm is None
            assert encryption.basis == (f"read offline from the repository: {info} and the backup's manifest are plain "
                                        "text, not pgBackRest's encrypted format (repo1-cipher-type none)")
        assert encryption.thumbprints == ()


def test_a_decrypted_info_file_keeps_its_key_out_of_its_repr(encrypted_repo: EncryptedRepo) -> None:
    info = load_info(decrypt((encrypted_repo.path / "backup" / encrypted_repo.stanza / "backup.info").read_bytes(),
                             encrypted_repo.passphrase))
    key = info.value("cipher", "cipher-pass")
    assert len(key) >= 32 and key not in repr(info) and key not in str(info)
