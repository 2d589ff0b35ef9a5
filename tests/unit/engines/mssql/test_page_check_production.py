"""Page verification on backups as production writes them: SQL Server 2019's refreshed first pages, and
a file appended to (WITH NOINIT) lying beside an earlier copy of itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.engines.mssql.mtf_append import append_sets
from verification.engines.base import Evidence
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.engines.mssql.page_check import read_and_judge
from verification.model import CheckStatus
from verification.sources import LocalSource

# Real public SQL Server backups (docs/data/sqlserver-public-samples.tsv), where a machine has fetched them.
EXTRA = Path(os.environ.get("RESTOREPROOF_MSSQL_SAMPLES", "/work/extra-mssql"))
OLD, NEW = "OlaMsFilter/Simple/test_FULL_20160629_141300.bak", "OlaMsFilter/Simple/test_FULL_20160629_141320.bak"


def _pages(folder: Path, tmp_path: Path, pages: str = "all") -> list[tuple[str, CheckStatus, str]]:
    out = []
    for db in scan(LocalSource(folder)).databases:
        result, _ = read_and_judge(plan(db, db.database, None), LocalSource(folder), Evidence(tmp_path / "ev"), pages)
        out.append((db.database, result.status, result.summary))
    return out


def test_a_sql_server_2019_full_is_not_damaged(tmp_path: Path) -> None:
    folder = EXTRA / "AirportTransfer"
    if not folder.is_dir():
        pytest.skip(f"{folder} absent")
    found = _pages(folder, tmp_path, "chain")
    assert found and all(status is CheckStatus.PASSED for _, status, _ in found), found


def test_a_noinit_file_beside_its_earlier_version_is_not_damaged(mssql_corpus: Path, tmp_path: Path) -> None:
    old, new = (mssql_corpus / OLD).read_bytes(), (mssql_corpus / NEW).read_bytes()
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "nightly.bak").write_bytes(append_sets(old, new, adopt_media=True))
    (folder / "nightly_yesterday.bak").write_bytes(old)  # the same file before the second set was appended
    (found,) = _pages(folder, tmp_path)
    assert found[1] is CheckStatus.PASSED, found


def test_only_a_later_data_block_of_the_same_file_refreshes_a_page() -> None:
    from verification.engines.mssql.pages import _Together

    together = _Together()
    together.stream(0, "a.bak", 0x1000, 0)  # pages at positions 0..99, the set's first MSDA block
    together.stream(100, "a.bak", 0x90000, 1)  # 16 pages re-sent in its second block
    together.stream(116, "b.bak", 0x1000, 0)  # the next family of a striped set
    assert together.refreshed(3, 103)
    assert not together.refreshed(3, 50)  # twice in one block: damage
    assert not together.refreshed(3, 120)  # in another file: a page in two families, damage
