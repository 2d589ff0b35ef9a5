"""What the target's pgBackRest must be to read a backup: the file layouts its manifests say it uses.

pgBackRest has kept one repository format (5, checked on every info file) across all these versions,
but each version reads only the layouts it knows. An older one does not refuse a manifest that says
more: its loader reads the keys it knows and skips the rest (2.33's manifestLoadCallback, for one), so
it would look for a bundled file at its own path, find none and say "file missing", which reads as
damage. The plan therefore names what each layout needs, and a target older than that is refused
before it starts (an error naming both versions), never left to fail.

The oldest version that reads each layout, from pgBackRest's release notes (doc/xml/release/):
- `backup-bundle`: 2.39, where bundling stopped being experimental (2.38 wrote it first; 2.39 renamed
  its options and changed how restore reads bundles);
- `backup-bundle-raw`: 2.45, which added the raw (headerless) compression and encryption of bundled and
  block incremental files;
- `backup-block-incr`: 2.48. 2.46 finalised the format 2.45 had as a beta, 2.47 kept block incremental
  information through delta backups and 2.48 fixed restoring a block incremental file with no block
  list; an older reader could fail a good backup.
A layout key restoreproof does not know needs at least the pgBackRest that wrote the backup (and no
target meets it when backup.info does not say which one did).
"""

from __future__ import annotations

import re

from verification.engines.postgres.manifest import ManifestRead
from verification.model import ToolNeed

TOOL = "pgBackRest"
READS_SINCE = {
    "backup-bundle": ("file bundling", "2.39"),
    "backup-bundle-raw": ("bundles in raw compression", "2.45"),
    "backup-block-incr": ("block incremental", "2.48"),
}
UNKNOWN = "unknown"


def version_key(version: str) -> tuple[int, ...]:
    """"2.55.1" -> (2, 55, 1), for ordering; what follows the numbers (a packager's suffix) is ignored."""
    numbers = re.match(r"\d+(?:\.\d+)*", version.strip())
    if numbers is None:
        raise ValueError(f"not a version: {version!r}")
    parts = [int(part) for part in numbers.group(0).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()  # 2.54.0 is 2.54
    return tuple(parts)


def reader_needs(manifests: list[ManifestRead], writers: dict[str, str]) -> list[ToolNeed]:
    """Per layout the chain's manifests use, the oldest pgBackRest that reads it; `writers` is each
    backup's label -> the pgBackRest version that wrote it (backup.info's backrest-version)."""
    needs: dict[str, ToolNeed] = {}
    for manifest in manifests:
        for key in manifest.layout:
            known = READS_SINCE.get(key)
            if known is not None:
                what, version = known
            else:  # no version is known to read it when backup.info does not say which one wrote it
                what, version = "a layout restoreproof does not know", writers.get(manifest.label, UNKNOWN)
            if key not in needs:
                needs[key] = ToolNeed(TOOL, version, f"{what}: [backup] {key} in {manifest.used}")
    return list(needs.values())


def unmet(needs: list[ToolNeed], has: str) -> list[ToolNeed]:
    """The needs a target whose pgBackRest is `has` does not meet."""
    return [need for need in needs
            if need.tool == TOOL and (need.version == UNKNOWN or version_key(has) < version_key(need.version))]
