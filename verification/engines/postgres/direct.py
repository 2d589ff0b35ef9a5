"""Direct mode: pgBackRest in the target reads a repository in S3 itself (`repo1-type=s3`).

The target keeps `network_mode="none"` and gets no repository mount; its one way out is an egress
link to the S3 endpoint (verification/targets/egress.py), under the endpoint's own name, so the TLS
certificate check is pgBackRest's own and real. pgBackRest 2.45 matches a certificate's DNS names
only (an endpoint named by an IP address never passes its check): name the endpoint as its
certificate does.

The keys reach pgBackRest only through the environment of each command run in the target (never a
command line: pgBackRest refuses secure options there anyway), and every output read back from the
target has them masked before it becomes evidence, a reason or a log line.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr

from verification import redaction
from verification.config import S3Settings, Settings
from verification.errors import TargetError
from verification.redaction import MASK as MASK  # what the tests and callers compare with
from verification.sources.base import Source
from verification.sources.s3_keys import addressing_style, signing_keys
from verification.targets.base import ExecResult, ResourceLimited, Target
from verification.targets.docker import DockerTargetProvider
from verification.targets.egress import Endpoint

CA_NAME = "s3-ca.pem"


@dataclass(frozen=True)
class S3Repository:
    """A pgBackRest repository in S3 and how the target's pgBackRest reaches it."""

    bucket: str
    prefix: str                     # the repository's folder in the bucket ("" for its root)
    endpoint_url: str               # https://host[:port], as the certificate names the host
    region: str
    access_key_id: SecretStr
    secret_access_key: SecretStr
    session_token: SecretStr | None = None
    uri_style: Literal["path", "host"] = "path"
    verify_tls: bool = True
    ca_file: Path | None = None     # on this host; copied into the target
    endpoint: Endpoint = field(init=False)

    def __post_init__(self) -> None:
        url = Endpoint.from_url(self.endpoint_url)
        if not url.host_names:
            # The host is an address (a local endpoint's 127.0.0.1): its certificate cannot pass
            # pgBackRest's name check, whatever it covers.
            raise TargetError(f"pgBackRest checks an S3 endpoint's certificate by DNS name only: name the endpoint "
                              f"{self.endpoint_url} by a name its certificate holds (e.g. localhost for 127.0.0.1)")
        names = (f"{self.bucket}.{url.host}",) if self.uri_style == "host" else ()
        object.__setattr__(self, "endpoint", Endpoint(url.host, url.port, names))

    @property
    def url(self) -> str:
        prefix = self.prefix.strip("/")
        return f"s3://{self.bucket}/{prefix + '/' if prefix else ''}"

    def object_url(self, path: str) -> str:
        """The object a path in pgBackRest's messages names: its storage path is the key under the bucket
        (repo1-path included), with a leading slash."""
        return f"s3://{self.bucket}/{path.lstrip('/')}"

    def options(self, ca_inside: str | None) -> list[str]:
        """pgBackRest's repository options (no key among them), for the command line."""
        options = ["--repo1-type=s3", f"--repo1-path=/{self.prefix.strip('/')}", f"--repo1-s3-bucket={self.bucket}",
                   f"--repo1-s3-endpoint={self.endpoint.host}", f"--repo1-storage-port={self.endpoint.port}",
                   f"--repo1-s3-region={self.region}", f"--repo1-s3-uri-style={self.uri_style}"]
        if not self.verify_tls:
            options.append("--repo1-storage-verify-tls=n")
        elif ca_inside is not None:
            options.append(f"--repo1-storage-ca-file={ca_inside}")
        return options

    def environment(self) -> dict[str, str]:
        """The keys, as pgBackRest reads them from its environment."""
        env = {"PGBACKREST_REPO1_S3_KEY": self.access_key_id.get_secret_value(),
               "PGBACKREST_REPO1_S3_KEY_SECRET": self.secret_access_key.get_secret_value()}
        if self.session_token is not None:
            env["PGBACKREST_REPO1_S3_TOKEN"] = self.session_token.get_secret_value()
        return env

    @property
    def secrets(self) -> tuple[str, ...]:
        """The keys, longest first, as every redactor of the run masks them (none shorter than
        MIN_SECRET_LENGTH, which would mask ordinary words)."""
        values = [self.access_key_id, self.secret_access_key, self.session_token]
        return tuple(redaction.masked(v.get_secret_value() for v in values if v is not None))


def is_direct(source: Source) -> bool:
    """Whether pgBackRest in the target reads `source` itself: it is in S3, and s3.restore_mode is direct."""
    from verification.sources.s3 import S3Source

    return isinstance(source, S3Source) and source.settings.restore_mode == "direct"


