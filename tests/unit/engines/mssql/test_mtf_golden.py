"""The MTF reader, word for word: every header of the real corpus, and a matrix of real damage.

Every file of ../shared/testdata/mssql-backups is read and every field the reader recovers is
compared with reviewed expectations (tests/fixtures/golden/mtf-corpus.json). Then one real log
backup is damaged at every 512-byte block of its head, inside stream headers and data, in its
trailer, and cut at several lengths; each result (the header, or the exact error naming offset,
expected and found) is compared too (mtf-damage.json). `RESTOREPROOF_GOLDEN=write` rewrites them,
for review.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tests.conftest import TESTS
from tests.unit.engines.mssql.mtf_edit import StrictBytes as Bytes  # refuses empty or out-of-range reads
from verification.engines.mssql.mtf import (
    MtfError,
    MtfUnsupported,
    NeedsServerHeaderOnly,
    read_backup_headers,
    read_trailer_identity,
)

GOLDEN = TESTS / "fixtures" / "golden"


def outcome(name: str, data: bytes) -> dict[str, Any]:
    try:
        (header,) = (asdict(h) for h in read_backup_headers(Bytes(name, data)))
    except (MtfError, NeedsServerHeaderOnly) as exc:
        identity = read_trailer_identity(Bytes(name, data))
        # "damage" is proven (checksum, truncation); "unsupported" is a layout not known, an error.
        kind = "unsupported" if isinstance(exc, MtfUnsupported) else "damage" if isinstance(exc, MtfError) else None
        return {"error": str(exc), "kind": kind, "identity": None if identity is None else json.loads(json.dumps(
            asdict(identity), default=str))}
    header.pop("bytes_read")
    return {"header": json.loads(json.dumps(header, default=str))}


def check(name: str, found: Any) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if os.environ.get("RESTOREPROOF_GOLDEN") == "write":
        path.write_text(text)
    assert json.loads(path.read_text()) == json.loads(text)


def test_every_corpus_file_reads_to_the_reviewed_header(mssql_corpus: Path) -> None:
    found = {}
    for path in sorted(p for p in mssql_corpus.rglob("*") if p.is_file() and p.suffix not in (".md", ".tsv")):
        rel = path.relative_to(mssql_corpus).as_posix()
        found[rel] = outcome(rel, path.read_bytes())
    check("mtf-corpus", found)


def test_every_real_world_file_reads_to_the_reviewed_header(mssql_real_world: Path) -> None:
    found = {path.relative_to(mssql_real_world).as_posix(): outcome(path.name, path.read_bytes())
             for path in sorted(mssql_real_world.rglob("*.bak"))}
    assert len(found) == 3 and all("header" in result for result in found.values())
    check("mtf-real-world", found)


def test_damage_anywhere_in_the_head_or_trailer_is_named_exactly(mssql_corpus: Path) -> None:
    check("mtf-damage", damage_matrix("RestoreTimeClean2_1.trn",
                                      (mssql_corpus / "RestoreTimeClean/RestoreTimeClean2_1.trn").read_bytes()))


def test_damage_in_a_file_of_4096_byte_filemark_blocks_is_named_exactly(mssql_real_world: Path) -> None:
    # The same matrix on a copy-only full written with 4096-byte soft filemark blocks.
    name = "plataformadb_93b98ca.bak"
    check("mtf-damage-4096", damage_matrix(name, (mssql_real_world / "copy-only" / name).read_bytes(), tail=28672))


def damage_matrix(name: str, original: bytes, tail: int = 8192) -> dict[str, Any]:
    """Each 512-byte block of the head and of the last `tail` bytes damaged at several places, then cuts."""
    found: dict[str, Any] = {}
    clean = outcome(name, original)

    def damaged(label: str, data: bytes) -> None:
        # Bytes no checksum or copy covers (padding, data) read as the clean header: said as such.
        result = outcome(name, data)
        found[label] = "reads as the undamaged header" if result == clean else result

    for offset in [*range(0, 16384, 512), *range(len(original) - tail, len(original), 512)]:
        for delta in (0, 8, 10, 50, 52, 60, 74, 120, 300):
            position = offset + delta
            if position < len(original):
                data = bytearray(original)
                data[position] ^= 0x5A
                damaged(f"flip {position:#x}", bytes(data))
    for length in (0, 7, 100, 512, 4096, 16384, 40000, len(original) - 512, len(original) - 1):
        damaged(f"cut at {length}", original[:length])
    damaged("compressed magic", b"MSSQLBAK" + original[8:])
    return found
