"""Make sure the container images restoreproof needs exist locally (built by this folder's build.sh).

The build context ships inside the package (build.sh and one <name>/Dockerfile folder per image),
so an installed restoreproof builds a missing image the same way a checkout does.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

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


def ensure_image(image: str, build_context: Path | None = None) -> str:
    """Return `image` once it is present; build it with build.sh if it is not.

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
        completed = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False,
                                   env=build_environment(build_context))
        if completed.returncode != 0:
            raise ImageMissingError(f"building {image} with {BUILD_SCRIPT} failed: {completed.stderr.strip()[-800:]}")
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound as exc:
            raise ImageMissingError(f"{BUILD_SCRIPT} ran but image {image} is still missing") from exc
        return image
    finally:
        client.close()
