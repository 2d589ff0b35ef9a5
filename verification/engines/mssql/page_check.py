"""Page verification as a check: every page of the chain's full and differential backups, read
offline (pages.py), before any restore and also where no SQL Server can run. The families
(stripes) of one backup set are read as one backup: a PFS page in one judges the pages of another,
and a page met in two of them is found.

Whose pages (`page_scope`): the planned chain's data backups; with the setting `mssql.pages: all`
(`verify --pages all`), every full and differential backup of the database in the source too, each
one outside the chain named as such wherever it is said. A chain broken before any full or
differential (no full, or its only full missing a stripe) plans none: then every data backup the
database has is read, so their damage is named beside the broken chain. The plan never changes.

Its verdict is of its own kind (`CheckKind.BACKUP_FILES`): a damaged page, or a data stream whose
structure is damaged, makes the database "failed" with no server; a clean result never passes a
database by itself (that still takes the restore and CHECKDB). What it could not read is named:
a file the source would not give is an error; a natively compressed file, which has no pages to
read offline, is listed as such (RESTORE ... WITH CHECKSUM and CHECKDB verify it in a server).

Encrypted backups (engines/mssql/encryption.py): a file the plan knows to be encrypted is not read, and a
file none of whose pages reads as a SQL Server page (what BACKUP ... WITH ENCRYPTION leaves of them, the
header being unreadable without the certificate; or pages overwritten) is not judged: each is named
"not verifiable offline", never counted as verified and never silent. When the target later says a file
is encrypted (RESTORE HEADERONLY, FILELISTONLY, message 33111: a TDE database's pages keep a plain header
but not a plain body), `withdrawn` takes back what this check said of its pages. A check whose every file
is not verifiable did not run ("skipped"), and never passes a database by itself, as ever.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from verification.engines.base import Evidence
from verification.engines.mssql.boot import CHECKDB, BootPage, read_boot_page
from verification.engines.mssql.mtf import MtfError, MtfUnsupported, NeedsServerHeaderOnly, read_backup_headers
from verification.engines.mssql.pages import PAGE, PAGE_TYPES, PageFinding, PageScan, SetScan
from verification.errors import SourceError
from verification.model import (
    FILES_NOT_READ,
    BackupSet,
    BackupType,
    ChainStatus,
    CheckKind,
    CheckName,
    CheckResult,
    CheckStatus,
    EncryptionState,
    RestorePlan,
    set_name,
)
from verification.sources.base import Source, SourceFile

EVIDENCE = "page-verification.txt"
SHOWN = 50  # findings quoted in the check; all of them are in the evidence file
NAMED = 10  # files named in the check's summary; all of them are in its details and the evidence
CHAIN, ALL = "chain", "all"  # the setting mssql.pages
OUTSIDE = "outside the planned chain"


def describe_finding(finding: PageFinding, outside: bool = False) -> str:
    """A finding as a reader looks it up: file, byte offset, page as SQL Server names it, owner, what;
    a file the restore does not read is said to be outside the chain."""
    said = (f"{_file(finding.path, outside)}: offset {finding.offset:#x}, page {finding.page} "
            f"(object {finding.object_id}, index {finding.index_id}): {finding.reason}")
    if finding.stored_checksum is not None and finding.computed_checksum is not None:
        said += f" (stored {finding.stored_checksum:#010x}, computed {finding.computed_checksum:#010x})"
    return said


def _file(path: str, outside: bool) -> str:
    return f"{path} ({OUTSIDE})" if outside else path


@dataclass
class PageVerification:
    """What reading the files found, before it is judged."""

    scans: list[PageScan] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # files whose structure is not a readable backup
    unreadable: list[str] = field(default_factory=list)  # files the source would not give
    compressed: list[str] = field(default_factory=list)
    # Files whose pages cannot be judged offline, each "path: not verifiable offline: why" (encrypted).
    not_verifiable: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bytes: int = 0
    # The database's boot page, from the newest data backup that carries one.
    boot: BootPage | None = None
    # Which backups were asked for, as said ("" where not said), and those of them outside the chain.
    scope: str = ""
    outside: list[str] = field(default_factory=list)
    # Whether every data backup of the database was asked for, not only the chain's.
    database_wide: bool = False

    @property
    def findings(self) -> list[PageFinding]:
        return [finding for scan in self.scans for finding in scan.findings]

    def said(self, finding: PageFinding) -> str:
        return describe_finding(finding, finding.path in self.outside)


def set_names(backups: Iterable[BackupSet]) -> dict[tuple[str, int | None], str]:
    """How the check names each data backup it reads, by (path, position): as every message names a set
    (model.set_name), the file's path, or where the file holds several sets (BACKUP ... WITH NOINIT)
    "<path> (set n)". Several positions of one file among the backups tell that too, for a backup whose
    header did not (one stored before BackupSet.shares_file, or made by hand)."""
    data = [b for b in backups if b.path and b.type is not BackupType.LOG]
    positions: dict[str, set[int | None]] = {}
    for b in data:
        positions.setdefault(b.path or "", set()).add(b.position)
    return {(b.path or "", b.position): set_name(b.path or "", b.position,
                                                 b.shares_file or len(positions[b.path or ""]) > 1) for b in data}


def _backups(plan: RestorePlan) -> list[BackupSet]:
    return [*plan.chain.backups, *plan.data_backups]


def _name(backup: BackupSet, names: Mapping[tuple[str, int | None], str]) -> str:
    return names.get((backup.path or "", backup.position), backup.path or "")


def data_files(plan: RestorePlan) -> list[str]:
    """The files holding pages: every family of the chain's full and differential backups (each named
    as `set_names` says)."""
    return [path for families in data_sets(plan) for path in families]


def data_sets(plan: RestorePlan) -> list[list[str]]:
    """The chain's full and differential backups, each as the files of its families (stripes) in the
    chain's order, family order within a set: one file for a backup that is not striped. Families
    belong together by their BackupSetGUID; a file whose header gave none stands alone."""
    names = set_names(_backups(plan))
    sets: dict[tuple[str, str], list[str]] = {}
    for b in plan.chain.backups:
        if b.type is not BackupType.LOG and b.path:
            key = ("set", b.backup_set_guid) if b.backup_set_guid else ("file", _name(b, names))
            sets.setdefault(key, []).append(_name(b, names))
    return list(sets.values())


@dataclass(frozen=True)
class PageScope:
    """The data backups whose pages are read: the chain's, then the others, and how that is said."""

    chain: list[str]
    others: list[str]
    said: str
    database_wide: bool


