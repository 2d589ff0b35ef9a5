"""The certificates a SQL Server target needs for encrypted backups and TDE databases (mssql.certificates).

Each is a certificate with its private key as the source server's `BACKUP CERTIFICATE ... WITH PRIVATE
KEY` wrote them (a DER .cer and a .pvk protected by a password). Before any target starts, each file is
read here: the certificate is parsed (the `cryptography` library) and its thumbprint computed as SQL
Server computes it, the SHA-1 of the DER certificate (sys.certificates.thumbprint), so that a plan
needing a thumbprint no certificate has is refused then, naming it (exit 2). The private key file is
only checked to be there and readable: its password is checked by SQL Server when the certificate is
created in the target (a wrong one is an error there, naming the certificate).

In the target (engine.py): the files go into the container through Docker's archive upload (never a
command line), with the password in a file of its own beside them, read by SQL Server itself into the
CREATE CERTIFICATE it runs (secret_files.py, as the S3 credential's keys): no statement restoreproof
sends, no output, log or report ever carries the password. The files are removed once the certificates
exist; the certificates and the master key protecting them die with the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from pydantic import SecretStr

from verification.config import MssqlSettings
from verification.engines.mssql import secret_files
from verification.engines.mssql.tsql import ident, literal
from verification.errors import ConfigError
from verification.model import RestorePlan


@dataclass(frozen=True)
class Certificate:
    """One configured certificate, read: what the target is given, and its thumbprint as SQL Server prints it."""

    name: str
    thumbprint: str
    subject: str
    not_after: datetime
    der: bytes = field(repr=False)
    private_key: bytes = field(repr=False)
    password: SecretStr = field(repr=False)
    certificate_path: Path = field(default=Path(), compare=False)

    def files(self, index: int) -> dict[str, bytes]:
        """The three files the target gets, named by position: certificate, private key, password."""
        return {f"{index}.cer": self.der, f"{index}.pvk": self.private_key,
                f"{index}.pwd": secret_files.encoded(self.password.get_secret_value())}


def create_certificate(name: str, certificate: str, private_key: str, password_file: str) -> str:
    """CREATE CERTIFICATE ... FROM FILE ... WITH PRIVATE KEY (FILE = ..., DECRYPTION BY PASSWORD = ...) in
    master, the password read by the server from `password_file` (DECRYPTION BY PASSWORD takes a literal
    only): the statement sent carries the files' paths, never the password."""
    before = (f"CREATE CERTIFICATE {ident(name)} FROM FILE = {literal(certificate)} WITH PRIVATE KEY "
              f"(FILE = {literal(private_key)}, DECRYPTION BY PASSWORD = N'")
    return "USE master; " + secret_files.reading(password_file, before, "');")


def _read(name: str, what: str, path: Path) -> bytes:
    try:
        return path.expanduser().read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"mssql.certificates.{name}.{what}: {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"mssql.certificates.{name}.{what}: cannot read {path}: {exc.strerror or exc}") from None


def thumbprint_of(der: bytes) -> str:
    """SQL Server's thumbprint of a certificate: the SHA-1 of its DER form, "0x" and upper-case hex."""
    certificate = x509.load_der_x509_certificate(der)
    return "0x" + certificate.fingerprint(hashes.SHA1()).hex().upper()  # SHA-1: SQL Server's own choice


def load(settings: MssqlSettings) -> list[Certificate]:
    """Every configured certificate read and checked; ConfigError naming the setting and the file."""
    loaded: list[Certificate] = []
    for name, configured in settings.certificates.items():
        raw = _read(name, "certificate", configured.certificate)
        try:
            parsed = (x509.load_pem_x509_certificate(raw) if raw.lstrip().startswith(b"-----BEGIN")
                      else x509.load_der_x509_certificate(raw))
        except ValueError as exc:
            raise ConfigError(f"mssql.certificates.{name}.certificate: {configured.certificate} is not an X.509 "
                              f"certificate (DER, as BACKUP CERTIFICATE writes it, or PEM): {exc}") from None
        key = _read(name, "private_key", configured.private_key)
        if not key:
            raise ConfigError(f"mssql.certificates.{name}.private_key: {configured.private_key} is empty")
        if configured.private_key_password is None:  # the settings refuse this already; kept for a hand-made one
            raise ConfigError(f"mssql.certificates.{name}.private_key_password is not set")
        der = parsed.public_bytes(serialization.Encoding.DER)
        loaded.append(Certificate(name, thumbprint_of(der), parsed.subject.rfc4514_string(),
                                  parsed.not_valid_after_utc, der, key, configured.private_key_password,
                                  configured.certificate))
    return loaded


def configured_thumbprints(certificates: list[Certificate]) -> str:
    return ", ".join(f"{c.thumbprint} ({c.name})" for c in certificates) or "none"


def missing(thumbprint: str, certificates: list[Certificate]) -> str:
    """What to say of a thumbprint a backup needs and no configured certificate has."""
    return (f"no certificate with thumbprint {thumbprint} is configured (mssql.certificates; configured: "
            f"{configured_thumbprints(certificates)}): give the certificate and its private key that the source "
            "server used (BACKUP CERTIFICATE ... WITH PRIVATE KEY)")


def require(plans: list[RestorePlan], certificates: list[Certificate]) -> None:
    """Refuse, before any target starts, plans whose backups are known to need a certificate not configured."""
    have = {c.thumbprint for c in certificates}
    lacking: dict[str, dict[str, list[str]]] = {}  # thumbprint -> database -> its backups needing it
    for plan in plans:
        for backup in plan.chain.backups:
            for needed in backup.encryption.thumbprints if backup.encryption is not None else ():
                if needed not in have:
                    lacking.setdefault(needed, {}).setdefault(plan.database, []).append(backup.name)
    if lacking:
        said = "; ".join(f"{missing(t, certificates)}; needed by "
                         + ", ".join(f"{database}: {_some(files)}" for database, files in where.items())
                         for t, where in lacking.items())
        raise ConfigError(f"encrypted SQL Server backups: {said}")


def _some(files: list[str], shown: int = 5) -> str:
    return ", ".join(files[:shown]) + (f" (+{len(files) - shown} more)" if len(files) > shown else "")