def direct_repository(source: Source, settings: Settings) -> S3Repository | None:
    """The repository in S3 that pgBackRest in the target reads itself, when `source` is in S3 and
    s3.restore_mode is direct; None otherwise. Everything comes from the source: its bucket and prefix,
    the endpoint and region its client uses, its settings' addressing, TLS and CA, and the keys it
    signs with (the settings' or the AWS chain's)."""
    from verification.sources.s3 import S3Source

    if not is_direct(source) or not isinstance(source, S3Source):
        return None
    s3 = source.settings
    key, secret, token = _credentials(s3, source.describe())
    ca_file = s3.ca_bundle or (Path(os.environ["AWS_CA_BUNDLE"]) if os.environ.get("AWS_CA_BUNDLE") else None)
    return S3Repository(source.bucket, source.prefix, source.endpoint, source.client.meta.region_name or "us-east-1",
                        SecretStr(key), SecretStr(secret), SecretStr(token) if token else None,
                        uri_style=uri_style(s3), verify_tls=s3.verify_tls, ca_file=ca_file)


def uri_style(settings: S3Settings) -> Literal["path", "host"]:
    """pgBackRest's repo1-s3-uri-style for the source's addressing style (sources/s3_keys.py)."""
    return "host" if addressing_style(settings) == "virtual" else "path"


def _credentials(settings: S3Settings, where: str) -> tuple[str, str, str | None]:
    """The keys boto3 signs with for these settings (the settings' own, else the AWS chain's): pgBackRest
    in a target without a network cannot ask an instance's metadata service for them itself."""
    keys = signing_keys(settings, where, "pgBackRest")
    return (keys.access_key_id.get_secret_value(), keys.secret_access_key.get_secret_value(),
            keys.session_token.get_secret_value() if keys.session_token else None)


def masked(text: str, secrets: tuple[str, ...]) -> str:
    """`text` with the secrets masked by the run's own rule (verification.redaction)."""
    return redaction.Redactor.of(secrets)(text)


class DirectTarget:
    """A Docker target whose pgBackRest reads `repository` in S3: the keys go into the environment of
    every command, and are masked in everything read back."""

    def __init__(self, inner: Target, repository: S3Repository, ca_inside: str | None) -> None:
        self.inner = inner
        self.repository = repository
        self.ca_inside = ca_inside
        self.kind = inner.kind
        self.name = inner.name
        self.repo_path = repository.url   # nothing is mounted: the repository is where pgBackRest reads it
        self.work_dir = inner.work_dir
        self.provision_seconds = inner.provision_seconds
        self.exchange = inner.exchange

    def pgbackrest_options(self) -> list[str]:
        return self.repository.options(self.ca_inside)

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        result = self.inner.run(argv, timeout=timeout, env={**(env or {}), **self.repository.environment()})
        secrets = self.repository.secrets
        result.stdout, result.stderr = masked(result.stdout, secrets), masked(result.stderr, secrets)
        return result

    def write_text(self, path: str, text: str) -> None:
        self.inner.write_text(path, text)

    def read_text(self, path: str) -> str:
        return masked(self.inner.read_text(path), self.repository.secrets)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "repository": self.repository.url}

    def exhausted(self) -> list[str]:
        return self.inner.exhausted() if isinstance(self.inner, ResourceLimited) else []

    def close(self) -> None:
        self.inner.close()


class DirectTargetProvider:
    """Docker targets with no repository mount and one way out, to the repository's S3 endpoint."""

    kind = "docker"

    def __init__(self, settings: Settings, image: str, repository: S3Repository,
                 images: dict[str, str] | None = None, refused: dict[str, str] | None = None) -> None:
        self.repository = repository
        self.inner = DockerTargetProvider(settings.docker, image, settings.state_dir, egress=repository.endpoint,
                                          mount_repository=False, images=images, refused=refused)

    def provision(self, run_id: str, database: str, repo_host_path: str, role: str = "target") -> Target:
        target = self.inner.provision(run_id, database, repo_host_path, role)
        if role != "target":
            return target  # a probe only measures a start
        try:
            ca_inside = None
            if self.repository.ca_file is not None and self.repository.verify_tls:
                ca_inside = f"{target.work_dir}/{CA_NAME}"
                target.write_text(ca_inside, self.repository.ca_file.read_text())
            return DirectTarget(target, self.repository, ca_inside)
        except BaseException as exc:
            with contextlib.suppress(TargetError):
                target.close()
            if isinstance(exc, OSError):
                raise TargetError(f"cannot read the S3 endpoint's CA file {self.repository.ca_file}: {exc}") from exc
            raise
