"""The file layouts a backup's manifest says it uses, read from manifests each pgBackRest version of the
images wrote (scripts/capture-manifest-layouts.py), and the pgBackRest each layout needs."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from verification.engines.postgres.manifest import ManifestRead, info_checksum, info_values, load_info, read_manifest
from verification.engines.postgres.repository_format import UNKNOWN, reader_needs, unmet, version_key
from verification.model import ToolNeed
from verification.sources.local import LocalSource

MANIFESTS = Path(__file__).resolve().parents[3] / "fixtures" / "postgres" / "manifests"


def captured_text(captured: str) -> str:
    return gzip.decompress((MANIFESTS / captured / "incr.manifest.gz").read_bytes()).decode()


def edited(captured: str, old: str, new: str) -> str:
    """The captured manifest with `old` made `new`, its checksum made again as pgBackRest would write it."""
    text = captured_text(captured).replace(old, new, 1)
    values = info_values(text)
    said = next(value for _, key, value in values if key == "backrest-checksum")
    return text.replace(f"backrest-checksum={said}", f'backrest-checksum="{info_checksum(values)}"')


def manifest_of(captured: str, tmp_path: Path, edit: str | None = None) -> ManifestRead:
    """The captured incremental's manifest, read as planning reads it, from a repository folder of its own."""
    text = captured_text(captured)
    label = load_info(text.encode()).value("backup", "backup-label")
    folder = tmp_path / "backup" / "s" / label
    folder.mkdir(parents=True)
    (folder / "backup.manifest").write_text(text if edit is None else edit)
    return read_manifest(LocalSource(tmp_path), f"backup/s/{label}", label, None)


@pytest.mark.parametrize(("captured", "layout"), [
    ("2.33-plain", ()), ("2.45-plain", ()), ("2.55.1-plain", ()), ("2.60.0-plain", ()),
    ("2.45-bundle", ("backup-bundle",)), ("2.55.1-bundle", ("backup-bundle",)), ("2.60.0-bundle", ("backup-bundle",)),
    ("2.55.1-block", ("backup-block-incr", "backup-bundle", "backup-bundle-raw")),
    ("2.60.0-block", ("backup-block-incr", "backup-bundle", "backup-bundle-raw")),
])
def test_each_version_s_manifest_says_its_layout_and_nothing_else(captured: str, layout: tuple[str, ...],
                                                                   tmp_path: Path) -> None:
    read = manifest_of(captured, tmp_path)
    assert read.ok, read.problem
    assert read.layout == layout


def test_a_plain_backup_of_any_version_needs_nothing_of_the_target(tmp_path: Path) -> None:
    assert reader_needs([manifest_of("2.60.0-plain", tmp_path)], {}) == []


def test_block_incremental_needs_2_48_bundling_2_39_and_raw_bundles_2_45(tmp_path: Path) -> None:
    read = manifest_of("2.55.1-block", tmp_path)
    needs = {need.version: need.why for need in reader_needs([read], {read.label: "2.55.1"})}
    assert set(needs) == {"2.48", "2.39", "2.45"}
    assert needs["2.48"] == f"block incremental: [backup] backup-block-incr in {read.used}"
    assert needs["2.39"].startswith("file bundling: [backup] backup-bundle in ")
    assert needs["2.45"].startswith("bundles in raw compression: [backup] backup-bundle-raw in ")


@pytest.mark.parametrize(("has", "left"), [
    ("2.33", ["2.39", "2.45", "2.48"]), ("2.45", ["2.48"]), ("2.47", ["2.48"]), ("2.48", []), ("2.48.0", []),
    ("2.55.1", []), ("2.60.0", []),
])
def test_a_target_older_than_a_layout_needs_is_refused_at_every_boundary(has: str, left: list[str],
                                                                       tmp_path: Path) -> None:
    read = manifest_of("2.60.0-block", tmp_path)
    needs = reader_needs([read], {read.label: "2.60.0"})
    assert sorted(need.version for need in unmet(needs, has)) == left


def test_a_layout_restoreproof_does_not_know_needs_the_pgbackrest_that_wrote_it(tmp_path: Path) -> None:
    later = edited("2.60.0-plain", "[backup]\n", "[backup]\nbackup-future-layout=true\n")  # a later pgBackRest's
    read = manifest_of("2.60.0-plain", tmp_path, later)
    assert read.layout == ("backup-future-layout",)
    (need,) = reader_needs([read], {read.label: "2.61.0"})
    assert need == ToolNeed("pgBackRest", "2.61.0", "a layout restoreproof does not know: [backup] "
                                                   f"backup-future-layout in {read.used}")
    assert unmet([need], "2.60.0") == [need] and unmet([need], "2.61") == []
    (unknown,) = reader_needs([read], {})
    assert unknown.version == UNKNOWN and unmet([unknown], "9.99") == [unknown]


def test_a_false_layout_key_is_no_layout(tmp_path: Path) -> None:
    unbundled = edited("2.60.0-bundle", "backup-bundle=true", "backup-bundle=false")
    assert manifest_of("2.60.0-bundle", tmp_path, unbundled).layout == ()


@pytest.mark.parametrize(("older", "newer"), [("2.33", "2.39"), ("2.9", "2.10"), ("2.48", "2.48.1"),
                                              ("2.55.1", "2.60.0"), ("2.54.2", "2.55")])
def test_versions_order_by_number_not_by_text(older: str, newer: str) -> None:
    assert version_key(older) < version_key(newer)
    assert version_key("2.54.0") == version_key("2.54") and version_key("2.60.0-1") == version_key("2.60")


def test_a_version_ends_its_trailing_zeros_but_keeps_its_major() -> None:
    assert version_key("2.0") == version_key("2") == (2,)
    assert version_key("0") == (0,)
    with pytest.raises(ValueError, match=r"^not a version: 'unknown'$"):
        version_key("unknown")


@pytest.mark.parametrize("captured", ["2.33-plain", "2.45-plain", "2.60.0-block"])
def test_every_version_s_manifest_says_where_its_backup_began_and_ended(captured: str, tmp_path: Path) -> None:
    # backup.info says it only from pgBackRest 2.38: the plan reads 2.33's from here.
    read = manifest_of(captured, tmp_path)
    assert read.lsn_start is not None and read.lsn_stop is not None
    assert re.fullmatch(r"[0-9A-F]+/[0-9A-F]+", read.lsn_start) and re.fullmatch(r"[0-9A-F]+/[0-9A-F]+", read.lsn_stop)
    assert f'backup-lsn-start="{read.lsn_start}"' in captured_text(captured)
    assert f'backup-lsn-stop="{read.lsn_stop}"' in captured_text(captured)
    if captured == "2.33-plain":
        assert (read.lsn_start, read.lsn_stop) == ("0/4000028", "0/4000100")
