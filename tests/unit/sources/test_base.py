"""One file of a source as a reader: sequential reads into the caller's buffer (the page scan's)."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verification.sources import LocalSource
from verification.sources.base import SourceFile


def test_a_local_file_is_read_into_the_buffer_through_one_handle(tmp_path: Path) -> None:
    (tmp_path / "backup.bak").write_bytes(bytes(range(10)))
    file = SourceFile(LocalSource(tmp_path), "backup.bak")
    buffer = bytearray(4)
    with file.sequential() as reader:
        assert reader.handle is not None  # a local file: one open handle for every read
        assert reader.read_into(2, memoryview(buffer)) == 4 and buffer == bytes([2, 3, 4, 5])
        assert reader.read_into(8, memoryview(buffer)) == 2 and buffer[:2] == bytes([8, 9])  # short at the end
        handle = reader.handle
    assert handle.closed and file.bytes_read == 6


class OnlyReads:
    """A source with read_bytes and nothing more (as object storage is)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        return self.data[offset:None if length is None else offset + length]


def test_a_source_without_files_to_open_is_read_and_copied(tmp_path: Path) -> None:
    file = SourceFile(OnlyReads(bytes(range(10))), "backup.bak")  # type: ignore[arg-type]
    buffer = bytearray(4)
    with file.sequential() as reader:
        assert reader.handle is None
        assert reader.read_into(7, memoryview(buffer)) == 3 and buffer[:3] == bytes([7, 8, 9])
    assert file.bytes_read == 3


def test_threads_read_one_local_handle_at_their_own_offsets(tmp_path: Path) -> None:
    # Positional reads: no shared file position, so threads reading at once each get their bytes.
    data = bytes(range(256)) * 4096  # 1 MiB
    (tmp_path / "backup.bak").write_bytes(data)
    file = SourceFile(LocalSource(tmp_path), "backup.bak")
    with file.sequential() as reader:
        assert reader.concurrent

        def read(offset: int) -> bytes:
            buffer = bytearray(4096)
            for _ in range(50):
                assert reader.read_into(offset, memoryview(buffer)) == 4096
            return bytes(buffer)

        offsets = [k * 4096 + k for k in range(64)]
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(read, offsets))
    assert got == [data[offset:offset + 4096] for offset in offsets]
    assert file.bytes_read == 64 * 50 * 4096


def test_a_source_without_files_is_not_read_by_threads() -> None:
    with SourceFile(OnlyReads(b""), "backup.bak").sequential() as reader:  # type: ignore[arg-type]
        assert not reader.concurrent
