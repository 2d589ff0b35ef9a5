from __future__ import annotations

from pathlib import Path

import pytest

from verification.atomic import write_text_atomically


def test_a_file_is_replaced_whole_and_a_failed_write_leaves_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_text_atomically(path, "first")
    write_text_atomically(path, "second")
    assert path.read_text() == "second"
    with pytest.raises(TypeError):
        write_text_atomically(path, 3)  # type: ignore[arg-type]
    assert path.read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
