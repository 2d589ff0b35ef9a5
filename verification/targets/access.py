"""Who a target reads the repository as, and which of its files that reader cannot read.

A repository is made by the backup tool's own OS user on the database host, with that tool's
default modes (pgBackRest: files 0640, folders 0750, owned by the host's `postgres`, whose uid is
seldom the target image's). A target is given what reading needs, never write access: the
repository folder's group as a supplementary group where the group may read, or else the owner's
uid where only the owner may (a root-owned one excepted: a database server never runs as root).
What the reader still cannot read is named, with its mode and owner, before anything is restored:
a permission is an error for the operator to fix, never a damaged backup.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from verification.model import RestorePlan, UnreadableFile, UnreadableKind

# How many unreadable paths an error spells out.
NAMES_SHOWN = 5


@dataclass(frozen=True)
class Reader:
    """An OS identity as the kernel checks it: a uid and every group it holds. A uid of None is one
    known only to own none of the files looked at (a target image's own user, before it runs)."""

    uid: int | None
    groups: frozenset[int]

    def allows(self, st: os.stat_result, want: int) -> bool:
        """Whether the mode grants `want` (a mask of the owner's bits: S_IRUSR, S_IXUSR) to this reader.
        The kernel looks at one class only: the owner's bits for the owner, the group's for a member,
        the others' for the rest (an owner denied by its own bits is denied, whatever the others')."""
        if self.uid == 0:
            return True
        if self.uid is not None and st.st_uid == self.uid:
            return st.st_mode & want == want
        if st.st_gid in self.groups:
            return st.st_mode & (want >> 3) == want >> 3
        return st.st_mode & (want >> 6) == want >> 6

    def describe(self) -> str:
        who = f"uid {self.uid}" if self.uid is not None else "the target image's own user (no repository file's owner)"
        return f"{who} (groups {', '.join(str(g) for g in sorted(self.groups)) or 'none'})"


@dataclass(frozen=True)
class Grant:
    """What a target is given to read a repository: supplementary groups, and a uid to run as in place
    of the image's own user (None: keep it)."""

    groups: tuple[int, ...] = ()
    uid: int | None = None


# The folders a grant is read from: the repository's, the ones the backup tool makes in it, and the
# stanzas' folders in those (a repository folder made by root with 0755, a mount point, or top folders
# made by configuration management before the tool ran say nothing of what is inside).
GRANT_FOLDERS = (".", "backup", "archive")


def _grant_folders(root: Path) -> list[Path]:
    folders = [root / name for name in GRANT_FOLDERS]
    for top in folders[1:]:
        try:
            folders += sorted(child for child in top.iterdir() if child.is_dir())
        except OSError:
            continue  # said by the check of the files, with the reason the system gives
    return folders


def grant_for(root: Path) -> Grant:
    """What reading the repository at `root` needs, from the owner, group and mode of its folder, of
    the folders the backup tool makes in it and of the stanzas' folders."""
    groups: list[int] = []
    uid: int | None = None
    for folder in _grant_folders(root):
        try:
            st = folder.stat()
        except OSError:
            continue  # said by the check of the files, with the reason the system gives
        if st.st_mode & stat.S_IROTH and st.st_mode & stat.S_IXOTH:
            continue
        if st.st_mode & stat.S_IRGRP and st.st_mode & stat.S_IXGRP:
            groups.append(st.st_gid)
        elif st.st_mode & stat.S_IRUSR and st.st_mode & stat.S_IXUSR and st.st_uid != 0:
            groups.append(st.st_gid)
            uid = st.st_uid if uid is None else uid
    return Grant(tuple(dict.fromkeys(groups)), uid)


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid} gid {st.st_gid}"


def unreadable(root: Path, paths: Iterable[str], reader: Reader) -> list[str]:
    """Each file under `root` (paths relative to it) that `reader` cannot read, or a folder on its way
    it cannot search, said with its mode and owner; folders are looked at once each."""
    return [said for _, said in denied(root, paths, reader)]


def denied(root: Path, paths: Iterable[str], reader: Reader) -> list[tuple[Path, str]]:
    """As `unreadable`, each with the path at fault (the file, or the folder on its way)."""
    problems: list[tuple[Path, str]] = []
    searched: dict[Path, bool] = {}

    def searchable(folder: Path) -> bool:
        if folder not in searched:
            parent_ok = folder == root or searchable(folder.parent)
            try:
                st = folder.stat()
            except OSError as exc:
                problems.append((folder, f"{folder}: {exc.strerror}"))
                searched[folder] = False
                return False
            searched[folder] = parent_ok and reader.allows(st, stat.S_IXUSR)
            if parent_ok and not searched[folder]:
                problems.append((folder, f"folder {folder} ({_mode(st)}) cannot be searched"))
        return searched[folder]

    for relative in dict.fromkeys(paths):
        path = root / relative
        if not searchable(path.parent):
            continue
        try:
            st = path.stat()
        except OSError as exc:
            problems.append((path, f"{path}: {exc.strerror}"))
            continue
        if not reader.allows(st, stat.S_IRUSR):
            problems.append((path, f"file {path} ({_mode(st)}) cannot be read"))
    return problems


def unreadable_message(root: Path, problems: list[str], reader: Reader) -> str:
    shown = "; ".join(problems[:NAMES_SHOWN])
    more = f"; and {len(problems) - NAMES_SHOWN} more" if len(problems) > NAMES_SHOWN else ""
    return (f"the target reads the repository {root} as {reader.describe()}, and cannot read "
            f"{len(problems)} path(s) the restore needs: {shown}{more}. Give that reader read access (files "
            "readable and folders searchable by the repository's owner or group, as pgBackRest makes them), "
            "nothing more: the repository stays read-only to the target")


def unreadable_by(target: object, root: str, paths: list[str]) -> str | None:
    """Why `target` cannot restore from the repository at `root` (host path) reading `paths`, or None.
    A target that says nothing of its reader (one reading object storage itself) is not asked."""
    reader = getattr(target, "reader", None)
    if not isinstance(reader, Reader) or not paths:
        return None
    problems = unreadable(Path(root), paths, reader)
    if not problems:
        return None
    return unreadable_message(Path(root), problems, reader)


def prospective_reader(root: Path) -> Reader:
    """The reader a Docker target of the repository at `root` will be, as far as the host can tell
    before one runs: the grant's uid where it is given one, else the image's own user (the owner of
    no repository file), with the grant's groups."""
    grant = grant_for(root)
    return Reader(grant.uid, frozenset(grant.groups))


def unreadable_at_plan(root: Path, plans: Iterable[RestorePlan]) -> list[UnreadableFile]:
    """Per database, the files its restore needs that a Docker target would not be able to read, said
    as a target would refuse them at its start; a database none of whose files is at fault is not named."""
    reader = prospective_reader(root)
    found = []
    for plan in plans:
        if problems := denied(root, plan.files, reader):
            found.append(UnreadableFile(str(problems[0][0].relative_to(root)), UnreadableKind.PERMISSION,
                                        unreadable_message(root, [said for _, said in problems], reader),
                                        plan.database))
    return found
