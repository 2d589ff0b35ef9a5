"""The demo's S3 settings without Docker: where its repository goes and what pgBackRest is told
(tests/integration/test_s3_direct.py makes the demo in a real endpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from verification.demo.s3_endpoint import LocalS3Endpoint
from verification.demo.source import CA_INSIDE, DemoError, DemoResult, DemoS3
from verification.targets.egress import Endpoint


def test_the_local_endpoint_by_the_name_its_certificate_holds() -> None:
    endpoint = LocalS3Endpoint(port=45678, ca_file=Path("/tmp/ca.pem"))
    s3 = DemoS3.local(endpoint)
    # pgBackRest checks DNS names only: localhost, never 127.0.0.1.
    assert s3.endpoint_url == "https://localhost:45678" and endpoint.url == "https://127.0.0.1:45678"
    # Keys of its own each time (moto takes any), none of them a word of the demo's output.
    other = DemoS3.local(endpoint)
    assert s3.access_key_id.startswith("RPDEMO") and len(s3.secret_access_key.get_secret_value()) >= 40
    assert s3.access_key_id != other.access_key_id and s3.secret_access_key != other.secret_access_key
    assert "restoreproof-demo" not in (s3.access_key_id, s3.secret_access_key.get_secret_value())
    assert s3.url == "s3://restoreproof-demo/" and s3.endpoint() == Endpoint("localhost", 45678)


def test_the_pgbackrest_configuration() -> None:
    s3 = DemoS3("https://localhost:9443", "AKIAX", SecretStr("s3cr3t"), prefix="/pg/demo/", ca_file=Path("/ca.pem"))
    assert s3.url == "s3://restoreproof-demo/pg/demo/"
    assert s3.pgbackrest_conf().splitlines() == [
        "repo1-type=s3", "repo1-path=/pg/demo", "repo1-s3-bucket=restoreproof-demo", "repo1-s3-endpoint=localhost",
        "repo1-storage-port=9443", "repo1-s3-region=us-east-1", "repo1-s3-uri-style=path", "repo1-s3-key=AKIAX",
        "repo1-s3-key-secret=s3cr3t", f"repo1-storage-ca-file={CA_INSIDE}", "process-max=4"]
    assert "s3cr3t" not in repr(s3)  # a SecretStr


def test_host_style_needs_a_name() -> None:
    named = DemoS3("https://s3.example.com", "k", SecretStr("s"), bucket="b", uri_style="host")
    assert named.endpoint().host_names == ("s3.example.com", "b.s3.example.com")
    with pytest.raises(DemoError, match="virtual-host style needs a name"):
        DemoS3("https://127.0.0.1:9000", "k", SecretStr("s"), uri_style="host").endpoint()


def test_a_result_names_its_source() -> None:
    local = DemoResult(Path("/w"), Path("/w/backups"), ["demo1"], {}, reused=False)
    in_s3 = DemoResult(Path("/w"), Path("/w/backups"), ["demo1"], {}, reused=False, url="s3://restoreproof-demo/")
    assert (local.source, in_s3.source) == ("/w/backups", "s3://restoreproof-demo/")
