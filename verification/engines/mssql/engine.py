"""The SQL Server engine: offline catalog and chain proof, then restore in a disposable SQL Server.

Before any server, and also where none can run: every page of the chain's full and differential
backups (with the setting mssql.pages: all, of every one of the database's in the source) is read and
verified offline (page_check.py): check "page_verification".

Restore order for a planned chain (all families of each set at once):

    DBCC TRACEON (3004, 3605)                -> restore steps in the error log
    RESTORE HEADERONLY (each set SQL Server 2014 or newer wrote, one batch)
                                             -> its encryption: KeyAlgorithm, EncryptorThumbprint
    CREATE MASTER KEY, CREATE CERTIFICATE    -> in master, each certificate of mssql.certificates, with its
                                                private key (engines/mssql/certificates.py)
    RESTORE FILELISTONLY (the full)          -> a MOVE for every file (Windows paths in the backup); TDEThumbprint
    RESTORE DATABASE ... NORECOVERY          -> full, then differential: phase "transfer"
    RESTORE LOG ... NORECOVERY [, STOPAT]    -> each log: phase "log_restore"
    RESTORE DATABASE ... WITH RECOVERY       -> message 3421: phases "redo" and "recovery_end"
    DBCC CHECKDB ... TABLERESULTS            -> check "dbcc_checkdb", proven complete by
                                                LastGoodCheckDbTime, full output kept

File zeroing comes from the error log (trace flag 3004), per file.

Encrypted backups (engines/mssql/encryption.py): a set encrypted with a certificate no configured one
matches stops the restore before any RESTORE DATABASE, naming the thumbprint; SQL Server's own 33111
("Cannot find server certificate with thumbprint ...", a TDE database) says the same. What the target
said of each backup's encryption replaces the plan's offline "unknown" in the report.

From S3 with s3.restore_mode: direct, SQL Server reads the objects itself: the same statements with
FROM URL = 's3://...' (one URL per stripe), after a credential made in master from the configured keys
(engines/mssql/s3_url.py); before any statement, every stripe of each set is checked to be in the plan.

Every statement reaches sqlcmd's command line in the target (-Q). None carries a secret: the S3 keys and
the certificates' passwords go in as files SQL Server reads itself (engines/mssql/secret_files.py), the
login's password is in sqlcmd's environment only. `_Restore.run` refuses to send a statement holding any
of them (a TargetError: restoreproof's own fault), and masks every statement it records besides.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from verification.config import MSSQL_2022, Settings
from verification.engines.base import (
    DataAccess,
    DataChecks,
    Evidence,
    RestoreOutcome,
    SourcePlan,
    data_checks_off,
    run_data_checks,
)
from verification.engines.mssql import certificates, chain, encryption, page_check, s3_url, secret_files, tsql, work
from verification.engines.mssql.accounting import account, attach_unread
from verification.engines.mssql.catalog import looks_like_backup, scan, system_identifier, walk
from verification.engines.mssql.header_cache import HeaderCache
from verification.engines.mssql.mtf import COMPRESSED_MAGIC
from verification.engines.mssql.outputs import (
    BACKUP_FAULTS,
    certificate_needed,
    parse_checkdb_rows,
    parse_restore_messages,
    parse_restore_steps,
    parse_result_sets,
    parse_sql_errors,
)
from verification.engines.mssql.page_check import PageVerification, read_and_judge
from verification.engines.mssql.restore_proof import last_restore_query, point_not_reached, prove_point
from verification.engines.mssql.url_target import S3UrlTarget
from verification.errors import ArchivedObjectError, ConfigError, RestoreproofError, SourcePermissionError, TargetError
from verification.model import (
    BackupEncryption,
    BackupSet,
    CheckKind,
    CheckName,
    CheckResult,
    CheckStatus,
    EncryptionState,
    PhaseName,
    PhaseStatus,
    PhaseTiming,
    PhaseWork,
    RestorePlan,
)
from verification.redaction import Redactor
from verification.restore_points import PointChoice, choose
from verification.sources.base import Source
from verification.targets.base import ExecResult, Target, TargetProvider

DETECT_FILES = 200
# Seconds pymssql waits to log in to the restored server for the data checks (its own default).
LOGIN_TIMEOUT = 60


class SqlServerTarget(Protocol):
    provision_seconds: float

    def sql(self, statement: str, timeout: float) -> ExecResult: ...

    def errorlog(self) -> str: ...

    def redact(self, text: str) -> str: ...

    def data_url(self, database: str) -> Any:
        """A SQLAlchemy URL reaching the restored server from this process, the target kept without
        a network (a loopback relay through the container's exec)."""
        ...

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the login's password."""
        ...


def _named(names: list[str]) -> str:
    """A set's families (BackupSet.name each) as one backup in what is said."""
    return " + ".join(names)


def _set_key(backup: BackupSet) -> tuple[str, int | None]:
    return backup.path or "", backup.position


def _set_row(rows: list[dict[str, str | None]], position: int | None) -> dict[str, str | None]:
    """The HEADERONLY row of the set asked for (WITH FILE = n answers with that set's alone; a row per set
    where a server answers with every set of the media), by its Position."""
    wanted = str(position or 1)
    return next((row for row in rows if (row.get("Position") or "").strip() == wanted), rows[0])


def media_sets(backups: list[BackupSet]) -> list[list[BackupSet]]:
    """Consecutive files of one backup set (its families), in restore order."""
    groups: list[list[BackupSet]] = []
    for backup in backups:
        key = (backup.media_set_guid, backup.position, backup.first_lsn, backup.last_lsn, backup.type)
        if groups and (groups[-1][0].media_set_guid, groups[-1][0].position, groups[-1][0].first_lsn,
                       groups[-1][0].last_lsn, groups[-1][0].type) == key:
            groups[-1].append(backup)
        else:
            groups.append([backup])
    return groups


class MssqlEngine:
    name = "mssql"
    display_name = "SQL Server"
    probe_container_start = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Set by check_settings for a run that restores: its plans are then held to the certificates.
        self._restoring = False
        # What the page check read of each database, until its restore says which files are encrypted.
        self._pages: dict[str, PageVerification] = {}

    # -- targets -----------------------------------------------------------------------------------

    def target_provider(self, kind: str, plans: list[RestorePlan], source: Source | None = None) -> TargetProvider:
        from verification.engines.mssql.target import MssqlTargetProvider

        # Direct from S3: everything SQL Server's S3 connector cannot do is refused here, before any target.
        location = s3_url.location_for(source, self.settings, kind) if source is not None else None
        if kind == "local":
            raise RestoreproofError("SQL Server backups restore only into a SQL Server container (--target docker)")
        # The image follows the newest database version in the chains (a 2019 backup needs 2019 or newer);
        # reading S3 itself needs SQL Server 2022 at least.
        versions = [b.database_version or 0 for p in plans for b in p.chain.backups]
        if location is not None:
            versions.append(MSSQL_2022)
        return MssqlTargetProvider(self.settings.mssql, max(versions, default=0), state_dir=self.settings.state_dir,
                                   s3=location)

    def check_settings(self, source: Source, target: str) -> None:
        """Before a run is recorded: a local target cannot restore SQL Server backups, and direct mode's
        refusals (what SQL Server's S3 connector cannot do) come here too, not after the run started."""
        if target == "local":
            raise ConfigError("SQL Server backups restore only into a SQL Server container, not --target local "
                              "(the setting target: local): use --target docker, auto or offline")
        if target != "offline":  # an offline run restores nothing: SQL Server never reads S3 itself
            s3_url.location_for(source, self.settings, target)
            # Every configured certificate read now: a file missing or not a certificate is refused by name.
            certificates.load(self.settings.mssql)
            self._restoring = True

    def check_target(self, kind: str) -> None:
        from verification.targets.docker import docker_client

        if kind == "local":
            raise RestoreproofError("SQL Server backups restore only into a SQL Server container (--target docker)")
        docker_client().close()  # the image is chosen per backup version when the database is verified

    def phase_work(self, plan: RestorePlan) -> list[PhaseWork]:
        return work.phase_work(plan, self.settings)

    def tool_versions(self, target: Target) -> dict[str, str]:
        sql = getattr(target, "sql", None)
        if sql is None:
            return {"sqlserver": "(not a SQL Server target)"}
        try:  # SQL Server names its build only through the server itself
            result = sql("SET NOCOUNT ON; SELECT @@VERSION", 60)
            return {"sqlserver": result.stdout.strip() if result.ok else f"(exit {result.exit_code})"}
        except TargetError as exc:
            return {"sqlserver": f"(not run: {exc})"}

    def product_versions(self, tool_versions: dict[str, str]) -> dict[str, str]:
        # @@VERSION's words stay in the evidence (versions.json) as the server said them: no SQL Server
        # output of it has been captured here to read a version from.
        return {}

    # -- discovery and planning ------------------------------------------------------------------

    def detect(self, source: Source) -> bool:
        cache = HeaderCache.for_source(self.settings, source)
        try:
            for path in walk(source)[:DETECT_FILES]:
                # A file the cache knows began with TAPE or MSSQLBAK is known without a read (no GET
                # on a warm night); what else it knows is decided from the bytes, as without it.
                known = cache.lookup(path, source.fingerprint(path)) if cache.enabled else None
                if known is not None and (known.headers or (
                        known.unreadable is not None and known.unreadable.kind == "needs-server")):
                    return True
                try:
                    magic = source.read_bytes(path, 0, 8)
                except (ArchivedObjectError, SourcePermissionError):
                    continue  # archived, or not ours to read: planning names it; the next file may tell
                # A folder of damaged .bak/.trn files is still SQL Server's: planning then names each one.
                if magic.startswith(b"TAPE") or magic == COMPRESSED_MAGIC or looks_like_backup(path):
                    return True
        finally:
            cache.close()
        return False

    def plan(self, source: Source, at: datetime | None, point: PointChoice | None = None) -> SourcePlan:
        cache = HeaderCache.for_source(self.settings, source)
        try:
            catalog = scan(source, self.settings.exclude, cache if cache.enabled else None)
        finally:
            cache.close()
        plans = []
        by_catalog: dict[int, RestorePlan] = {}
        for db in catalog.databases:
            name = catalog.display_name(db)
            when, rule = at, None
            if at is None and point is not None:
                # One entry per complete backup set (its first family) describes the window.
                sets = [chain.backup_sets(m)[0] for m in db.sets if m.complete]
                when, rule = choose(point, name, sets, continuous=any(b.type == "log" for b in sets))
            result = chain.plan(db, name, when)
            result.system_id = system_identifier(db)
            result.written_by = chain.written_by(result.chain.backups)
            if rule is not None:
                result.chain.rules.insert(0, rule)
            plans.append(result)
            by_catalog[id(db)] = result
        orphans, unreadable = account(catalog, by_catalog)
        attach_unread(catalog, plans, source.modified)
        plans += orphans
        compressed = [u.path for u in catalog.unreadable if u.kind == "needs-server"]
        if compressed:
            # A compressed log cannot be read offline: it may be the one a gap is missing.
            for result in plans:
                result.chain.problems = [
                    replace(p, message=f"{p.message}; {len(compressed)} natively compressed file(s) could not be "
                                       f"read offline and may hold it: {', '.join(compressed[:5])}")
                    if p.code == "log-gap" else p for p in result.chain.problems]
        if self._restoring:
            # Before any target: a backup known to need a certificate none of the configured ones is.
            certificates.require(plans, certificates.load(self.settings.mssql))
        return SourcePlan(plans, unreadable)

    def check_backup_files(self, plan: RestorePlan, source: Source, evidence: Evidence) -> list[CheckResult]:
        check, found = read_and_judge(plan, source, evidence, self.settings.mssql.pages)
        self._pages[plan.database] = found
        return [check]

    def restore_and_check(self, plan: RestorePlan, target: Target, evidence: Evidence,
                          outcome: RestoreOutcome | None = None,
                          data_checks: DataChecks | None = None) -> RestoreOutcome:
        if not hasattr(target, "sql"):
            raise TargetError(f"a {target.kind} target cannot restore SQL Server backups")
        sql_target: SqlServerTarget = target  # type: ignore[assignment]
        return _Restore(self.settings, plan, sql_target, evidence, outcome or RestoreOutcome(), data_checks,
                        self._pages.pop(plan.database, None)).execute()


class _Restore:
    def __init__(self, settings: Settings, plan: RestorePlan, target: SqlServerTarget, evidence: Evidence,
                 outcome: RestoreOutcome, data_checks: DataChecks | None = None,
                 pages: PageVerification | None = None) -> None:
        self.pages = pages  # what the offline page check read, to take back from files found encrypted
        self.ms = settings.mssql
        self.checks_timeout = settings.checks.timeout
        self.run_data_checks = data_checks
        self.plan = plan
        self.target = target
        self.evidence = evidence
        self.outcome = outcome
        self.transcript: list[str] = []
        self.database = plan.chain.backups[0].database if plan.chain.backups else plan.database
        self.options = tsql.RestoreOptions(self.ms.buffer_count, self.ms.max_transfer_size)
        self.terminal_messages: str | None = None  # what RESTORE LOG ... STOPAT printed: the point's only proof
        # Where SQL Server reads the backups: the mounted files, or (direct from S3) the objects themselves.
        self.location = target.location if isinstance(target, S3UrlTarget) else None
        self.media: tsql.Media = s3_url.Urls(self.location) if self.location is not None else tsql.DISKS
        if self.location is not None:
            evidence.hide(self.location.secrets)   # whatever else writes evidence for this database, too
        self.certificates = certificates.load(self.ms) if self.ms.certificates else []
        # Masked in everything written for this database, beside the settings' own masking of them.
        evidence.hide(c.password.get_secret_value() for c in self.certificates)
        # A set (its first path and position) -> its HEADERONLY row.
        self.headers: dict[tuple[str, int | None], Mapping[str, str | None]] = {}
        # What no statement may carry: the target's (its login's password, with S3 the keys) and the
        # certificates' passwords, each also as a T-SQL literal writes it.
        passwords = [c.password.get_secret_value() for c in self.certificates]
        self.unsendable = Redactor.of([*getattr(target, "secrets", ()), *passwords,
                                       *(p.replace("'", "''") for p in passwords)])

    def run(self, statement: str) -> ExecResult:
        if self.unsendable(statement) != statement:
            # The statement would stand on sqlcmd's command line in the target, readable by any process there.
            raise TargetError("not sent to SQL Server: a statement restoreproof made holds a secret (an S3 key, a "
                              "certificate's password or the login's), which would stand on sqlcmd's command line: "
                              + self.unsendable(statement)[:200])
        result = self.target.sql(statement, timeout=self.ms.statement_timeout)
        # Redact again here, whatever the target did: every text below comes from this result. The
        # statement too, a second line of defence behind the refusal above.
        result.stdout, result.stderr = self.target.redact(result.stdout), self.target.redact(result.stderr)
        self.transcript.append(f"> {self.target.redact(statement)}\n{result.output}(exit {result.exit_code})\n")
        return result

    def failed(self, statement: str, result: ExecResult) -> None:
        statement = self.target.redact(statement)
        if result.timed_out:
            self.outcome.errors.append(f"did not finish within {self.ms.statement_timeout:.0f} s: {statement}")
            return
        errors = parse_sql_errors(result.output)
        if not errors:
            self.outcome.errors.append(f"sqlcmd exited {result.exit_code} without a SQL Server error for: "
                                       f"{statement} ({result.output.strip()[-300:]})")
            return
        # The backups are at fault only when SQL Server says so specifically; all its messages go
        # with the reason either way.
        reasons = self.outcome.failures if any(e.number in BACKUP_FAULTS for e in errors) else self.outcome.errors
        reasons.extend(error.plain for error in errors)

    def execute(self) -> RestoreOutcome:
        out = self.outcome
        out.phases.append(PhaseTiming(PhaseName.PROVISION, PhaseStatus.MEASURED, seconds=self.target.provision_seconds))
        try:
            if self.restore_chain():
                self.recover()
            if out.online:
                self.data_checks()
                self.checkdb()
        finally:
            self.withdraw_pages()
            self.evidence.write("sqlcmd-transcript.txt", "\n".join(self.transcript))
            errorlog = self.target.redact(self.target.errorlog())
            self.evidence.write("errorlog.txt", errorlog)
            self.log_phases(errorlog)
        for name in (PhaseName.TRANSFER, PhaseName.LOG_RESTORE, PhaseName.REDO, PhaseName.RECOVERY_END,
                     PhaseName.DATA_CHECKS, PhaseName.INTEGRITY_CHECK):
            if not any(p.name == name for p in out.phases):
                out.phases.append(PhaseTiming.not_reached(name, "an earlier step did not complete"))
        return out

    def data_checks(self) -> None:
        """The data checks, from this process, over the target's loopback relay (no network of its own)."""
        if self.run_data_checks is None:
            self.outcome.phases.append(data_checks_off())
            return
        started = time.monotonic()
        if not hasattr(self.target, "data_url"):
            # Not a pass and not a reason to skip CHECKDB: said as a check that did not run.
            self.outcome.checks.append(CheckResult("data_checks", CheckStatus.ERROR, "the data checks did not run: "
                                                   "this target gives no way to reach the restored server",
                                                   kind=CheckKind.DATA))
            self.outcome.phases.append(PhaseTiming.not_reached(PhaseName.DATA_CHECKS, "no way to the server"))
            return
        from sqlalchemy.engine import make_url

        backups = self.plan.chain.backups
        target = self.target
        # pymssql's own bounds on each query and on logging in (FreeTDS waits for ever by default): a
        # query the data checks left running when checks.timeout ran out ends by itself.
        seconds = max(1, math.ceil(self.checks_timeout))
        bounds = {"timeout": str(seconds), "login_timeout": str(min(seconds, LOGIN_TIMEOUT))}

        def url(database: str) -> str:  # GX takes a string: the password in it is scrubbed as a secret
            made = make_url(target.data_url(database)).update_query_dict(bounds)
            return str(made.render_as_string(hide_password=False))

        access = DataAccess(url, (self.database,), self.database, self.outcome.achieved,
                            max((b.finish for b in backups), default=None), tuple(self.target.secrets))
        run_data_checks(self.run_data_checks, access, self.evidence, self.outcome, started)

    def ready(self, sets: list[list[BackupSet]]) -> bool:
        """What must hold before any statement: every stripe of each set in the plan, and (from S3) every
        object nameable as a URL, with options the S3 connector takes, and the credential made."""
        problems = s3_url.stripe_problems(sets)
        if self.location is not None:
            problems += s3_url.url_problems(self.location, [b.path or "" for b in self.plan.chain.backups])
            refused = s3_url.options_refused(self.ms)
            problems += [refused] if refused is not None else []
        if problems:
            self.outcome.errors.extend(f"not restored: {problem}" for problem in problems)
            return False
        if self.location is None:
            return True
        if not secret_files.takes_files(self.target):
            self.outcome.errors.append("this target cannot be given the S3 credential's keys as a file, the only "
                                       "way they reach SQL Server")
            return False
        with secret_files.placed(self.target, s3_url.credential_files(self.location)) as folder:
            made = self.run(s3_url.create_credential(self.location, folder))
        if made.ok:
            return True
        said = [e.plain for e in parse_sql_errors(made.output)] or [made.output.strip()[-300:] or "no output"]
        self.outcome.errors.append(f"the S3 credential {self.location.credential_name} could not be made in the "
                                   f"target (exit {made.exit_code}): " + "; ".join(said))
        return False

    def restore_chain(self) -> bool:
        sets = media_sets(self.plan.chain.backups)
        if not self.ready(sets):
            return False
        trace = self.run(tsql.TRACE_ON)
        if not trace.ok:
            self.failed(tsql.TRACE_ON, trace)
            return False
        if not self.read_encryption(sets) or not self.install_certificates() or not self.certificates_held(sets):
            return False
        full_paths = [b.path or "" for b in sets[0]]
        listing = self.run(tsql.filelist(full_paths, self.media, sets[0][0].position))
        if not listing.ok:
            self.failed("RESTORE FILELISTONLY", listing)
            self.learn_needed(sets[0], listing.output)
            return False
        files = (parse_result_sets(listing.stdout) or [[]])[0]
        if not files:
            self.outcome.errors.append("RESTORE FILELISTONLY returned no files")
            return False
        self.learn(sets[0], encryption.from_server(sets[0][0].software_version, self.headers.get(_set_key(sets[0][0])),
                                                   files, _named([b.name for b in sets[0]])))
        if not self.certificates_held(sets[:1]):
            return False
        moves = tsql.moves_for(self.database, files)
        data_seconds = log_seconds = 0.0
        data_bytes = log_bytes = 0
        for index, group in enumerate(sets):
            paths = [b.path or "" for b in group]
            checksum = bool(group[0].has_checksums)
            terminal = index == len(sets) - 1 and self.plan.stop_at is not None and group[0].type == "log"
            if group[0].type == "log":
                statement = tsql.restore_log(self.database, paths, self.options, checksum,
                                             self.plan.stop_at if terminal else None, self.media, group[0].position)
            else:
                statement = tsql.restore_database(self.database, paths, moves, self.options, checksum, self.media,
                                                  group[0].position)
            result = self.run(statement)
            if not result.ok:
                self.failed(statement, result)
                self.learn_needed(group, result.output)
                return False
            reported = parse_restore_messages(result.stdout)
            if not reported:
                self.outcome.errors.append(f"no 'successfully processed' message after: {statement}")
                return False
            if terminal and self.plan.stop_at is not None:
                self.terminal_messages = result.output
                refusal = point_not_reached(self.plan.stop_at, group[-1].name, result.output)
                if refusal is not None:
                    # Recovery would bring the database online at the log's end, short of the point.
                    self.outcome.failures.append(refusal)
                    return False
            for message in reported:
                if group[0].type == "log":
                    log_seconds += message.seconds or 0.0
                    log_bytes += message.bytes or 0
                else:
                    data_seconds += message.seconds or 0.0
                    data_bytes += message.bytes or 0
        self.outcome.phases.append(PhaseTiming(PhaseName.TRANSFER, PhaseStatus.MEASURED, seconds=data_seconds,
                                               bytes=data_bytes,
                                               details={"source": "RESTORE DATABASE ... successfully processed"}))
        if any(group[0].type == "log" for group in sets):
            self.outcome.phases.append(PhaseTiming(PhaseName.LOG_RESTORE, PhaseStatus.MEASURED, seconds=log_seconds,
                                                   bytes=log_bytes,
                                                   details={"source": "RESTORE LOG ... successfully processed"}))
        else:
            self.outcome.phases.append(PhaseTiming.absent(PhaseName.LOG_RESTORE, "the chain has no log backup"))
        return True

    # -- encryption: what each set needs, and the certificates that give it ----------------------------

    def read_encryption(self, sets: list[list[BackupSet]]) -> bool:
        """RESTORE HEADERONLY of every set a server that could encrypt backups wrote (2014 and newer), in one
        batch: their KeyAlgorithm, EncryptorType, EncryptorThumbprint. Works without the certificate."""
        asked = [group for group in sets if encryption.backup_encryption_possible(group[0].software_version)]
        if not asked:
            return True
        statement = " ".join(tsql.headeronly([b.path or "" for b in group], self.media, group[0].position)
                             for group in asked)
        result = self.run(statement)
        if not result.ok:
            self.failed("RESTORE HEADERONLY", result)
            return False
        answered = parse_result_sets(result.stdout)
        if len(answered) != len(asked) or not all(answered):
            self.outcome.errors.append(f"RESTORE HEADERONLY of {len(asked)} backup set(s) answered {len(answered)} "
                                       "result set(s): which backup is encrypted cannot be told")
            return False
        for group, rows in zip(asked, answered, strict=True):
            row = _set_row(rows, group[0].position)
            self.headers[_set_key(group[0])] = row
            self.learn(group, encryption.from_server(group[0].software_version, row, None,
                                                     _named([b.name for b in group])))
        return True

    def install_certificates(self) -> bool:
        """Every configured certificate, with its private key, created in the target's master (a master key
        made first where there is none): the files put in through Docker, the password read by SQL Server
        from its own file, the files removed once the certificates exist. Each one's thumbprint is then
        read back and held to the one computed from its file."""
        if not self.certificates:
            return True
        if not secret_files.takes_files(self.target):
            self.outcome.errors.append("this target cannot be given the certificates of mssql.certificates")
            return False
        files = {name: data for index, c in enumerate(self.certificates) for name, data in c.files(index).items()}
        with secret_files.placed(self.target, files) as folder:
            made = self.run(tsql.CREATE_MASTER_KEY)
            if not made.ok:
                self._certificate_error("the master key protecting the certificates could not be made in master",
                                        made)
                return False
            for index, certificate in enumerate(self.certificates):
                statement = certificates.create_certificate(certificate.name, f"{folder}/{index}.cer",
                                                            f"{folder}/{index}.pvk", f"{folder}/{index}.pwd")
                created = self.run(statement)
                if not created.ok:
                    self._certificate_error(f"certificate {certificate.name} (thumbprint {certificate.thumbprint}, "
                                            f"{certificate.certificate_path}) could not be created in the target",
                                            created)
                    return False
        held = self.run(tsql.certificates_query([c.name for c in self.certificates]))
        rows = {row.get("name"): row for row in (parse_result_sets(held.stdout) or [[]])[0]} if held.ok else {}
        for certificate in self.certificates:
            row = rows.get(certificate.name)
            found = encryption.thumbprint(row.get("thumbprint")) if row else None
            if found != certificate.thumbprint:
                self.outcome.errors.append(
                    f"certificate {certificate.name} is not in the target as made: master.sys.certificates gives "
                    f"thumbprint {found or 'none'}, its file {certificate.thumbprint}")
                return False
            if (row or {}).get("pvt_key_encryption_type") in (None, "NA"):
                self.outcome.errors.append(f"certificate {certificate.name} (thumbprint {certificate.thumbprint}) is "
                                           "in the target without its private key: it cannot decrypt a backup")
                return False
        return True

    def _certificate_error(self, what: str, result: ExecResult) -> None:
        said = [e.plain for e in parse_sql_errors(result.output)] or [result.output.strip()[-300:] or "no output"]
        self.outcome.errors.append(f"{what} (exit {result.exit_code}): " + "; ".join(said))

    def certificates_held(self, sets: list[list[BackupSet]]) -> bool:
        """Every thumbprint these sets are known to need is held by a certificate made in the target; the
        first one not held is an error naming it, before any restore statement that would need it."""
        held = {c.thumbprint for c in self.certificates}
        for group in sets:
            known = group[0].encryption
            if known is None:
                continue
            asymmetric = (known.encryptor_type or "").upper().replace("_", " ") == "ASYMMETRIC KEY"
            if known.encryptor_thumbprint and asymmetric:
                self.outcome.errors.append(
                    f"not restored: {_named([b.name for b in group])} is encrypted with an asymmetric key "
                    f"(thumbprint {known.encryptor_thumbprint}): restoreproof gives targets certificates only "
                    "(mssql.certificates), not EKM asymmetric keys")
                return False
            for needed in known.thumbprints:
                if needed not in held:
                    kind = ("TDE database" if needed == known.tde_thumbprint
                            else f"{known.algorithm or 'encrypted'} backup")
                    self.outcome.errors.append(f"not restored: {_named([b.name for b in group])} ({kind}) needs "
                                               f"the certificate with thumbprint {needed}: "
                                               + certificates.missing(needed, self.certificates))
                    return False
        return True

    def withdraw_pages(self) -> None:
        """The offline page check judged again once the target said which files are encrypted: what it read
        of their pages (a TDE database's keep a plain header) is no verification and no damage."""
        encrypted = page_check.encrypted_sets([*self.plan.chain.backups, *self.plan.data_backups])
        again = page_check.withdrawn(self.pages, encrypted) if self.pages is not None and encrypted else None
        if again is None:
            return
        checks = self.outcome.checks
        for index, check in enumerate(checks):
            if check.name == CheckName.PAGE_VERIFICATION:
                checks[index] = page_check.judge(again, self.evidence.write(page_check.EVIDENCE,
                                                                            page_check.render(again)))

    def learn(self, group: list[BackupSet], found: BackupEncryption) -> None:
        """What the target said of a set's encryption, on each of its families in the plan (the report's chain)."""
        sets = {_set_key(b) for b in group}  # by position too: one file may hold other sets of the chain
        backups = self.plan.chain.backups
        for index, backup in enumerate(backups):
            if _set_key(backup) in sets:
                backups[index] = replace(backup, encryption=found)
        group[:] = [replace(b, encryption=found) for b in group]

    def learn_needed(self, group: list[BackupSet], output: str) -> None:
        """SQL Server's 33111 named the certificate a set needs: kept on the set (its TDE certificate where the
        set's own encryption is known to be another or none)."""
        needed = certificate_needed(output)
        known = group[0].encryption
        if needed is None or known is None or needed in known.thumbprints:
            return
        tde = known.encryptor_thumbprint is not None or not encryption.backup_encryption_possible(
            group[0].software_version) or _set_key(group[0]) in self.headers
        where = f"SQL Server's message 33111 names certificate {needed}"
        self.learn(group, replace(known, state=EncryptionState.ENCRYPTED, basis=f"{known.basis}; {where}",
                                  **({"tde_thumbprint": needed} if tde else {"encryptor_thumbprint": needed})))

    def recover(self) -> None:
        statement = tsql.recover(self.database)
        result = self.run(statement)
        if not result.ok:
            self.failed(statement, result)
            return
        state = self.run(f"SELECT state_desc FROM sys.databases WHERE name = {tsql.literal(self.database)};")
        rows = (parse_result_sets(state.stdout) or [[]])[0]
        found = rows[0].get("state_desc") if state.ok and rows else None
        if found == "ONLINE":
            self.outcome.online = True
            self.prove_point()
        elif found:
            self.outcome.failures.append(f"database {self.database} is not ONLINE after recovery (state: {found})")
        else:
            # The server did not answer the question: restoreproof cannot tell, which is no verdict on the backups.
            self.outcome.errors.append(f"the state of database {self.database} after recovery could not be read "
                                       f"(exit {state.exit_code}): " + (state.output.strip()[-300:] or "no output"))

    def prove_point(self) -> None:
        """The point reached, from the server's own restore history (never copied from the plan)."""
        history = self.run(last_restore_query(self.database))
        if not history.ok:
            self.outcome.errors.append("the server's restore history could not be read: "
                                       + (history.output.strip()[-300:] or f"exit {history.exit_code}"))
            return
        proof = prove_point(self.plan, (parse_result_sets(history.stdout) or [[]])[0], self.terminal_messages)
        self.outcome.achieved, self.outcome.achieved_detail = proof.achieved, proof.detail
        self.outcome.proofs += proof.proofs
        self.outcome.failures += proof.failures
        self.outcome.errors += proof.errors

    def _checkdb_record(self) -> tuple[str | None, str | None]:
        """(the server's clock now, the database's LastGoodCheckDbTime), both as SQL Server reports them."""
        result = self.run(f"SELECT CONVERT(varchar(19), SYSDATETIME(), 126) AS server_time, CONVERT(varchar(19), "
                          f"DATABASEPROPERTYEX({tsql.literal(self.database)}, 'LastGoodCheckDbTime'), 126) "
                          "AS last_good;")
        row = ((parse_result_sets(result.stdout) or [[]])[0] or [{}])[0]
        return row.get("server_time"), row.get("last_good")

    def checkdb(self) -> None:
        server_time, previous = self._checkdb_record()
        statement = tsql.checkdb(self.database, self.ms.checkdb_options)
        result = self.run(statement)
        _, last_good = self._checkdb_record()
        evidence = self.evidence.write("dbcc-checkdb.txt", result.output)
        rows = [row for rows in parse_result_sets(result.stdout) for row in rows]
        findings = parse_checkdb_rows(rows)
        details = {"rows": len(rows), "last_good_checkdb": last_good, "before": previous,
                   "server_time_before": server_time, "options": self.ms.checkdb_options}
        # No rows can also mean CHECKDB never ran. Proof that it completed: the database's own
        # LastGoodCheckDbTime moved, to a time not before the server's clock when CHECKDB began
        # (the restored value is the source's, in its own time zone).
        proven = (last_good is not None and server_time is not None and last_good != previous
                  and last_good >= server_time)
        if findings:
            check = CheckResult(CheckName.DBCC_CHECKDB, CheckStatus.FAILED,
                                f"CHECKDB reported {len(findings)} error(s)",
                                [f"Msg {f.error}, Level {f.level}: {f.message}" for f in findings], details,
                                evidence)
        elif not result.ok:
            errors = parse_sql_errors(result.output)
            failed = any(e.number in BACKUP_FAULTS for e in errors)
            check = CheckResult(CheckName.DBCC_CHECKDB, CheckStatus.FAILED if failed else CheckStatus.ERROR,
                                f"CHECKDB ended with an error (exit {result.exit_code})",
                                [e.plain for e in errors] or [result.output.strip()[-300:]], details, evidence)
        elif not proven:
            check = CheckResult(CheckName.DBCC_CHECKDB, CheckStatus.ERROR,
                                "CHECKDB returned nothing and LastGoodCheckDbTime does not show it completed "
                                f"(before {previous}, after {last_good}, server clock at start {server_time})",
                                details=details, evidence=evidence)
        else:
            check = CheckResult(CheckName.DBCC_CHECKDB, CheckStatus.PASSED,
                                f"no allocation or consistency errors (LastGoodCheckDbTime {last_good})",
                                details=details, evidence=evidence)
        self.outcome.checks.append(check)
        self.outcome.phases.append(PhaseTiming(PhaseName.INTEGRITY_CHECK, PhaseStatus.MEASURED, seconds=result.seconds))

    def log_phases(self, errorlog: str) -> None:
        steps = parse_restore_steps(errorlog, self.database)
        zeroed = [z.seconds for z in steps.zeroed.values() if z.seconds is not None]
        if zeroed:
            self.outcome.phases.append(PhaseTiming(
                PhaseName.ZEROING, PhaseStatus.MEASURED, seconds=sum(zeroed),
                details={"files": {name: z.seconds for name, z in steps.zeroed.items()},
                         "source": "error log (trace flag 3004): Zeroing ... / Zeroing completed"}))
        else:
            self.outcome.phases.append(PhaseTiming.absent(
                PhaseName.ZEROING, "the error log shows no file zeroing (instant file initialization, or no trace)"))
        if steps.recovery_seconds is not None:
            self.outcome.phases.append(PhaseTiming(PhaseName.REDO, PhaseStatus.MEASURED,
                                                   seconds=(steps.redo_ms or 0) / 1000,
                                                   details={"source": "message 3421"}))
            self.outcome.phases.append(PhaseTiming(
                PhaseName.RECOVERY_END, PhaseStatus.MEASURED,
                seconds=((steps.analysis_ms or 0) + (steps.undo_ms or 0)) / 1000,
                details={"analysis_ms": steps.analysis_ms, "undo_ms": steps.undo_ms, "source": "message 3421"}))
        wait = steps.between("waiting_for_log_zero", "log_zero_complete")
        if wait is not None:
            self.outcome.phases.append(PhaseTiming(PhaseName.LOG_ZERO_WAIT, PhaseStatus.MEASURED, seconds=wait,
                                                   details={"source": "error log: Waiting for log zero"}))
