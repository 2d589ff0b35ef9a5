"""Which PostgreSQL and pgBackRest wrote a stanza's backups, and the image that can restore them.

A server opens only the data files of its own major, so the target's image is chosen from the backup
(backup.info's db-version for the target backup's db-id) and checked before any target starts: a
backup no image here can restore is an error naming what it needs and what the target has.
"""

from __future__ import annotations

import contextlib
import re

import docker.errors
import requests

from verification.config import DockerSettings
from verification.engines.postgres.repository import Stanza
from verification.engines.postgres.repository_format import UNKNOWN, unmet, version_key
from verification.errors import ImageMissingError, TargetError
from verification.images import (
    ensure_image,
    image_environment,
    image_labels,
    image_name,
    image_present,
    suites,
    wheels,
)
from verification.model import BackupSet, ChainStatus, RestorePlan
from verification.targets.docker import docker_client
from verification.targets.labels import labels, new_run_id

SERVER = "PostgreSQL"
TOOL = "pgBackRest"
# The images build.sh makes, one per PostgreSQL major (verification/images/postgres/SUITES).
IMAGE_NAME = "postgres"
MAJOR_LABEL = "restoreproof.postgres-major"
TOOL_LABEL = "restoreproof.pgbackrest-version"
# Seconds a throwaway container of an unlabelled image is given to say its pgBackRest version.
PROBE_SECONDS = 60
# The Debian packages put a major's programs here, and the images put them on PATH.
BIN_ON_PATH = re.compile(r"/usr/lib/postgresql/([0-9.]+)/bin")


def written_by(stanza: Stanza, backup: BackupSet | None) -> dict[str, str]:
    """The PostgreSQL major of the cluster the backup was taken from (its db-id's db-version: a
    stanza-upgrade keeps older clusters' backups) and the pgBackRest version that wrote it."""
    major = stanza.db_version
    if backup is not None and backup.db_id is not None:
        major = stanza.db_versions.get(backup.db_id, major)
    said = {SERVER: major} if major else {}
    if backup is not None and (tool := backup.extra.get("backrest_version")):
        said[TOOL] = str(tool)
    return said


# How each program names its version (`postgres --version`, `pgbackrest version`).
SAID_VERSION = {SERVER: ("postgres", re.compile(r"^postgres \(PostgreSQL\) (\S+)")),
                TOOL: ("pgbackrest", re.compile(rf"^{TOOL} (\S+)$"))}


def said_versions(tool_versions: dict[str, str]) -> dict[str, str]:
    """PostgreSQL's and pgBackRest's versions, as their programs in the target named them."""
    said = {}
    for product, (program, words) in SAID_VERSION.items():
        if (found := words.match(tool_versions.get(program, "").strip())) is not None:
            said[product] = found.group(1)
    return said


def default_image(major: str) -> str:
    return image_name(IMAGE_NAME, major)


def image_major(image: str) -> str | None:
    """The PostgreSQL major an image runs: its label, else the major whose programs are on its PATH."""
    if major := image_labels(image).get(MAJOR_LABEL):
        return major
    found = BIN_ON_PATH.search(image_environment(image).get("PATH", ""))
    return found.group(1) if found else None


def needs(plan: RestorePlan) -> str:
    tool = plan.written_by.get(TOOL)
    written = f" (written by {TOOL} {tool})" if tool else ""
    return f"{plan.database}: the backup needs {SERVER} {plan.written_by.get(SERVER)}{written}"


def _configured(docker: DockerSettings, major: str) -> tuple[str, str] | None:
    """The image the settings give this major, and the setting that gave it; None: the default."""
    if major in docker.postgres_images:
        return docker.postgres_images[major], f"docker.postgres_images[{major}]"
    if "postgres_image" in docker.model_fields_set:
        return docker.postgres_image, "docker.postgres_image"
    return None


