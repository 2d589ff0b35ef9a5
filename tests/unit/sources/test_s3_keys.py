"""The keys, region and addressing a tool in a target is given to read a bucket itself (direct mode)."""

from __future__ import annotations

import os

import pytest
from pydantic import SecretStr

from tests.unit.sources.conftest import Bucket, s3, s3_endpoint
from verification.config import S3Settings
from verification.errors import SourceError
from verification.sources.s3_keys import addressing_style, signing_keys

__all__ = ["s3", "s3_endpoint"]  # fixtures, used here by name


def test_the_chains_keys_and_region_then_the_settings_own(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-value")
    keys = signing_keys(S3Settings(), "s3://b", "a tool")
    assert keys.access_key_id.get_secret_value() == os.environ["AWS_ACCESS_KEY_ID"]
    assert keys.secret_access_key.get_secret_value() == os.environ["AWS_SECRET_ACCESS_KEY"]
    assert keys.session_token is not None and keys.session_token.get_secret_value() == "session-token-value"
    assert keys.region == os.environ["AWS_DEFAULT_REGION"]
    own = signing_keys(S3Settings(region="ap-south-1", access_key_id=SecretStr("AKIAOWNKEY"),
                                  secret_access_key=SecretStr("own-secret-value")), "s3://b", "a tool")
    assert (own.access_key_id.get_secret_value(), own.region) == ("AKIAOWNKEY", "ap-south-1")
    assert own.secrets == ("own-secret-value", "AKIAOWNKEY")


def test_keys_shorter_than_the_runs_minimum_are_not_listed_to_mask(s3: Bucket) -> None:
    # A test endpoint takes any key: "a" would mask every "a" of a message (verification.redaction's rule).
    keys = signing_keys(S3Settings(access_key_id=SecretStr("a"), secret_access_key=SecretStr("own-secret-value")),
                        "s3://b", "a tool")
    assert keys.secrets == ("own-secret-value",)


def test_no_keys_is_an_error_naming_the_tool_and_where(s3: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(SourceError, match=r"^s3.restore_mode direct needs S3 keys to give SQL Server for s3://b/x: "):
        signing_keys(S3Settings(), "s3://b/x", "SQL Server")


@pytest.mark.parametrize(("style", "endpoint", "expected"), [
    ("path", None, "path"), ("virtual", "https://minio:9000", "virtual"), ("auto", "https://minio:9000", "path"),
    ("auto", None, "virtual")])
def test_the_addressing_style(style: str, endpoint: str | None, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert addressing_style(S3Settings(addressing_style=style, endpoint_url=endpoint)) == expected
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "https://ceph:7480")
    assert addressing_style(S3Settings(addressing_style="auto")) == "path"   # any custom endpoint, however given
