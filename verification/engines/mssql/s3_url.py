"""SQL Server reads the backups from S3 itself (s3.restore_mode: direct): RESTORE ... FROM URL = 's3://...'.

SQL Server 2022's S3 connector (docs/sqlserver-s3-direct.md has the rules and their sources):

- a URL names one object, in path style `s3://host[:port]/bucket/key` or virtual-host style
  `s3://bucket.host[:port]/key`, always over HTTPS, at most 259 characters;
- the keys come from a server credential whose name is the URL or a prefix of it (SQL Server tries the
  URL, then each shorter prefix down to the bucket, and takes the longest match); its IDENTITY is
  'S3 Access Key' and its SECRET '<access key id>:<secret key id>', so neither may hold a ':';
- a striped media set is restored with one URL per family, every family in one statement;
- the region goes in RESTORE_OPTIONS = '{"s3": {"region": "..."}}' (us-east-1 when not given);
- BUFFERCOUNT is not supported, and MAXTRANSFERSIZE (5 to 20 MB) is the backup's own.

Everything here is decided from the source, the settings and the plan, before any container starts:
what cannot work is refused then, naming the setting.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import SecretStr

from verification.config import MSSQL_2022, MssqlSettings, Settings
from verification.engines.mssql import secret_files
from verification.engines.mssql.tsql import ident, literal
from verification.errors import ConfigError, TargetError
from verification.model import BackupSet
from verification.redaction import MASK as MASK  # what the tests and callers compare with
from verification.redaction import Redactor, masked
from verification.sources.base import Source
from verification.sources.s3_keys import addressing_style, signing_keys
from verification.targets.egress import Endpoint

IDENTITY = "S3 Access Key"
CREDENTIAL_FILE = "s3-credential.secret"   # in the target's folder of secret files, while the credential is made
MAX_URL = 259             # characters, s3:// included
MAX_CREDENTIAL_NAME = 128
# Where SQL Server on Linux reads the CA certificates it trusts for HTTPS endpoints, when it starts.
CA_DIR = "/var/opt/mssql/security/ca-certificates"
# Characters an object key cannot carry unescaped in a URL (SQL Server documents no escaping of its own).
UNSAFE_KEY = re.compile(r"[\s?#%\\\x00-\x1f\x7f]")


@dataclass(frozen=True)
class S3Location:
    """Where SQL Server in the target reads the source's objects, and with which keys."""

    host: str
    port: int | None                  # as the endpoint URL gives it; None: HTTPS's 443
    bucket: str
    prefix: str                       # the source's folder in the bucket, '' or ending with '/'
    access_key_id: SecretStr
    secret_access_key: SecretStr
    style: Literal["path", "virtual"] = "path"
    region: str | None = None         # None: SQL Server's default, us-east-1
    ca_file: Path | None = None       # on this host; trusted by SQL Server in the target
    endpoint: Endpoint = field(init=False)

    def __post_init__(self) -> None:
        for value, name in ((self.access_key_id, "access key id"), (self.secret_access_key, "secret access key")):
            if ":" in value.get_secret_value():
                # SECRET = '<access key id>:<secret key id>': a ':' in either cannot be told apart.
                raise ConfigError(f"the S3 {name} (s3.access_key_id/s3.secret_access_key or the AWS chain's) "
                                  "holds a ':', which SQL Server's S3 credential (SECRET = '<access key id>:<secret "
                                  "key id>') cannot express: use keys without one, or s3.restore_mode stage")
        names = (f"{self.bucket}.{self.host}",) if self.style == "virtual" else ()
        try:
            object.__setattr__(self, "endpoint", Endpoint(self.host, self.port or 443, names))
        except TargetError as exc:
            raise ConfigError(f"s3.endpoint_url: the target cannot reach {self.host} through its one way out: "
                              f"{exc}") from None
        if len(self.credential_name) > MAX_CREDENTIAL_NAME:
            raise ConfigError(f"the SQL Server credential for {self.credential_name} would be "
                              f"{len(self.credential_name)} characters, more than SQL Server's {MAX_CREDENTIAL_NAME}: "
                              "give a shorter bucket or folder, or use s3.restore_mode stage")

    @property
    def authority(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"

    @property
    def base(self) -> str:
        """The bucket's URL, without a trailing '/'."""
        if self.style == "virtual":
            return f"s3://{self.bucket}.{self.authority}"
        return f"s3://{self.authority}/{self.bucket}"

    @property
    def credential_name(self) -> str:
        """The source's folder as a URL prefix (no trailing '/'): every object restored is under it."""
        folder = self.prefix.strip("/")
        return f"{self.base}/{folder}" if folder else self.base

    def url(self, path: str) -> str:
        """The URL SQL Server reads one of the source's objects at."""
        return f"{self.base}/{self.prefix}{path}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown, also as a T-SQL literal writes it (a ' doubled), longest first; as
        every redactor of the run masks (verification.redaction.masked): none shorter than
        MIN_SECRET_LENGTH, which would mask ordinary words."""
        values = {v.get_secret_value() for v in (self.access_key_id, self.secret_access_key)}
        values |= {v.replace("'", "''") for v in values}
        return tuple(masked(values))

    def mask(self, text: str) -> str:
        return Redactor(secrets=list(self.secrets))(text)


def credential_files(location: S3Location) -> dict[str, bytes]:
    """The credential's SECRET ('<access key id>:<secret key id>') as the one file SQL Server reads it from
    (engines/mssql/secret_files.py): the keys go into the target as a file, never in a statement."""
    secret = f"{location.access_key_id.get_secret_value()}:{location.secret_access_key.get_secret_value()}"
    return {CREDENTIAL_FILE: secret_files.encoded(secret)}


def create_credential(location: S3Location, folder: str) -> str:
    """The server credential SQL Server finds for every URL under the source (made in master), its SECRET
    read by the server from the file of `credential_files` in `folder`: CREATE CREDENTIAL takes the secret
    as a literal only, and the statement sent carries the file's path, never the keys."""
    before = (f"CREATE CREDENTIAL {ident(location.credential_name)} WITH IDENTITY = {literal(IDENTITY)}, "
              "SECRET = N'")
    return "USE master; " + secret_files.reading(f"{folder}/{CREDENTIAL_FILE}", before, "';")


@dataclass(frozen=True)
class Urls:
    """tsql.Media for objects in S3: one URL per file, the region in RESTORE_OPTIONS when one is set."""

    location: S3Location

    def devices(self, relative_paths: list[str]) -> str:
        return ", ".join(f"URL = {literal(self.location.url(p))}" for p in relative_paths)

    @property
    def options(self) -> list[str]:
        if self.location.region is None:
            return []
        return [f"RESTORE_OPTIONS = {literal(json.dumps({'s3': {'region': self.location.region}}))}"]


def stripe_problems(sets: list[list[BackupSet]]) -> list[str]:
    """Each backup set whose files are not every family of its media set ('k/n' each): SQL Server needs
    all of them in one RESTORE (message 3132 otherwise), so none is started."""
    problems = []
    for group in sets:
        counts = {int(b.family.split("/")[1]) for b in group if b.family and "/" in b.family}
        numbers = {int(b.family.split("/")[0]) for b in group if b.family and "/" in b.family}
        if len(counts) != 1 or len(group) != len(numbers):
            problems.append(f"the backup set of {', '.join(b.name for b in group)} does not say which "
                            f"families of its media set its files are ({[b.family for b in group]})")
            continue
        (count,) = counts
        missing = sorted(set(range(1, count + 1)) - numbers)
        if missing or len(group) != count:
            problems.append(f"the backup set of {', '.join(b.name for b in group)} is striped over {count} "
                            f"files (media set {group[0].media_set_guid}) but the plan has {len(group)}: family "
                            f"{', '.join(map(str, missing))} missing; SQL Server restores a striped set only from all "
                            "of its stripes at once")
    return problems


def url_problems(location: S3Location, paths: list[str]) -> list[str]:
    """The plan's objects SQL Server could not be given as URLs, each named."""
    problems = []
    for path in paths:
        url = location.url(path)
        if len(url) > MAX_URL:
            problems.append(f"{url} is {len(url)} characters long, more than the {MAX_URL} SQL Server takes for a "
                            "backup URL")
        if UNSAFE_KEY.search(location.prefix + path):
            problems.append(f"{url}: the object's key holds a character a URL cannot carry as it is (a space, "
                            "'?', '#', '%', '\\' or a control character)")
    return problems


def options_refused(settings: MssqlSettings) -> str | None:
    """Why the RESTORE options configured cannot go to the S3 connector, naming the setting; None if they can."""
    if settings.buffer_count is not None:
        return ("mssql.buffer_count: SQL Server's RESTORE FROM URL for S3 does not take BUFFERCOUNT: unset it for "
                "s3.restore_mode direct, or use s3.restore_mode stage")
    if settings.max_transfer_size is not None:
        return ("mssql.max_transfer_size: a RESTORE FROM URL for S3 uses the backup's own MAXTRANSFERSIZE (5 to 20 "
                "MB): unset it for s3.restore_mode direct, or use s3.restore_mode stage")
    return None


def refuse(settings: Settings, kind: str, endpoint_url: str) -> None:
    """What SQL Server's S3 connector cannot do with these settings: a ConfigError naming the setting."""
    why = None
    if kind == "local":
        why = ("s3.restore_mode direct restores into a SQL Server container only (SQL Server in it reads S3 through "
               "its one way out): use --target docker or auto, or s3.restore_mode stage")
    elif urlsplit(endpoint_url).scheme != "https":
        why = (f"s3.restore_mode direct: SQL Server's S3 connector speaks HTTPS only, and the endpoint {endpoint_url} "
               "(s3.endpoint_url or AWS_ENDPOINT_URL) is not https://: use an HTTPS endpoint, or s3.restore_mode stage")
    elif not settings.s3.verify_tls:
        why = ("s3.verify_tls: false cannot apply to SQL Server, whose S3 connector always checks the endpoint's "
               "certificate: give the endpoint's CA as s3.ca_bundle, or use s3.restore_mode stage")
    elif (refused := options_refused(settings.mssql)) is not None:
        why = refused
    elif settings.mssql.edition.lower().startswith("express"):
        why = (f"mssql.edition {settings.mssql.edition}: SQL Server Express cannot restore from S3: use another "
               "edition (Developer), or s3.restore_mode stage")
    elif max(settings.mssql.images, default=0) < MSSQL_2022:
        why = ("mssql.images: s3.restore_mode direct needs SQL Server 2022 or newer (RESTORE FROM URL = 's3://...'), "
               f"and no image is configured at DatabaseVersion {MSSQL_2022} or above")
    if why is not None:
        raise ConfigError(why)


def location_for(source: Source, settings: Settings, kind: str) -> S3Location | None:
    """Where SQL Server reads `source` from when it is in S3 and s3.restore_mode is direct (None otherwise),
    after every refusal: all from the source (bucket, prefix, endpoint) and its settings (addressing, CA,
    the keys and region it signs with)."""
    from verification.sources.s3 import S3Source

    if not isinstance(source, S3Source) or source.settings.restore_mode != "direct":
        return None
    s3 = source.settings
    refuse(settings.model_copy(update={"s3": s3}), kind, source.endpoint)
    keys = signing_keys(s3, source.describe(), "SQL Server")
    if keys.session_token is not None:
        raise ConfigError("s3.restore_mode direct: the AWS chain gives temporary keys (a session token), which "
                          "SQL Server's S3 credential cannot carry (an access key id and a secret only): give "
                          "long-term keys as s3.access_key_id/s3.secret_access_key, or use s3.restore_mode stage")
    parts = urlsplit(source.endpoint)
    if not parts.hostname:
        raise ConfigError(f"s3.endpoint_url: {source.endpoint} names no host")
    ca_file = s3.ca_bundle or (Path(os.environ["AWS_CA_BUNDLE"]) if os.environ.get("AWS_CA_BUNDLE") else None)
    return S3Location(parts.hostname, parts.port, source.bucket, source.prefix, keys.access_key_id,
                      keys.secret_access_key, addressing_style(s3), keys.region, ca_file)
