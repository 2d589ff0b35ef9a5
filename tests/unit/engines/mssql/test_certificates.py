"""The configured certificates (mssql.certificates): read and checked before any target, their thumbprints
as SQL Server computes them, and plans that need one not configured refused naming it."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from verification.config import load_settings
from verification.engines.mssql import secret_files
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.certificates import load, require
from verification.engines.mssql.chain import plan
from verification.errors import ConfigError
from verification.model import BackupEncryption, EncryptionState
from verification.sources import LocalSource

PASSWORD = "Pvk'Pa55-word-Ø"  # a quote and a character beyond Latin-1: both must reach SQL Server intact


def make_certificate(folder: Path, name: str = "BackupCert", pem: bool = False) -> tuple[Path, Path, str]:
    """A self-signed certificate as BACKUP CERTIFICATE writes it (DER .cer), a stand-in .pvk beside it,
    and its thumbprint computed here independently (SHA-1 of the DER bytes)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} backup encryption")])
    now = datetime.now(UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(days=1))
                   .not_valid_after(now + timedelta(days=365)).sign(key, hashes.SHA256()))
    der = certificate.public_bytes(serialization.Encoding.DER)
    folder.mkdir(parents=True, exist_ok=True)
    cer, pvk = folder / f"{name}.cer", folder / f"{name}.pvk"
    cer.write_bytes(certificate.public_bytes(serialization.Encoding.PEM) if pem else der)
    # SQL Server's own PVK format; restoreproof never opens it (SQL Server does, in the target).
    pvk.write_bytes(b"\x1e\xf1\xb5\xb0" + hashlib.sha256(der).digest())
    return cer, pvk, "0x" + hashlib.sha1(der).hexdigest().upper()


def settings_with(monkeypatch: pytest.MonkeyPatch, **certificates: tuple[Path, Path]):  # type: ignore[no-untyped-def]
    for name in certificates:
        monkeypatch.setenv(f"RESTOREPROOF_MSSQL__CERTIFICATES__{name.upper()}__PRIVATE_KEY_PASSWORD", PASSWORD)
    return load_settings(mssql={"certificates": {name: {"certificate": str(cer), "private_key": str(pvk)}
                                                 for name, (cer, pvk) in certificates.items()}})


def test_each_certificate_is_read_with_the_thumbprint_sql_server_gives_it(tmp_path, monkeypatch):
    cer, pvk, thumbprint = make_certificate(tmp_path / "a")
    pem, pem_key, pem_thumbprint = make_certificate(tmp_path / "b", "TdeCert", pem=True)
    (backup, tde) = load(settings_with(monkeypatch, BackupCert=(cer, pvk), TdeCert=(pem, pem_key)).mssql)
    assert (backup.name, backup.thumbprint) == ("BackupCert", thumbprint)
    assert backup.subject == "CN=BackupCert backup encryption"
    # PEM is read too, and goes to the target as DER, which CREATE CERTIFICATE ... FROM FILE reads.
    assert tde.thumbprint == pem_thumbprint and tde.der[:1] == b"\x30"
    files = backup.files(0)
    assert files == {"0.cer": cer.read_bytes(), "0.pvk": pvk.read_bytes(), "0.pwd": PASSWORD.encode("utf-16-le")}
    assert secret_files.ENCODING == "utf-16-le"  # what CONVERT(nvarchar(max), varbinary) reads back
    assert PASSWORD not in repr(backup)


@pytest.mark.parametrize(("damage", "said"), [
    ("no certificate", "mssql.certificates.BackupCert.certificate: {cer} does not exist"),
    ("not a certificate", "mssql.certificates.BackupCert.certificate: {cer} is not an X.509 certificate"),
    ("no key", "mssql.certificates.BackupCert.private_key: {pvk} does not exist"),
    ("empty key", "mssql.certificates.BackupCert.private_key: {pvk} is empty"),
])
def test_a_file_that_is_not_there_or_not_a_certificate_is_refused_naming_the_setting(tmp_path, monkeypatch, damage,
                                                                                      said):
    cer, pvk, _ = make_certificate(tmp_path)
    {"no certificate": cer.unlink, "no key": pvk.unlink, "not a certificate": lambda: cer.write_bytes(b"MSCF junk"),
     "empty key": lambda: pvk.write_bytes(b"")}[damage]()
    with pytest.raises(ConfigError) as refused:
        load(settings_with(monkeypatch, BackupCert=(cer, pvk)).mssql)
    assert str(refused.value).startswith(said.format(cer=cer, pvk=pvk))
    assert PASSWORD not in str(refused.value)


def test_a_plan_known_to_need_a_certificate_not_configured_is_refused_naming_the_thumbprint(mssql_corpus, tmp_path,
                                                                                            monkeypatch):
    (db,) = scan(LocalSource(mssql_corpus / "restoretimeclean2016")).databases
    planned = plan(db, "RestoreTimeClean", None)
    needed = "0xA70B9D1DC7B5ECFF4B84205340987FA692EA2889"
    full = planned.chain.backups[0]
    planned.chain.backups[0] = replace(full, encryption=BackupEncryption(
        EncryptionState.ENCRYPTED, "known", "aes_256", "CERTIFICATE", needed))
    cer, pvk, configured = make_certificate(tmp_path)
    certificates = load(settings_with(monkeypatch, BackupCert=(cer, pvk)).mssql)
    with pytest.raises(ConfigError) as refused:
        require([planned], certificates)
    assert str(refused.value) == (
        f"encrypted SQL Server backups: no certificate with thumbprint {needed} is configured (mssql.certificates; "
        f"configured: {configured} (BackupCert)): give the certificate and its private key that the source server "
        "used (BACKUP CERTIFICATE ... WITH PRIVATE KEY); needed by RestoreTimeClean: RestoreTimeClean.bak")
    planned.chain.backups[0] = replace(full, encryption=replace(planned.chain.backups[0].encryption,  # type: ignore[arg-type]
                                                                encryptor_thumbprint=configured))
    require([planned], certificates)  # held: nothing to say
    require([plan(db, "RestoreTimeClean", None)], [])  # unknown offline: the target decides, not this
