"""The report folder's one plotly.js: written once, checked by SHA-256, replaced atomically."""

from __future__ import annotations

import hashlib

import plotly.offline
import pytest

from verification.errors import ReportError
from verification.reports.assets import ASSETS, plotly_asset, write_asset


def test_the_asset_is_the_installed_plotly_js_named_by_its_version():
    asset = plotly_asset()
    assert asset.name == f"plotly-{plotly.offline.get_plotlyjs_version()}.min.js"
    assert asset.data == plotly.offline.get_plotlyjs().encode()
    assert asset.sha256 == hashlib.sha256(asset.data).hexdigest()
    assert asset.href(1) == f"../{ASSETS}/{asset.name}" and asset.href(0) == f"{ASSETS}/{asset.name}"


def test_it_is_written_once_and_left_alone_while_it_is_right(tmp_path):
    asset = plotly_asset()
    path = write_asset(tmp_path, asset)
    assert path == tmp_path / "assets" / asset.name and path.read_bytes() == asset.data
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    written = path.stat()
    assert write_asset(tmp_path, asset) == path
    again = path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)  # not written again
    assert [p.name for p in path.parent.iterdir()] == [asset.name]  # no temporary file left


@pytest.mark.parametrize("damage", ["truncated", "same size, one byte changed", "empty"])
def test_a_damaged_copy_is_replaced_whole(tmp_path, damage):
    asset = plotly_asset()
    path = write_asset(tmp_path, asset)
    data = bytearray(asset.data)
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    else:
        data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    before = path.stat().st_ino
    write_asset(tmp_path, asset)
    assert path.read_bytes() == asset.data
    assert path.stat().st_ino != before  # a new file renamed over it: a reader sees the old one or the new one


def test_a_copy_that_cannot_be_replaced_is_named_and_nothing_is_left_behind(tmp_path):
    asset = plotly_asset()
    (tmp_path / "assets" / asset.name).mkdir(parents=True)  # a folder in its place: rename cannot replace it
    with pytest.raises(ReportError, match=f"cannot write {tmp_path}/assets/{asset.name}: Is a directory"):
        write_asset(tmp_path, asset)
    assert [p.name for p in (tmp_path / "assets").iterdir()] == [asset.name]


def test_a_file_where_the_folder_should_be_is_named(tmp_path):
    (tmp_path / "assets").write_text("not a folder")
    with pytest.raises(ReportError, match=f"cannot make the report assets folder {tmp_path}/assets: File exists"):
        write_asset(tmp_path, plotly_asset())
