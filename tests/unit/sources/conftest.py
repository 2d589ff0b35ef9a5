"""A real S3 endpoint (moto's server mode in its own process, TLS from its own CA) for the S3 source's tests.

One endpoint per session; each test gets its own bucket and the standard AWS environment pointing at
the endpoint (AWS_ENDPOINT_URL, keys, region, AWS_CA_BUNDLE), with the host's own AWS configuration
and the instance-metadata lookup kept out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.unit.sources.s3_helpers import upload_tree
from verification.demo.s3_endpoint import LocalS3Endpoint


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[LocalS3Endpoint]:
    with LocalS3Endpoint() as endpoint:
        yield endpoint


def isolate_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS setting of the host or the person running the tests reaches boto3."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                 "AWS_CA_BUNDLE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@dataclass
class Bucket:
    endpoint: LocalS3Endpoint
    name: str
    client: Any

    def url(self, prefix: str = "") -> str:
        return f"s3://{self.name}/{prefix}".rstrip("/")

    def upload(self, root: Path, prefix: str, mapping: dict[str, Path] | None = None) -> int:
        return upload_tree(self.client, self.name, prefix, root, mapping)

    def put(self, key: str, body: bytes = b"", **extra: Any) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=body, **extra)


@pytest.fixture
def s3(s3_endpoint: LocalS3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Bucket:
    isolate_aws(monkeypatch, tmp_path)
    for name, value in s3_endpoint.client_environment().items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", config=Config(max_pool_connections=32))
    name = f"rp-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    return Bucket(s3_endpoint, name, client)