def image_for(docker: DockerSettings, plan: RestorePlan) -> str:
    """The image that restores `plan`'s backup, present (built on demand) and holding its PostgreSQL
    major; a TargetError naming both versions and the setting to change when there is none."""
    major = plan.written_by[SERVER]
    configured = _configured(docker, major)
    image, setting = configured or (default_image(major), "")
    known = suites(IMAGE_NAME, docker.build_context)
    if configured is None and (wheel := wheels(IMAGE_NAME, docker.build_context).get(major)):
        # Not Debian's build: used only when asked for by name, so whoever signs its verdicts chose it.
        raise ImageMissingError(
            f"{needs(plan)}; PostgreSQL {major} is in no Debian suite this machine's mirror serves; "
            f"{image} can be built with the server of the PyPI wheel {wheel} (a community build, pinned by its "
            f"sha256, not signed: docs/postgres-versions.md says whose it is and what it lacks): to use it, set "
            f"docker.postgres_images: {{{major}: {image}}}")
    # A build folder without SUITES (one recipe) and an image made some other way are judged by what they hold.
    if configured is None and known and major not in known and not image_present(image):
        raise ImageMissingError(
            f"{needs(plan)}; PostgreSQL {major} is not supported here: no Debian suite this machine's mirror "
            f"serves has it, nor a pinned PyPI wheel, and images are built for PostgreSQL "
            f"{', '.join(known) or 'none'}; "
            f"set docker.postgres_images: {{{major}: <an image with PostgreSQL {major} and pgBackRest>}}")
    try:
        ensure_image(image, docker.build_context)
    except ImageMissingError as exc:
        raise ImageMissingError(f"{needs(plan)}; {exc}") from exc
    has = image_major(image)
    if has == major:
        return image
    what = f"has PostgreSQL {has}" if has else \
        f"does not say which PostgreSQL it has (no label {MAJOR_LABEL}, no /usr/lib/postgresql/<major>/bin on its PATH)"
    fix = f"set docker.postgres_images: {{{major}: <an image with PostgreSQL {major}>}}"
    if setting == "docker.postgres_image":
        fix += f", or unset docker.postgres_image to use {default_image(major)}"
    raise TargetError(f"{needs(plan)}; the target image {image} ({setting or 'the default'}) {what}; {fix}")


def image_tool_version(image: str) -> str | None:
    """The pgBackRest version an image holds: its label, else `pgbackrest version` asked in a container
    of it (labelled, removed once it has answered or after PROBE_SECONDS: an image whose entry point
    ignores the command would otherwise never answer); None when it does not answer with one."""
    if tool := image_labels(image).get(TOOL_LABEL):
        return tool
    client = docker_client()
    probe = None
    try:
        probe = client.containers.run(image, ["pgbackrest", "version"], detach=True, network_disabled=True,
                                      labels=labels(new_run_id(), "version-probe"))
        probe.wait(timeout=PROBE_SECONDS)
        said = probe.logs(stdout=True, stderr=True)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return None
    finally:
        if probe is not None:
            with contextlib.suppress(docker.errors.DockerException):
                probe.remove(force=True)
        client.close()
    return said_versions({"pgbackrest": bytes(said).decode(errors="replace")}).get(TOOL)


def _reads_the_layout(image: str, docker: DockerSettings, plan: RestorePlan) -> None:
    """Nothing when the image's pgBackRest reads every layout the backup uses (plan.needs); else a
    TargetError naming what the backup needs, what the image has and the setting to change."""
    if not plan.needs:
        return
    major = plan.written_by[SERVER]
    setting = (_configured(docker, major) or ("", "the default"))[1]
    refusal = layout_refusal(plan, image_tool_version(image), f"the target image {image} ({setting})",
                             f"no label {TOOL_LABEL}, and `pgbackrest version` in it did not answer",
                             f"docker.postgres_images: {{{major}: <an image with PostgreSQL {major} and {TOOL} "
                             "{version} or newer>}")
    if refusal is not None:
        raise TargetError(refusal)


def layout_refusal(plan: RestorePlan, has: str | None, target: str, unsaid: str, setting: str) -> str | None:
    """Why a target whose pgBackRest is `has` (None: it did not say, `unsaid` says why) cannot read the
    backup's layouts, naming `setting` (its "{version}" is the version needed) as the fix; None: it can."""
    missing = unmet(plan.needs, has) if has else plan.needs
    if not missing:
        return None
    wanted = _newest([need.version for need in missing])
    which = f"has {TOOL} {has}" if has else f"does not say which {TOOL} it has ({unsaid})"
    why = "; ".join(f"{need.why} (read by {TOOL} {need.version} and newer)" for need in missing)
    return (f"{needs(plan)}; reading it needs {TOOL} {wanted} or newer: {why}; {target} {which}; set "
            + setting.replace("{version}", wanted))


def _newest(versions: list[str]) -> str:
    known = [v for v in versions if v != UNKNOWN]
    return UNKNOWN if len(known) < len(versions) else max(known, key=version_key)


def images_for(docker: DockerSettings, plans: list[RestorePlan]) -> dict[str, str]:
    """Database -> its image, for every plan whose backup says its PostgreSQL major; each image is
    made present and checked once, before any target starts."""
    chosen: dict[str, str] = {}
    by_major: dict[str, str] = {}
    for plan in plans:
        if plan.chain.status is not ChainStatus.COMPLETE or plan.target_backup is None or SERVER not in plan.written_by:
            continue  # not restored
        major = plan.written_by[SERVER]
        if major not in by_major:
            by_major[major] = image_for(docker, plan)
        _reads_the_layout(by_major[major], docker, plan)  # each backup's own layouts
        chosen[plan.database] = by_major[major]
    return chosen
