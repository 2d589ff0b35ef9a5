"""The exit-code table: every code has its meaning, and no two outcomes share a code."""

from __future__ import annotations

from verification.exit_codes import MEANINGS, ExitCode, table


def test_every_code_has_a_meaning_and_a_line_in_the_table():
    assert set(MEANINGS) == set(ExitCode)
    lines = table().split("\n\n")
    assert [int(line.split()[0]) for line in lines] == [0, 1, 2, 3, 130, 143]
    assert lines[3].startswith("  3  offline checks found nothing wrong")


def test_a_pass_a_failure_and_could_not_check_are_apart():
    assert len({int(code) for code in ExitCode}) == len(ExitCode)
    assert (ExitCode.PASSED, ExitCode.FAILED, ExitCode.ERROR) == (0, 1, 2)


def test_the_readme_shows_the_same_table():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert rows == [f"| {int(code)} | {meaning} |" for code, meaning in MEANINGS.items()]
