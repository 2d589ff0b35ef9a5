"""Whether a SQL Server backup is encrypted: what the header read offline can say (only what the writing
server's version rules out, on real corpus files and copies of them with that version changed), and what
the target's RESTORE HEADERONLY and FILELISTONLY rows say."""

from __future__ import annotations

import pytest

from tests.unit.engines.mssql.mtf_edit import Backup
from verification.engines.mssql.encryption import (
    backup_encryption_possible,
    from_server,
    needed,
    offline,
    thumbprint,
)
from verification.model import BackupEncryption, EncryptionState

THUMB = "0x192834B1A8B932393B9101D24B8F759A49BB1397"  # as message 33111 prints it (a real capture)
NOT_ENCRYPTED_ROW = {"KeyAlgorithm": None, "EncryptorThumbprint": None, "EncryptorType": None}


def sset_version(backup: Backup, major: int, minor: int = 0) -> None:
    """The writing server's version, as the SSET block keeps it (+93, +94)."""
    at = next(at for at in range(0, len(backup.data), 512) if backup.data[at:at + 4] == b"SSET")
    backup.data[at + 93], backup.data[at + 94] = major, minor
    backup.fix_block(at)


@pytest.mark.parametrize(("rel", "kinds"), [
    ("RestoreTimeClean/RestoreTimeClean.bak", "(TDE)"),                                   # 2008 R2
    ("restoretimeclean2016/RestoreTimeClean.bak", "(BACKUP ... WITH ENCRYPTION or TDE)"),   # 2016
    ("restoretimeclean2016/RestoreTimeClean2_1.trn", "(BACKUP ... WITH ENCRYPTION or TDE)"),
])
def test_a_real_backup_a_server_that_could_encrypt_wrote_is_unknown_offline_never_not_encrypted(mssql_corpus, rel,
                                                                                                   kinds):
    header = Backup((mssql_corpus / rel).read_bytes()).header(rel)
    assert header.encryption is not None
    assert header.encryption.state is EncryptionState.UNKNOWN
    assert f"cannot tell offline whether it is encrypted {kinds}" in header.encryption.basis
    assert header.encryption.thumbprints == ()


def test_the_version_of_the_writing_server_is_what_rules_encryption_out(mssql_corpus):
    original = (mssql_corpus / "RestoreTimeClean/RestoreTimeClean2_1.trn").read_bytes()
    older = Backup(original)
    sset_version(older, 9)  # SQL Server 2005: neither TDE (2008) nor backup encryption (2014) existed
    said = older.header().encryption
    assert said is not None and said.state is EncryptionState.NOT_ENCRYPTED
    assert said.basis == ("written by SQL Server 9.0, before backup encryption (SQL Server 2014, 12.0); written by "
                          "SQL Server 9.0, before TDE (SQL Server 2008, 10.0)")
    newer = Backup(original)
    sset_version(newer, 12)  # SQL Server 2014: both exist
    said = newer.header().encryption
    assert said is not None and said.state is EncryptionState.UNKNOWN
    assert "(BACKUP ... WITH ENCRYPTION or TDE)" in said.basis
    assert "RESTORE HEADERONLY (KeyAlgorithm, EncryptorThumbprint) and FILELISTONLY (TDEThumbprint)" in said.basis


def test_only_servers_from_2014_on_are_asked_for_headeronly():
    assert not backup_encryption_possible("10.50") and not backup_encryption_possible((11, 0))
    assert backup_encryption_possible("12.0") and backup_encryption_possible((16, 0))
    assert backup_encryption_possible(None) and backup_encryption_possible("garbage")  # not known: asked


def test_headeronly_naming_an_encryptor_makes_the_backup_encrypted_with_what_it_needs():
    row = {"KeyAlgorithm": "aes_256", "EncryptorThumbprint": THUMB.lower(), "EncryptorType": "CERTIFICATE"}
    said = from_server("13.0", row, None, "x.bak")
    assert said == BackupEncryption(
        EncryptionState.ENCRYPTED, f"RESTORE HEADERONLY of x.bak: KeyAlgorithm aes_256, EncryptorType CERTIFICATE, "
                                   f"EncryptorThumbprint {THUMB}", "aes_256", "CERTIFICATE", THUMB, None)
    assert said.thumbprints == (THUMB,)


def test_no_encryptor_and_no_tde_thumbprint_is_not_encrypted_only_when_both_were_asked():
    both = from_server("13.0", {**NOT_ENCRYPTED_ROW, "KeyAlgorithm": "NO_Encryption"}, [{"TDEThumbprint": None}], "x")
    assert both.state is EncryptionState.NOT_ENCRYPTED and both.algorithm is None
    only_header = from_server("13.0", NOT_ENCRYPTED_ROW, None, "x")
    assert only_header.state is EncryptionState.UNKNOWN and only_header.basis.endswith("still unknown: TDE")
    # A 2008 R2 backup cannot carry backup encryption: FILELISTONLY alone settles it.
    old = from_server("10.50", None, [{"TDEThumbprint": None}, {"TDEThumbprint": None}], "x")
    assert old.state is EncryptionState.NOT_ENCRYPTED
    # A server whose FILELISTONLY has no TDEThumbprint column (older than 2008) says nothing of TDE.
    bare = from_server("13.0", NOT_ENCRYPTED_ROW, [{"LogicalName": "x"}], "x")
    assert bare.state is EncryptionState.UNKNOWN and "has no TDEThumbprint column" in bare.basis


def test_a_tde_thumbprint_in_filelistonly_names_the_certificate_needed():
    said = from_server("10.50", None, [{"TDEThumbprint": None}, {"TDEThumbprint": THUMB}], "full.bak")
    assert (said.state, said.tde_thumbprint, said.thumbprints) == (EncryptionState.ENCRYPTED, THUMB, (THUMB,))
    assert "RESTORE FILELISTONLY of full.bak: TDEThumbprint 0x1928" in said.basis


def test_thumbprints_are_written_as_sql_server_prints_them():
    assert thumbprint("19 28 34 b1:a8") == "0x192834B1A8"
    assert thumbprint("0xabcd") == "0xABCD" and thumbprint(None) is None and thumbprint(" ") is None
    assert thumbprint("not hex") == "not hex"  # kept as given, never guessed at
    assert needed([offline((13, 0)), from_server("10.50", None, [{"TDEThumbprint": THUMB}], "x"), None,
                   from_server("10.50", None, [{"TDEThumbprint": THUMB}], "y")]) == [THUMB]
