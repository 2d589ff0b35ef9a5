"""The in-target reading scripts, run by bash here with stand-ins for pgbackrest, pg_controldata, pg_waldump
and cmp's input (the real tools' answers are in the fault tests and tests/fixtures/postgres/wal-end/)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import fixture_text
from verification.engines.base import Evidence
from verification.engines.postgres.wal_end import Geometry, Tail
from verification.engines.postgres.wal_read import TargetWalReader
from verification.targets.base import ExecResult

MB16 = 16 * 1024 * 1024
SEGMENTS = ["000000010000000000000002", "000000010000000000000003"]


class BashTarget:
    """Runs commands here, with the stand-in tools first on the PATH."""

    def __init__(self, tools: Path) -> None:
        self.tools = tools
        self.sent: list[list[str]] = []

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        self.sent.append(argv)
        environment = {**os.environ, "PATH": f"{self.tools}:{os.environ['PATH']}", **(env or {})}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=environment)
        return ExecResult(argv, done.returncode, done.stdout, done.stderr, 0.1)


def tool(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + script)
    path.chmod(0o755)


def reader(tmp_path: Path, archive_get: str) -> tuple[TargetWalReader, BashTarget]:
    tools = tmp_path / "bin"
    tools.mkdir()
    # archive-get <segment> <path>: the segment's bytes, one page of them non-zero.
    tool(tools, "pgbackrest", archive_get)
    read = fixture_text("wal-end/switched/wal-end-read.out")
    control = read[read.index("@@control\n") + 10:read.index("@@exit")]
    dump = read[read.index("@@last\n") + 7:read.index("@@stderr")]
    tool(tools, "pg_controldata", f"cat <<'EOF'\nDatabase system identifier: 7\nMock authentication nonce: ab\n{control}EOF\n")
    tool(tools, "pg_waldump", f"[ \"$1\" = -p ] || exit 2\nif [ \"$3\" = -s ]; then printf 'desc: COMMIT 1\\ndesc: "
                              f"COMMIT 2\\n'; exit 1; fi\ncat <<'EOF'\n{dump}EOF\n")
    target = BashTarget(tools)
    return TargetWalReader(target, lambda: ["pgbackrest", "--stanza=redo", "archive-get"], str(tmp_path / "data"),
                           str(tmp_path / "wal-end"), {"PGBACKREST_REPO1_CIPHER_PASS": "x"}, 30,
                           Evidence(tmp_path / "evidence")), target


def test_the_reading_script_fetches_reads_and_keeps_only_the_geometry(tmp_path: Path) -> None:
    wal, target = reader(tmp_path, 'head -c 8192 /dev/urandom > "$4"; head -c $((16777216 - 8192)) /dev/zero >> "$4"')
    read = wal.read(SEGMENTS, 0x3010908)
    assert read.fetch_error is None and read.segments == SEGMENTS
    assert read.geometry == Geometry(8192, MB16, 8) and read.exit_code == 0
    assert read.last is not None and read.last.is_switch and read.at_redo_done == read.last
    assert read.stderr == ""
    kept = (tmp_path / "evidence" / "wal-end-read.out").read_text()
    assert "nonce" not in kept and "@@fetched 000000010000000000000003" in kept
    (argv,) = target.sent
    assert argv[:4] == ["bash", "-c", argv[2], "wal-end-read"] and argv[-3:] == ["pgbackrest", "--stanza=redo",
                                                                                 "archive-get"]
    # The dump itself is not left behind (tens of megabytes); the segments are, for the tail check.
    assert sorted(p.name for p in (tmp_path / "wal-end").iterdir()) == [*SEGMENTS, "stderr"]
    tail = wal.tail(SEGMENTS[1], 100, 0x3002000, MB16)
    assert tail == Tail(first_nonzero=0, commits_after=2)
    assert wal.tail(SEGMENTS[1], 8192, 0x3004000, MB16) == Tail(first_nonzero=None, commits_after=2)
    assert wal.tail(SEGMENTS[1], 8192, 0x4000000, MB16) == Tail(first_nonzero=None, commits_after=None)
    assert (tmp_path / "evidence" / "wal-end-tail.out").exists()


def test_a_segment_archive_get_cannot_deliver_is_named_with_pgbackrests_words_and_status(tmp_path: Path) -> None:
    wal, _ = reader(tmp_path, '[ "$3" = 000000010000000000000002 ] && { : > "$4"; exit 0; }\n'
                              'echo "ERROR: [082]: unable to find $3"; exit 82')
    read = wal.read(SEGMENTS, 0x3010908)
    assert read.segments == SEGMENTS[:1]
    assert read.fetch_error == ("archive-get of 000000010000000000000003 exited 82: ERROR: [082]: unable to find "
                                "000000010000000000000003")
    assert read.exit_code is None and read.geometry is None


def test_a_control_file_without_the_geometry_is_shown_whole(tmp_path: Path) -> None:
    wal, _ = reader(tmp_path, ': > "$4"')
    tool(tmp_path / "bin", "pg_controldata", 'echo "pg_controldata: error: could not open file"; exit 1')
    read = wal.read(SEGMENTS, 0x3010908)
    assert read.geometry is None
    assert "pg_controldata: error: could not open file" in (tmp_path / "evidence" / "wal-end-read.out").read_text()
