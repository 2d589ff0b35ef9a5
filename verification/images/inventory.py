"""What restoreproof's local images hold: each image's versions, as the labels build.sh gives it say
(`restoreproof.<what>-version`), and the Docker engine they run on. Read, never built or pulled."""

from __future__ import annotations

import re
from dataclasses import dataclass

import docker.errors
import requests

from docker import DockerClient
from verification.errors import EngineUnavailableError
from verification.targets.docker import docker_client

VERSION_LABEL = re.compile(r"^restoreproof\.(?P<what>[a-z0-9.-]+)-version$")
REFERENCE = "restoreproof/*"


@dataclass(frozen=True)
class ImageVersions:
    """One local image of restoreproof's: its tag and what its labels say it holds."""

    tag: str
    versions: dict[str, str]

    def line(self) -> str:
        held = ", ".join(f"{what} {version}" for what, version in sorted(self.versions.items()))
        return f"image {self.tag}: {held or 'no version labels (built by another recipe)'}"


def versions_in(labels: dict[str, str] | None) -> dict[str, str]:
    """The `restoreproof.<what>-version` labels of an image, as {what: version}."""
    found = {key: VERSION_LABEL.match(key) for key in labels or {}}
    return {match["what"]: (labels or {})[key] for key, match in found.items() if match}


def local_images(client: DockerClient) -> list[ImageVersions]:
    """Every local restoreproof/* image by tag, in tag order (an image with several tags once per tag)."""
    images = client.images.list(filters={"reference": REFERENCE})
    return sorted((ImageVersions(tag, versions_in(image.labels)) for image in images for tag in image.tags
                   if tag.startswith("restoreproof/")), key=lambda found: found.tag)


def engine_version(client: DockerClient) -> str:
    """The Docker engine's version and API version, as the engine says them."""
    said = client.version()
    return f"{said.get('Version', 'unknown')} (API {said.get('ApiVersion', 'unknown')})"


def describe(client: DockerClient | None = None) -> list[str]:
    """Lines naming the Docker engine and each local image with its versions; where the engine cannot be
    reached, one line saying why (the images are then unknown, not absent)."""
    try:
        client = client or docker_client()
        lines = [f"Docker engine {engine_version(client)}"]
        images = local_images(client)
    except (EngineUnavailableError, docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return [f"Docker engine: not reachable ({exc}); images unknown"]
    if not images:
        return [*lines, "images: none built yet (`make images`, or built on first use)"]
    return [*lines, *(image.line() for image in images)]
