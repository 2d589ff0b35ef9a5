"""Who a target reads a repository as, and what it cannot read: on real files and modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from verification.model import Chain, ChainStatus, RestorePlan, UnreadableKind
from verification.targets.access import (
    Grant,
    Reader,
    grant_for,
    prospective_reader,
    unreadable,
    unreadable_at_plan,
    unreadable_by,
    unreadable_message,
)

OWNER, GROUP, OTHER = 4321, 4322, 4323


def mode(path: Path, bits: int, uid: int = OWNER, gid: int = GROUP) -> Path:
    if os.geteuid() == 0:
        os.chown(path, uid, gid)
    path.chmod(bits)
    return path


def fake_stat(bits: int, uid: int = OWNER, gid: int = GROUP) -> os.stat_result:
    return os.stat_result((stat.S_IFREG | bits, 0, 0, 1, uid, gid, 0, 0, 0, 0))


@pytest.mark.parametrize(("reader", "bits", "readable"), [
    (Reader(OWNER, frozenset()), 0o400, True),
    (Reader(OWNER, frozenset()), 0o040, False),  # the owner's own bits decide for the owner
    (Reader(OWNER, frozenset({GROUP})), 0o044, False),
    (Reader(OTHER, frozenset({GROUP})), 0o040, True),
    (Reader(OTHER, frozenset({GROUP})), 0o404, False),  # a member gets the group's bits only
    (Reader(OTHER, frozenset()), 0o004, True),
    (Reader(OTHER, frozenset()), 0o440, False),
    (Reader(0, frozenset()), 0o000, True),
    (Reader(None, frozenset({GROUP})), 0o400, False),  # an unknown uid owns nothing: the group's bits
    (Reader(None, frozenset({GROUP})), 0o040, True),
    (Reader(None, frozenset()), 0o004, True),
])
def test_the_kernel_looks_at_one_class_of_bits(reader: Reader, bits: int, readable: bool) -> None:
    assert reader.allows(fake_stat(bits), stat.S_IRUSR) is readable


def test_search_is_the_execute_bit_of_the_same_class() -> None:
    member = Reader(OTHER, frozenset({GROUP}))
    assert member.allows(fake_stat(0o750), stat.S_IXUSR)
    assert not member.allows(fake_stat(0o740), stat.S_IXUSR)


@pytest.mark.parametrize(("bits", "uid", "grant"), [
    (0o755, OWNER, Grant()),
    (0o750, OWNER, Grant(groups=(GROUP,))),  # pgBackRest's default: the group may read
    (0o740, OWNER, Grant(uid=OWNER, groups=(GROUP,))),  # the group may not search: only the owner
    (0o700, OWNER, Grant(uid=OWNER, groups=(GROUP,))),
    (0o700, 0, Grant()),  # never a database server as root: said by the file check instead
    (0o000, OWNER, Grant()),
])
def test_the_grant_follows_the_repository_folder(tmp_path: Path, bits: int, uid: int, grant: Grant) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the folder another owner")
    (tmp_path / "repo").mkdir()
    assert grant_for(mode(tmp_path / "repo", bits, uid)) == grant


def test_a_missing_repository_asks_for_nothing(tmp_path: Path) -> None:
    assert grant_for(tmp_path / "gone") == Grant()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root to give files other owners")
    root = tmp_path / "repo"
    (root / "backup" / "s").mkdir(parents=True)
    (root / "backup" / "s" / "backup.info").write_text("x")
    (root / "backup" / "s" / "other").write_text("x")
    for path in (root, root / "backup", root / "backup" / "s"):
        mode(path, 0o750)
    for path in (root / "backup" / "s" / "backup.info", root / "backup" / "s" / "other"):
        mode(path, 0o640)
    return root


MEMBER = Reader(OTHER, frozenset({GROUP}))


def test_a_repository_with_default_modes_is_readable_by_its_group(repo: Path) -> None:
    assert unreadable(repo, ["backup/s/backup.info", "backup/s/other"], MEMBER) == []
    assert unreadable(repo, ["backup/s/backup.info"], Reader(OTHER, frozenset())) == [
        f"folder {repo} (mode 0750, owner uid {OWNER} gid {GROUP}) cannot be searched"]


def test_a_file_its_reader_cannot_read_is_named_with_mode_and_owner(repo: Path) -> None:
    mode(repo / "backup" / "s" / "other", 0o600, uid=0, gid=0)
    assert unreadable(repo, ["backup/s/backup.info", "backup/s/other"], MEMBER) == [
        f"file {repo}/backup/s/other (mode 0600, owner uid 0 gid 0) cannot be read"]


def test_a_folder_that_cannot_be_searched_is_named_once_not_its_files(repo: Path) -> None:
    mode(repo / "backup" / "s", 0o700)
    assert unreadable(repo, ["backup/s/backup.info", "backup/s/other"], MEMBER) == [
        f"folder {repo}/backup/s (mode 0700, owner uid {OWNER} gid {GROUP}) cannot be searched"]


def test_a_missing_file_is_said_with_the_systems_words(repo: Path) -> None:
    assert unreadable(repo, ["backup/s/gone"], MEMBER) == [f"{repo}/backup/s/gone: No such file or directory"]


def test_the_message_names_the_reader_the_count_and_the_first_paths(tmp_path: Path) -> None:
    problems = [f"file p{n} cannot be read" for n in range(7)]
    message = unreadable_message(tmp_path, problems, MEMBER)
    assert message.startswith(f"the target reads the repository {tmp_path} as uid {OTHER} (groups {GROUP}), "
                              "and cannot read 7 path(s) the restore needs: file p0 cannot be read; ")
    assert "file p4 cannot be read; and 2 more." in message and "p5" not in message


class Said:
    reader = MEMBER


def test_a_target_is_asked_only_when_it_says_who_reads(repo: Path) -> None:
    assert unreadable_by(object(), str(repo), ["backup/s/other"]) is None
    assert unreadable_by(Said(), str(repo), ["backup/s/other"]) is None
    mode(repo / "backup" / "s" / "other", 0o600)
    refused = unreadable_by(Said(), str(repo), ["backup/s/other"])
    assert refused is not None and f"file {repo}/backup/s/other (mode 0600" in refused


def test_a_reader_is_described_by_uid_and_sorted_groups() -> None:
    assert Reader(7, frozenset({30, 4})).describe() == "uid 7 (groups 4, 30)"
    assert Reader(7, frozenset()).describe() == "uid 7 (groups none)"


@pytest.mark.parametrize(("bits", "grant"), [
    (0o754, Grant(groups=(GROUP,))),  # others may read but not search
    (0o751, Grant(groups=(GROUP,))),  # others may search but not read
    (0o740, Grant(uid=OWNER, groups=(GROUP,))),  # the group may read but not search
    (0o710, Grant(uid=OWNER, groups=(GROUP,))),  # the group may search but not read
    (0o600, Grant()),  # nobody may search it
    (0o300, Grant()),  # nobody may read it
])
def test_read_and_search_are_both_needed_for_each_class(tmp_path: Path, bits: int, grant: Grant) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the folder another owner")
    (tmp_path / "repo").mkdir()
    assert grant_for(mode(tmp_path / "repo", bits)) == grant


def test_a_missing_folder_is_named_once_and_the_next_files_are_still_looked_at(repo: Path) -> None:
    mode(repo / "backup" / "s" / "other", 0o600, uid=0, gid=0)
    assert unreadable(repo, ["backup/gone/a", "backup/gone/b", "backup/s/other", "backup/s/other"], MEMBER) == [
        f"{repo}/backup/gone: No such file or directory",
        f"file {repo}/backup/s/other (mode 0600, owner uid 0 gid 0) cannot be read"]


def test_a_missing_file_does_not_stop_the_look_at_the_next(repo: Path) -> None:
    mode(repo / "backup" / "s" / "other", 0o600, uid=0, gid=0)
    assert unreadable(repo, ["backup/s/gone", "backup/s/other"], MEMBER) == [
        f"{repo}/backup/s/gone: No such file or directory",
        f"file {repo}/backup/s/other (mode 0600, owner uid 0 gid 0) cannot be read"]


def test_the_whole_message_with_five_paths_and_with_six(tmp_path: Path) -> None:
    five = unreadable_message(tmp_path, [f"p{n}" for n in range(5)], MEMBER)
    assert five == (f"the target reads the repository {tmp_path} as uid {OTHER} (groups {GROUP}), and cannot read 5 "
                    "path(s) the restore needs: p0; p1; p2; p3; p4. Give that reader read access (files readable and "
                    "folders searchable by the repository's owner or group, as pgBackRest makes them), nothing more: "
                    "the repository stays read-only to the target")
    assert "p4; and 1 more. Give" in unreadable_message(tmp_path, [f"p{n}" for n in range(6)], MEMBER)


def test_the_refusal_names_the_repository_root(repo: Path) -> None:
    mode(repo / "backup" / "s" / "other", 0o600, uid=0, gid=0)
    refused = unreadable_by(Said(), str(repo), ["backup/s/other"])
    assert refused is not None and refused.startswith(f"the target reads the repository {repo} as uid {OTHER}")


def test_a_world_readable_repository_folder_with_pgbackrests_folders_in_it_grants_their_group(tmp_path: Path) -> None:
    # The repository folder made by root (0755) or a mount point; pgBackRest's own folders 0750 inside.
    if os.geteuid() != 0:
        pytest.skip("needs root to give folders other owners")
    root = tmp_path / "repo"
    (root / "backup").mkdir(parents=True)
    (root / "archive").mkdir()
    mode(root, 0o755, uid=0, gid=0)
    mode(root / "backup", 0o750)
    mode(root / "archive", 0o700)
    assert grant_for(root) == Grant(groups=(GROUP,), uid=OWNER)
    mode(root / "archive", 0o750)
    assert grant_for(root) == Grant(groups=(GROUP,))


def plan_of(database: str, files: list[str]) -> RestorePlan:
    return RestorePlan("postgres", database, Chain(ChainStatus.COMPLETE, []), files=files)


def test_before_a_target_runs_its_reader_is_the_grant(repo: Path) -> None:
    assert prospective_reader(repo) == Reader(None, frozenset({GROUP}))
    mode(repo, 0o700)
    assert prospective_reader(repo) == Reader(OWNER, frozenset({GROUP}))
    assert Reader(None, frozenset({GROUP})).describe() == (
        f"the target image's own user (no repository file's owner) (groups {GROUP})")


def test_a_plan_names_per_database_what_a_target_will_not_read(repo: Path) -> None:
    mode(repo / "backup" / "s" / "other", 0o600, uid=0, gid=0)
    plans = [plan_of("s", ["backup/s/backup.info", "backup/s/other"]), plan_of("t", ["backup/s/backup.info"])]
    [found] = unreadable_at_plan(repo, plans)
    assert (found.path, found.kind, found.database) == ("backup/s/other", UnreadableKind.PERMISSION, "s")
    assert found.reason.startswith(f"the target reads the repository {repo} as the target image's own user")
    assert f"file {repo}/backup/s/other (mode 0600, owner uid 0 gid 0) cannot be read" in found.reason


def test_a_plan_with_default_modes_or_the_owners_only_names_nothing(repo: Path) -> None:
    plans = [plan_of("s", ["backup/s/backup.info", "backup/s/other"])]
    assert unreadable_at_plan(repo, plans) == []
    for path in (repo, repo / "backup", repo / "backup" / "s"):
        mode(path, 0o700)
    for path in (repo / "backup" / "s" / "backup.info", repo / "backup" / "s" / "other"):
        mode(path, 0o600)
    assert unreadable_at_plan(repo, plans) == []  # the target is given the owner's uid


def test_a_folder_at_fault_is_the_path_a_plan_names(repo: Path) -> None:
    mode(repo / "backup" / "s", 0o700, uid=0, gid=0)
    [found] = unreadable_at_plan(repo, [plan_of("s", ["backup/s/backup.info"])])
    assert found.path == "backup/s"


def test_top_folders_made_world_readable_before_the_tool_ran_still_grant_the_stanzas_group(tmp_path: Path) -> None:
    # Configuration management made the repository, backup/ and archive/ 0755; pgBackRest's own stanza
    # folders and files are 0750/0640: the stanza's group is what reading needs.
    if os.geteuid() != 0:
        pytest.skip("needs root to give files other owners")
    root = tmp_path / "repo"
    (root / "backup" / "s").mkdir(parents=True)
    (root / "archive" / "s").mkdir(parents=True)
    (root / "backup" / "s" / "backup.info").write_text("x")
    for path in (root, root / "backup", root / "archive"):
        mode(path, 0o755)
    for path in (root / "backup" / "s", root / "archive" / "s"):
        mode(path, 0o750)
    mode(root / "backup" / "s" / "backup.info", 0o640)
    assert grant_for(root) == Grant(groups=(GROUP,))
    plans = [plan_of("s", ["backup/s/backup.info"])]
    assert unreadable_at_plan(root, plans) == []
