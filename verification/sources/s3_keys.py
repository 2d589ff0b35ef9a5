"""What a tool inside a restore target needs to read a bucket itself (s3.restore_mode: direct): the keys
boto3 signs with, the region it signs for, and the addressing style it uses, resolved once here from the
settings and the standard AWS chain, so every engine hands its tool the same ones the source listed with.

A target without a network cannot ask an instance's metadata service or read ~/.aws itself: the keys are
resolved on this host and given to the tool (pgBackRest's environment, SQL Server's credential).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from pydantic import SecretStr

from verification.config import S3Settings
from verification.errors import SourceError
from verification.redaction import masked


@dataclass(frozen=True)
class SigningKeys:
    access_key_id: SecretStr
    secret_access_key: SecretStr
    session_token: SecretStr | None
    # The region the settings or the AWS chain name (s3.region, AWS_REGION, AWS_DEFAULT_REGION, the
    # profile's); None when none does.
    region: str | None

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values, longest first (one containing another is masked whole), as every redactor of the
        run masks them: none shorter than MIN_SECRET_LENGTH (it would mask ordinary words)."""
        values = [self.access_key_id, self.secret_access_key, self.session_token]
        return tuple(masked(v.get_secret_value() for v in values if v is not None))


def signing_keys(settings: S3Settings, where: str, tool: str) -> SigningKeys:
    """The keys boto3 signs with for these settings (the settings' own, else the AWS chain's), for `tool`
    to read `where` with; a SourceError naming where and the provider (never a key) when there are none."""
    import boto3

    session = boto3.session.Session(
        profile_name=settings.profile, region_name=settings.region,
        aws_access_key_id=settings.access_key_id.get_secret_value() if settings.access_key_id else None,
        aws_secret_access_key=settings.secret_access_key.get_secret_value() if settings.secret_access_key else None)
    try:
        credentials = session.get_credentials()
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
    except Exception as exc:  # botocore's many credential errors: the message names the provider, no key
        raise SourceError(f"no S3 keys for {tool} to read {where} with: {type(exc).__name__}") from None
    if frozen is None or not frozen.access_key or not frozen.secret_key:
        raise SourceError(f"s3.restore_mode direct needs S3 keys to give {tool} for {where}: none in "
                          "s3.access_key_id/s3.secret_access_key nor in the AWS credential chain")
    return SigningKeys(SecretStr(frozen.access_key), SecretStr(frozen.secret_key),
                       SecretStr(frozen.token) if frozen.token else None, session.region_name or None)


def addressing_style(settings: S3Settings) -> Literal["path", "virtual"]:
    """The source's addressing style; for auto, as botocore chooses: virtual-host style at AWS itself,
    path style at any other endpoint."""
    style = settings.addressing_style
    if style == "auto":
        custom = settings.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return "path" if custom else "virtual"
    return style