def _named(paths: list[str]) -> str:
    more = f" (+{len(paths) - NAMED} more)" if len(paths) > NAMED else ""
    return ", ".join(paths[:NAMED]) + more if paths else "none"


def page_scope(plan: RestorePlan, pages: str = CHAIN) -> PageScope:
    """Whose pages are read: the planned chain's full and differential backups; with `pages` "all",
    every one of the database's in the source too; and where a broken chain plans none, every one
    the database has (its damage is named beside the broken chain). From the plan alone."""
    chain = data_files(plan)
    names = set_names(_backups(plan))
    others = [name for b in plan.data_backups if b.path and (name := _name(b, names)) not in chain]
    if not chain and plan.chain.status is not ChainStatus.COMPLETE:
        return PageScope([], others, "the broken chain plans no full or differential backup, so every one of the "
                                     f"database's is read: {_named(others)}", True)
    if pages == ALL:
        return PageScope(chain, others, f"every full and differential backup of the database: {len(chain)} file(s) "
                                        f"of the planned chain ({_named(chain)}) and {len(others)} {OUTSIDE}"
                                        + (f" ({_named(others)})" if others else ""), True)
    return PageScope(chain, [], f"the planned chain's full and differential backups ({_named(chain)})", False)


def page_owners(backup: BackupSet) -> dict[int, int] | None:
    """The data files a backup's pages may belong to (file id -> size in pages), from its own file
    list; the log file holds no data page. None where the backup listed none (nothing to hold to)."""
    owners = {f.file_id: f.size_bytes // PAGE for f in backup.database_files if f.file_id is not None and f.type != "L"}
    return owners or None


NOT_VERIFIABLE = "not verifiable offline"


def no_plain_page(scan: PageScan) -> str | None:
    """Why a file's pages cannot be judged when not one of them reads as a SQL Server page in its place
    (pages.PageScan.placed) and not all are zero: what BACKUP ... WITH ENCRYPTION makes of them (their
    headers encrypted too), or pages overwritten. None for a file with any such page. What such a file
    was found to hold (the noise read as pages) is dropped with it: no finding of noise is damage."""
    if not scan.pages or scan.placed or scan.zeroed == scan.pages:
        return None
    return (f"{scan.path}: {NOT_VERIFIABLE}: none of its {scan.pages} pages reads as a SQL Server page: an encrypted "
            "backup (BACKUP ... WITH ENCRYPTION), or pages overwritten; the restore, with the certificate, decides")


def read_pages(source: Source, paths: Iterable[str | Sequence[str]],
               owners: Mapping[str, Mapping[int, int] | None] | None = None,
               encrypted: Mapping[str, str] | None = None,
               where: Mapping[str, tuple[str, int | None]] | None = None,
               starts: SetStarts | None = None) -> PageVerification:
    """Scan every backup: each item of `paths` is one backup set, a file or the files of its families,
    which are read as one backup (pages.SetScan); what one family's file could not give is said of it.
    A file of `encrypted` (path -> how that is known) is not read: its pages cannot be judged offline.
    `where` places a backup named otherwise than by its path (`set_names`): name -> (path, position);
    `starts` says where each position begins (by default, from each file's headers, read once)."""
    starts = starts or SetStarts(source)
    found = PageVerification()
    started = time.perf_counter()
    for item in paths:
        family = SetScan()
        for path in [item] if isinstance(item, str) else item:
            if encrypted and path in encrypted:
                found.not_verifiable.append(f"{path}: {NOT_VERIFIABLE}: encrypted ({encrypted[path]})")
                continue
            file, position = (where or {}).get(path, (path, None))
            reader = SourceFile(source, file)
            try:
                family.add(reader, (owners or {}).get(path), starts.start(file, position), path)
            except NeedsServerHeaderOnly:
                found.compressed.append(path)
            except MtfUnsupported as exc:
                # A layout the reader does not know: nothing read, and no proof of damage.
                found.unreadable.append(f"{path}: {exc}")
            except MtfError as exc:
                # The bytes are there but are not the backup's structure: the backup is damaged.
                found.damaged.append(str(exc))
            except (SourceError, OSError) as exc:
                found.unreadable.append(f"{path}: {exc}")
            found.bytes += reader.bytes_read
        for scan in family.results():
            why = no_plain_page(scan)
            if why is None:
                found.scans.append(scan)
            else:
                found.not_verifiable.append(why)
    found.boot = _newest_boot_page(source, [scan.path for scan in found.scans], where or {}, starts)
    found.seconds = time.perf_counter() - started
    return found


class SetStarts:
    """Where each backup set read begins in its file (pages.locate_data_streams' `start`): 0 for a file's
    first set (walked from its media header), else its SSET block as the file's headers placed it when
    they were catalogued (`known`, from BackupSet.set_offset), so that no file's headers are read again
    for each of its sets. Where that is not known (a plan made without it) the file's headers are read,
    once per file, raising what reading them raises."""

    def __init__(self, source: Source, known: Mapping[tuple[str, int], int] | None = None) -> None:
        self.source = source
        self.known = dict(known or {})
        self.read: dict[str, dict[int, int]] = {}

    def start(self, file: str, position: int | None) -> int:
        if position is None or position == 1:
            return 0
        if (file, position) in self.known:
            return self.known[(file, position)]
        if file not in self.read:
            self.read[file] = {h.position: h.set_offset for h in read_backup_headers(SourceFile(self.source, file))}
        offsets = self.read[file]
        if position not in offsets:
            raise SourceError(f"{file}: holds {len(offsets)} backup set(s), not set {position}: the file changed "
                              "since it was planned")
        return offsets[position]


def _newest_boot_page(source: Source, paths: list[str], where: Mapping[str, tuple[str, int | None]] | None = None,
                      starts: SetStarts | None = None) -> BootPage | None:
    starts = starts or SetStarts(source)
    for path in reversed(paths):  # the chain's order: the newest data backup last
        file, position = (where or {}).get(path, (path, None))
        try:
            boot = read_boot_page(SourceFile(source, file), starts.start(file, position))
        except (SourceError, OSError):
            continue  # the page scan of the same file has already said what is wrong with it
        if boot is not None:
            return replace(boot, path=path)  # named as the backup set is
    return None


def _marked(text: str, paths: list[str]) -> str:
    """A message about a file outside the chain ("path: ..." or the bare path), said to be outside it."""
    for path in paths:
        if text == path or text.startswith(f"{path}: "):
            return _file(path, True) + text[len(path):]
    return f"{text} ({OUTSIDE})"


def combined(chain: PageVerification, others: PageVerification, scope: PageScope) -> PageVerification:
    """The chain's reading and the other backups' as one; the boot page stays the chain's where it has
    data backups (the restored database's), and what is outside the chain is said to be."""
    outside = scope.others if scope.chain else []  # with no chain planned, no file is outside it

    def mark(texts: list[str]) -> list[str]:
        return [_marked(text, outside) for text in texts] if outside else texts

    return PageVerification(
        scans=chain.scans + others.scans, damaged=chain.damaged + mark(others.damaged),
        unreadable=chain.unreadable + mark(others.unreadable), compressed=chain.compressed + mark(others.compressed),
        not_verifiable=chain.not_verifiable + mark(others.not_verifiable),
        seconds=chain.seconds + others.seconds, bytes=chain.bytes + others.bytes,
        boot=chain.boot if scope.chain else others.boot, scope=scope.said, outside=outside,
        database_wide=scope.database_wide)


def source_checkdb(boot: BootPage | None) -> str:
    """The source server's own record of its last clean CHECKDB, as the boot page keeps it."""
    if boot is None:
        return "not found (no data backup of the chain carries the boot page)"
    if boot.checksum == "mismatch":
        return f"not read (the boot page in {boot.path} fails its checksum)"
    if CHECKDB in boot.unread:
        return f"not read (where a version {boot.version} boot page keeps it is not confirmed)"
    # The field's place is inferred from the corpus (no published layout gives it), and a page written
    # without a checksum is read unverified: both are said with the value.
    unverified = "; that page carries no checksum, so unverified" if boot.checksum == "absent" else ""
    if boot.last_known_good is None:
        return f"never (the boot page in {boot.path} records none{unverified})"
    return (f"{boot.last_known_good:%Y-%m-%d %H:%M:%S} (the source server's clock; boot page in {boot.path}, "
            f"field place inferred from the corpus{unverified})")


def boot_details(boot: BootPage | None) -> dict[str, object] | None:
    if boot is None:
        return None
    return {"path": boot.path, "offset": boot.source, "checksum": boot.checksum, "version": boot.version,
            "create_version": boot.create_version, "name": boot.name, "compatibility_level": boot.compatibility_level,
            "created": boot.created.isoformat() if boot.created else None,
            "last_known_good_checkdb": boot.last_known_good.isoformat() if boot.last_known_good else None,
            "unread": list(boot.unread)}


def _counts(scans: list[PageScan]) -> dict[str, int]:
    return {"files": len(scans), "pages": sum(s.pages for s in scans),
            "checksums_verified": sum(s.checksummed for s in scans),
            "without_checksum": sum(s.without_checksum for s in scans),
            "torn_page_protected": sum(s.torn_page_protected for s in scans),
            "zeroed": sum(s.zeroed for s in scans), "unformatted": sum(s.unformatted for s in scans)}


def judge(found: PageVerification, evidence: str | None = None) -> CheckResult:
    counts = _counts(found.scans)
    by_type: dict[str, int] = {}
    for scan in found.scans:
        for kind, count in scan.by_type.items():
            name = PAGE_TYPES.get(kind, f"type {kind}")
            by_type[name] = by_type.get(name, 0) + count
    details = {**counts, "by_type": by_type, "seconds": round(found.seconds, 3), "bytes_read": found.bytes,
               "per_file": {s.path: {"pages": s.pages, "checksums_verified": s.checksummed,
                                     "without_checksum": s.without_checksum, "findings": len(s.findings)}
                            for s in found.scans},
               "natively_compressed": found.compressed, "unreadable": found.unreadable, "damaged": found.damaged,
               "not_verifiable_offline": found.not_verifiable,
               FILES_NOT_READ: [f"{path}: natively compressed" for path in found.compressed] + found.not_verifiable,
               "boot_page": boot_details(found.boot), "source_last_clean_checkdb": source_checkdb(found.boot),
               "backups_read": found.scope or None, "outside_chain": found.outside}
    findings = [found.said(f) for f in found.findings]
    counted = (f"{counts['pages']} pages in {counts['files']} file(s): {counts['checksums_verified']} checksums "
               f"verified, {counts['without_checksum']} pages without checksum"
               + (f"; backups read: {found.scope}" if found.scope else ""))

    def result(status: CheckStatus, summary: str, said: list[str], required: bool = True) -> CheckResult:
        more = [f"(+{len(said) - SHOWN} more in {evidence or 'the evidence'})"] if len(said) > SHOWN else []
        return CheckResult(CheckName.PAGE_VERIFICATION, status, summary, said[:SHOWN] + more, details, evidence,
                           required=required, kind=CheckKind.BACKUP_FILES)

    if findings or found.damaged:
        pages = len({(f.path, f.page) for f in found.findings})
        summary = (f"{pages} damaged page(s)" if findings else "a backup file's data stream is damaged") + \
                  (f" and {len(found.damaged)} file(s) with a damaged structure" if findings and found.damaged else "")
        summary += _outside_said(found)
        return result(CheckStatus.FAILED, f"{summary}; {counted}",
                      [f"backup file damaged: {d}" for d in found.damaged] + findings
                      + [f"not read: {u}" for u in found.unreadable])
    if found.unreadable:
        return result(CheckStatus.ERROR, f"{len(found.unreadable)} backup file(s) could not be read; {counted}",
                      [f"not read: {u}" for u in found.unreadable])
    compressed = (f"; {len(found.compressed)} natively compressed file(s) have no pages to read offline "
                  f"(the restore verifies them): {', '.join(found.compressed)}" if found.compressed else "")
    compressed += (f"; {len(found.not_verifiable)} file(s) {NOT_VERIFIABLE} (the restore verifies them): "
                   + "; ".join(found.not_verifiable) if found.not_verifiable else "")
    if not found.scans:
        # Nothing was read: a check that did not run is not a pass, and says why.
        whose = "the database" if found.database_wide else "the chain"
        why = (f"{whose} has no full or differential backup" if not found.compressed and not found.not_verifiable
               else f"every data backup of {whose} is natively compressed" if not found.not_verifiable
               else f"no data backup of {whose} is verifiable offline")
        return result(CheckStatus.SKIPPED, f"not run: {why}{compressed}", list(found.not_verifiable), required=False)
    return result(CheckStatus.PASSED, f"no damaged page; {counted}{compressed}; last clean CHECKDB on the source: "
                                      f"{source_checkdb(found.boot)}", list(found.not_verifiable))


def _outside_said(found: PageVerification) -> str:
    """Which damaged backups lie outside the chain, and whether the chain's own are damaged too."""
    marked = {path: f"{_file(path, True)}: " for path in found.outside}  # how their messages begin

    def outside(damage: str) -> bool:
        return any(damage.startswith(begins) for begins in marked.values())

    bad = [path for path, begins in marked.items() if any(f.path == path for f in found.findings)
           or any(d.startswith(begins) for d in found.damaged)]
    if not bad:
        return ""
    chain_damaged = any(f.path not in marked for f in found.findings) or not all(map(outside, found.damaged))
    return (f" ({'also ' if chain_damaged else ''}in backup(s) {OUTSIDE}: {_named(bad)}"
            + ("" if chain_damaged else "; none in the planned chain's own") + ")")


def render(found: PageVerification) -> str:
    """The evidence file: every file read with its counts, then every finding in full."""
    lines = ["# Offline page verification (restoreproof, engines/mssql/pages.py)", ""]
    if found.scope:
        lines += [f"backups read: {found.scope}", ""]
    for scan in found.scans:
        types = ", ".join(f"{PAGE_TYPES.get(k, f'type {k}')} {n}" for k, n in scan.by_type.items())
        lines.append(f"{_file(scan.path, scan.path in found.outside)}: {scan.pages} pages, "
                     f"{scan.checksummed} checksums verified, "
                     f"{scan.without_checksum} without checksum ({scan.torn_page_protected} torn-page protected), "
                     f"{scan.zeroed} zeroed, {scan.unformatted} never formatted, "
                     + (f"{scan.stale} stale (another page's bytes in a slot not in use), " if scan.stale else "")
                     + f"{len(scan.findings)} finding(s); "
                     f"by type: {types or 'none'}")
    lines += [f"natively compressed (no pages offline): {path}" for path in found.compressed]
    lines += list(found.not_verifiable)
    lines += [f"damaged structure: {what}" for what in found.damaged]
    lines += [f"not read: {what}" for what in found.unreadable]
    lines += ["", f"{len(found.findings)} finding(s):"] + [found.said(f) for f in found.findings]
    lines.append(f"\nlast clean CHECKDB on the source: {source_checkdb(found.boot)}")
    lines.append(f"read {found.bytes} bytes in {found.seconds:.3f} s")
    return "\n".join(lines) + "\n"


def _grouped(paths: list[str], backups: list[BackupSet]) -> list[list[str]]:
    """`paths` (as `set_names` names them) as backup sets: families with one BackupSetGUID together, in
    the order given. A second file of a family already in a group is a copy of that backup (a file
    copied, or an appended file beside an older version of itself): it starts a group of its own, so
    its pages are never taken for the same pages written twice."""
    names = set_names(backups)
    data = [b for b in backups if b.path and b.type is not BackupType.LOG]  # as in read_and_judge
    guids = {_name(b, names): b.backup_set_guid for b in data}
    families = {_name(b, names): b.family for b in data}
    groups: list[tuple[str | None, list[str], set[str | None]]] = []
    for path in paths:
        guid, family = guids.get(path), families.get(path)
        group = next((g for g in groups if guid is not None and g[0] == guid and family not in g[2]), None)
        if group is None:
            groups.append((guid, [path], {family}))
        else:
            group[1].append(path)
            group[2].add(family)
    return [members for _, members, _ in groups]


def withdrawn(found: PageVerification, encrypted: Mapping[str, str]) -> PageVerification | None:
    """The reading as it stands once the target said these files are encrypted (path -> how that is known):
    their pages are taken back, what was read of them (checksums over encrypted bytes, findings of noise) no
    verification and no damage, each file named not verifiable offline. None where no file read is one."""
    taken = [scan for scan in found.scans if scan.path in encrypted]
    if not taken:
        return None
    boot = found.boot if found.boot is None or found.boot.path not in encrypted else None
    return replace(found, scans=[scan for scan in found.scans if scan.path not in encrypted], boot=boot,
                   not_verifiable=found.not_verifiable + [
                       f"{scan.path}: {NOT_VERIFIABLE}: encrypted ({encrypted[scan.path]}); what its {scan.pages} "
                       f"pages read as offline ({scan.checksummed} checksums, {len(scan.findings)} finding(s)) is "
                       "withdrawn" for scan in taken])


def encrypted_sets(backups: Sequence[BackupSet]) -> dict[str, str]:
    """The data backups known to be encrypted, as the check names them (`set_names`) -> how that is known."""
    names = set_names(backups)
    return {_name(b, names): b.encryption.basis for b in backups
            if b.path and b.encryption is not None and b.encryption.state is EncryptionState.ENCRYPTED}


def verify_pages(plan: RestorePlan, source: Source, evidence: Evidence, pages: str = CHAIN) -> CheckResult:
    """The check for one database: `pages` is the setting mssql.pages ("chain" or "all")."""
    return read_and_judge(plan, source, evidence, pages)[0]


def read_and_judge(plan: RestorePlan, source: Source, evidence: Evidence,
                   pages: str = CHAIN) -> tuple[CheckResult, PageVerification]:
    """The check and the reading it judged (kept for `withdrawn`, once a target has spoken)."""
    scope = page_scope(plan, pages)
    backups = _backups(plan)
    names = set_names(backups)
    # Data backups only: a log set appended to the same file goes by the file's bare name too (`_name`).
    data = [b for b in backups if b.path and b.type is not BackupType.LOG]
    where = {_name(b, names): (b.path, b.position) for b in data if b.path}
    owners = {_name(b, names): page_owners(b) for b in data}
    # Where each set begins, as the catalogue read it: no file's headers read again per set (S3 reads).
    starts = SetStarts(source, {(b.path, b.position): b.set_offset for b in data
                                if b.path and b.position is not None and b.set_offset is not None})
    # Read apart, so that the boot page is the chain's; each reading is of whole backup sets.
    found = combined(read_pages(source, _grouped(scope.chain, backups), owners, encrypted_sets(backups), where,
                                starts),
                     read_pages(source, _grouped(scope.others, backups), owners, encrypted_sets(backups), where,
                                starts),
                     scope)
    return judge(found, evidence.write(EVIDENCE, render(found))), found
