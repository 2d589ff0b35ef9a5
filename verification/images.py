"""Make sure the container images restoreproof needs exist locally (built by docker/build.sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import docker.errors

from verification.errors import ImageMissingError
from verification.targets.docker import docker_client

BUILD_SCRIPT = Path(__file__).resolve().parent.parent / "docker" / "build.sh"


def ensure_image(image: str) -> str:
    """Return `image` once it is present; build it with docker/build.sh from a checkout if it is not."""
    client = docker_client()
    try:
        try:
            client.images.get(image)
            return image
        except docker.errors.ImageNotFound:
            pass
        if not BUILD_SCRIPT.exists():
            raise ImageMissingError(f"image {image} is not present and docker/build.sh is not available to build it")
        completed = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise ImageMissingError(f"building {image} with {BUILD_SCRIPT} failed: {completed.stderr.strip()[-800:]}")
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound as exc:
            raise ImageMissingError(f"{BUILD_SCRIPT} ran but image {image} is still missing") from exc
        return image
    finally:
        client.close()
