"""Whether a SQL Server backup is encrypted, and what a target needs to read it: what the backup's
header can say without a server (little), and what the target's RESTORE HEADERONLY and FILELISTONLY say.

Two kinds, independent of each other (docs/sqlserver-encryption.md, with the sources):
- backup encryption, BACKUP ... WITH ENCRYPTION (ALGORITHM = AES_256, SERVER CERTIFICATE = ...), since
  SQL Server 2014 (12.0): HEADERONLY names it (KeyAlgorithm, EncryptorThumbprint, EncryptorType) without
  the certificate; restoring needs the certificate with its private key in the target's master;
- TDE, the database's own pages encrypted, since SQL Server 2008 (10.0): FILELISTONLY names the
  certificate protecting the database encryption key (TDEThumbprint), and fails with message 33111
  naming that thumbprint when the target does not hold it.

Offline: where a backup's own header records either is not established (no encrypted or TDE backup is
in the corpus, and no public reader of the format documents the fields; the MTF stream headers' own
encryption fields are zero in all 118 corpus files, which tells nothing either way). So the offline
reader says "not encrypted" only where the server that wrote the backup could not encrypt it at all (its
version, from the SSET block); for anything newer it says "unknown", and the target decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from verification.model import BackupEncryption, EncryptionState

TDE_SINCE = 10  # SQL Server 2008
BACKUP_ENCRYPTION_SINCE = 12  # SQL Server 2014
NOT_ENCRYPTED_ALGORITHM = "no_encryption"  # HEADERONLY's KeyAlgorithm for a backup not encrypted (Microsoft docs)
HEADERONLY_COLUMNS = ("KeyAlgorithm", "EncryptorThumbprint", "EncryptorType")
TDE_COLUMN = "TDEThumbprint"
SERVER_DECIDES = "RESTORE HEADERONLY (KeyAlgorithm, EncryptorThumbprint) and FILELISTONLY (TDEThumbprint) in the target"
HEX_RE = re.compile(r"^[0-9A-F]+$")


def major_version(software_version: str | tuple[int, int] | None) -> int | None:
    """The major version of the server that wrote a backup ("10.50", (13, 0)); None where not known."""
    if isinstance(software_version, tuple):
        return software_version[0]
    try:
        return int(str(software_version).split(".")[0])
    except ValueError:
        return None


def backup_encryption_possible(software_version: str | tuple[int, int] | None) -> bool:
    """Whether the server that wrote the backup could encrypt it (BACKUP ... WITH ENCRYPTION): from
    SQL Server 2014 on, and wherever its version is not known."""
    major = major_version(software_version)
    return major is None or major >= BACKUP_ENCRYPTION_SINCE


def tde_possible(software_version: str | tuple[int, int] | None) -> bool:
    major = major_version(software_version)
    return major is None or major >= TDE_SINCE


def _wrote(software_version: str | tuple[int, int] | None) -> str:
    if isinstance(software_version, tuple):
        software_version = f"{software_version[0]}.{software_version[1]}"
    return f"written by SQL Server {software_version}" if software_version else "written by an unknown SQL Server"


def offline(software_version: tuple[int, int]) -> BackupEncryption:
    """What the header read without a server says: only the version of the server that wrote the backup."""
    return from_server(software_version, None, None, "")


def from_server(software_version: str | tuple[int, int] | None, header: Mapping[str, str | None] | None,
                files: Sequence[Mapping[str, str | None]] | None, where: str) -> BackupEncryption:
    """What is known of one backup set: from the version of the server that wrote it, and from what the
    target said of it, its RESTORE HEADERONLY row (`header`) and RESTORE FILELISTONLY rows (`files`),
    None where the target was not asked (offline: both). `where` names the backup in what is said."""
    algorithm = encryptor = encryptor_type = tde = None
    said: list[str] = []
    backup_known = tde_known = False
    if header is not None and all(column in header for column in HEADERONLY_COLUMNS):
        encryptor = thumbprint(header.get("EncryptorThumbprint"))
        raw = header.get("KeyAlgorithm")
        algorithm = raw if raw and raw.strip().lower() != NOT_ENCRYPTED_ALGORITHM else None
        encryptor_type = header.get("EncryptorType") or None
        backup_known = True
        said.append(f"RESTORE HEADERONLY of {where}: " + (
            f"KeyAlgorithm {algorithm}, EncryptorType {encryptor_type or 'NULL'}, EncryptorThumbprint "
            f"{encryptor or 'NULL'}" if encryptor or algorithm else f"KeyAlgorithm {raw or 'NULL'}, no encryptor"))
    elif header is not None:
        said.append(f"RESTORE HEADERONLY of {where} has no {'/'.join(HEADERONLY_COLUMNS)} columns")
    elif not backup_encryption_possible(software_version):
        backup_known = True
        said.append(f"{_wrote(software_version)}, before backup encryption (SQL Server 2014, 12.0)")
    if files and all(TDE_COLUMN in row for row in files):
        tde = next((t for t in (thumbprint(row.get(TDE_COLUMN)) for row in files) if t), None)
        tde_known = True
        said.append(f"RESTORE FILELISTONLY of {where}: " + (f"TDEThumbprint {tde}" if tde else "no TDEThumbprint"))
    elif files is not None:
        said.append(f"RESTORE FILELISTONLY of {where} has no {TDE_COLUMN} column")
    elif not tde_possible(software_version):
        tde_known = True
        said.append(f"{_wrote(software_version)}, before TDE (SQL Server 2008, 10.0)")
    if encryptor or algorithm or tde:
        state = EncryptionState.ENCRYPTED
    elif backup_known and tde_known:
        state = EncryptionState.NOT_ENCRYPTED
    else:
        state = EncryptionState.UNKNOWN
        still = [kind for kind, known in (("BACKUP ... WITH ENCRYPTION", backup_known), ("TDE", tde_known))
                 if not known]
        if header is None and files is None:
            said = said or [_wrote(software_version)]
            decides = (f"{SERVER_DECIDES} decide" if not backup_known
                       else "RESTORE FILELISTONLY (TDEThumbprint) in the target decides")
            said.append(f"cannot tell offline whether it is encrypted ({' or '.join(still)}): where a backup's "
                        f"header records it is not established; {decides}")
        else:
            said.append(f"still unknown: {' and '.join(still)}")
    return BackupEncryption(state, "; ".join(said), algorithm, encryptor_type, encryptor, tde)


def needed(encryptions: Iterable[BackupEncryption | None]) -> list[str]:
    """Every thumbprint these backups need, in order, once."""
    return list(dict.fromkeys(t for e in encryptions if e is not None for t in e.thumbprints))


def thumbprint(value: str | None) -> str | None:
    """A thumbprint as SQL Server prints a varbinary: "0x" and upper-case hex; None for NULL or empty.
    Accepts what people paste (lower case, without 0x, with spaces or colons); anything else is kept
    as given rather than guessed at."""
    if value is None:
        return None
    text = re.sub(r"[\s:]", "", value.strip()).upper()
    text = text[2:] if text.startswith("0X") else text
    if not text:
        return None
    return "0x" + text if HEX_RE.match(text) and len(text) % 2 == 0 else value.strip()
