"""Capture the backup manifests each pgBackRest version of the images writes, plain, bundled and block
incremental, into tests/fixtures/postgres/manifests/<pgBackRest version>-<layout>/incr.manifest.gz (the [backup]
section is what tests/unit/engines/postgres/test_repository_format.py reads).

    .venv/bin/python scripts/capture-manifest-layouts.py [MAJOR ...]     (default: 13 15 17 18)

Each major's image writes a one-table cluster's full backup, then (bundled, block incremental) an
incremental, with the settings its pgBackRest has: bundling from 2.39, block incremental from 2.46.
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

from verification.demo.source import _SourceCluster
from verification.engines.postgres.versions import default_image
from verification.images import ensure_image, image_labels
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "postgres" / "manifests"
CONF = "/etc/pgbackrest.conf"
LAYOUTS = {"plain": "", "bundle": "repo1-bundle=y\\n", "block": "repo1-bundle=y\\nrepo1-block=y\\n"}
SINCE = {"plain": (0,), "bundle": (2, 39), "block": (2, 46)}


def capture(major: str, layout: str) -> None:
    image = ensure_image(default_image(major))
    tool = image_labels(image)["restoreproof.pgbackrest-version"]
    if tuple(int(p) for p in tool.split(".")[:2]) < SINCE[layout]:
        return
    with tempfile.TemporaryDirectory() as work:
        repo = Path(work) / "repo"
        repo.mkdir()
        cluster = _SourceCluster(docker_client(), image, f"pg{major}", repo, new_run_id())
        try:
            cluster.setup()
            cluster.sh(f"printf '{LAYOUTS[layout]}' >> {CONF}", user="root")
            cluster.psql("create table t (id bigserial primary key, note text not null)")
            cluster.psql("insert into t (note) select 'row ' || g from generate_series(1, 20000) g")
            cluster.backup("full")
            cluster.psql("update t set note = note || '!' where id % 7 = 0")
            cluster.backup("incr")
            cluster.finish()
        finally:
            cluster.remove()
        out = FIXTURES / f"{tool}-{layout}"
        shutil.rmtree(out, ignore_errors=True)
        # The incremental's: it says what its own files need and refers to the full's.
        (manifest,) = (repo / "backup" / f"pg{major}").glob("2*I/backup.manifest")
        out.mkdir(parents=True)
        (out / "incr.manifest.gz").write_bytes(gzip.compress(manifest.read_bytes(), mtime=0))
        print(out)


def main() -> None:
    for major in sys.argv[1:] or ["13", "15", "17", "18"]:
        for layout in LAYOUTS:
            capture(major, layout)


if __name__ == "__main__":
    main()
