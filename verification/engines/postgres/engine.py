"""The PostgreSQL + pgBackRest engine: plan from the repository, restore, recover, check.

Every command runs inside the target through `Target.run`, so the Docker and local-process
targets share this code. The order of a verification:

    pgbackrest restore --set=<label>        -> phase "transfer"
    server start, recovery, promotion       -> phases "server_start", "redo", "recovery_end"
                                               (read from the server log's own timestamps)
    data checks (Great Expectations, run by
    restoreproof's process over the socket)  -> phase "data_checks"
    pg_amcheck; clean stop; pg_checksums    -> phase "integrity_check"
    pgbackrest verify (whole repository;    -> phase "repository_verify"
      a staged copy: the planned chain)

Not strictly one after the other: `pgbackrest verify` reads only the repository, so it starts as
the transfer ends and runs alongside the rest of the restore (the server's recovery) and the
checks; the data checks and pg_amcheck (with --jobs, one per CPU of the target) both only read the
online server, so they run at the same time; the clean stop waits for both, and pg_checksums then
has the target to itself. Every phase is still timed from its own start to its own end, and names
the phases it ran alongside (`details["alongside"]`, see engines/alongside.py).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any, TypeVar

from pydantic import SecretStr

from verification.config import Settings
from verification.engines.alongside import Alongside, Spans
from verification.engines.base import (
    DataAccess,
    DataChecks,
    Evidence,
    RestoreOutcome,
    SourcePlan,
    UnreadableFile,
    data_checks_off,
    run_data_checks,
)
from verification.engines.postgres import chain as chain_rules
from verification.engines.postgres import segment_size, work
from verification.engines.postgres.amcheck_sql import (
    AMCHECK_SCRIPT_VARIABLE,
    PG_AMCHECK_SINCE,
    SCRIPT,
    amcheck_result,
    amcheck_sql_argv,
    heap_pages_said,
    options_not_applied,
    run_database,
)
from verification.engines.postgres.archive_end import archive_end, refuse_beyond
from verification.engines.postgres.cipher import CIPHER, WrongPassphraseError, missing_passphrase
from verification.engines.postgres.consistent_point import prove_consistent_point
from verification.engines.postgres.control import FILES_MARK, FLOORED_SETTINGS, configured_values, floors, with_options
from verification.engines.postgres.control import MARK as CONTROL_MARK
from verification.engines.postgres.databases import (
    LIST_SQL,
    Database,
    UnrecognisedCatalog,
    allow_sql,
    amcheck_relations,
    annotate,
    covered,
    data_coverage,
    opened,
    parse_catalog,
    to_open,
)
from verification.engines.postgres.direct import DirectTarget, direct_repository, is_direct
from verification.engines.postgres.footprint import backup_history, chain_files
from verification.engines.postgres.integrity import PG_AMCHECK_CHECKED, parse_pg_amcheck, parse_pg_checksums
from verification.engines.postgres.local_binaries import bin_dirs_for
from verification.engines.postgres.offline_proof import prove_offline
from verification.engines.postgres.pgbackrest_errors import (
    ERROR_LINE,
    FILE_MISSING,
    PATH_ERROR_CODES,
    blames_repository,
    is_transport,
    missing_files,
    named_paths,
    transport_cause,
)
from verification.engines.postgres.quiet_point import (
    achieved_detail,
    chosen_point,
    continued,
    explained,
    replay_gap,
    to_latest,
    why_not_to_end,
)
from verification.engines.postgres.recovery_proof import prove_recovery
from verification.engines.postgres.repository import (
    RepositoryFileError,
    Stanza,
    find_stanzas,
    read_stanza,
    stanza_names,
    system_identifier,
    unrecognised_files,
)
from verification.engines.postgres.serverlog import (
    CONFIG_ERRORS,
    NO_RECORD_AFTER_TARGET,
    RecoveryLog,
    parse_server_log,
)
from verification.engines.postgres.settings import (
    Forced,
    SettingsError,
    forced_settings,
    latest_recovery,
    pgbackrest_recovery,
    server_option_conflicts,
    settle,
)
from verification.engines.postgres.verify_output import (
    parse_pgbackrest_verify,
    scoped_to_staged_chain,
    tool_version,
    unknown_version,
    verify_options,
)
from verification.engines.postgres.versions import images_for, said_versions, written_by
from verification.engines.postgres.wal_end import prove_to_the_record
from verification.engines.postgres.wal_read import TargetWalReader
from verification.errors import ConfigError, EngineUnavailableError, SourceError, SourcePermissionError, TargetError
from verification.model import (
    Chain,
    ChainStatus,
    CheckName,
    CheckResult,
    CheckStatus,
    PhaseName,
    PhaseStatus,
    PhaseTiming,
    PhaseWork,
    Problem,
    RestorePlan,
    RuleCheck,
    UnreadableKind,
)
from verification.phase_events import phase as live_phase
from verification.restore_points import PointChoice, PointStrategy, choose
from verification.sources.base import Source, excluded
from verification.targets.base import ExecResult, Target, TargetProvider

# What pg_ctl -w -t N prints when its own wait ran out (the server may still be recovering).
PG_CTL_TIMEOUT = "server did not start in time"

# Polls until recovery has ended; exits 3 if the server died, 124 on timeout (via `timeout`). It runs
# while the server replays WAL beside it, so it costs little: the server is asked (a psql process)
# only once its log says it accepts connections, or once a second whatever the log says (a server
# logging in another language still ends the wait); whether it still runs is asked of its
# postmaster.pid with bash's own `read` and `kill -0`, no process started, and of its /proc status: a
# zombie answers `kill -0` (a dead server nobody reaped once its starter, pg_ctl, had exited).
WAIT_ONLINE = r"""
sock=$1; port=$2; user=$3; data=$4; log=$5; n=0
alive() {
  local pid key value
  read -r pid 2>/dev/null < "$data/postmaster.pid" && kill -0 "$pid" 2>/dev/null || return 1
  [ -r "/proc/$pid/status" ] || return 0
  while read -r key value; do
    [ "$key" = State: ] && { [ "${value:0:1}" != Z ]; return; }
  done 2>/dev/null < "/proc/$pid/status"
}
while :; do
  if [ $((n % 20)) -eq 0 ] || grep -q 'database system is ready to accept connections' "$log" 2>/dev/null; then
    refused=0; tried=0
    for db in ${MAINTENANCE_DATABASES:-template1 postgres}; do
      r=$(psql -X -A -t -q -h "$sock" -p "$port" -U "$user" -d "$db" -c 'select pg_is_in_recovery()' 2>&1)
      [ "$r" = f ] && { echo "$db"; exit 0; }
      tried=$((tried + 1))
      case "$r" in *"locale is incompatible with operating system"*) refused=$((refused + 1)); said=$r;; esac
    done
    [ "$refused" -gt 0 ] && [ "$refused" -eq "$tried" ] && { echo "$said" >&2; exit 4; }
  fi
  n=$((n + 1))
  alive || { sleep 0.2; alive || exit 3; }
  sleep 0.05
done
"""


# WAIT_ONLINE's exit when the server is up and every maintenance database refuses connections for a
# locale the target's C library does not know.
LOCALE_REFUSED = 4


def locale_refused(said: str) -> str:
    """Why the restored server could not be used: its databases' locale, in the server's words, and the fix."""
    words = " ".join(line.strip() for line in said.strip().splitlines() if line.strip())[-400:]
    return (f"the restored server recovered, but its databases ({', '.join(MAINTENANCE_DATABASES)}) refuse "
            f"connections: they were made under a locale the target image does not have ({words}); not a fault "
            "of the backups: give the target an image with that locale installed (docker.postgres_image)")


N = TypeVar("N", int, float)

# Where restoreproof's own sessions connect, the first that accepts them: a cluster may keep template1
# closed to connections (legal, if odd), and then the wait and the checks' set-up use postgres.
MAINTENANCE_DATABASES = ("template1", "postgres")


def pg_time(at: datetime) -> str:
    """A recovery target time as PostgreSQL parses it."""
    return at.strftime("%Y-%m-%d %H:%M:%S.%f+00")


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start) / timedelta(seconds=1))


def cipher_environment(plan: RestorePlan, passphrase: SecretStr | None) -> dict[str, str]:
    """What pgBackRest in the target reads the repository's key from: its environment (never a command
    line, where pgBackRest refuses it; never a file outside the target). Only for a repository the
    plan found encrypted: a plain one read with a cipher set would not open."""
    if plan.encryption is None:
        return {}
    if passphrase is None:  # planned by a process that had the passphrase, restored by one without it
        raise missing_passphrase(f"stanza {plan.database}")
    return {"PGBACKREST_REPO1_CIPHER_TYPE": plan.encryption,
            "PGBACKREST_REPO1_CIPHER_PASS": passphrase.get_secret_value()}


def disabled_check(name: str, setting: str) -> CheckResult:
    """A check the configuration turned off: shown as skipped, naming the setting, never left out."""
    return CheckResult(name, CheckStatus.SKIPPED, f"not run: disabled by the setting {setting}: false",
                       details={"disabled_by": setting}, required=False)


# How a live display names the steps of a restore that are timed as several phases.
RECOVERY_STEP, CHECKS_STEP = "server start and redo", "checks"
RECOVERY_PHASES = (PhaseName.SERVER_START, PhaseName.REDO, PhaseName.RECOVERY_END)


def unreadable_stanza(name: str, exc: RepositoryFileError) -> RestorePlan:
    """A stanza whose repository files cannot be read: reported as a broken chain naming the file."""
    problem = Problem(code="unreadable-repository-file", message=f"stanza {name} cannot be planned: {exc}",
                      files=(exc.path,))
    chain = Chain(ChainStatus.BROKEN, [], [problem], [RuleCheck("repository-readable", False, problem.message)])
    return RestorePlan("postgres", name, chain)


def segment_size_unknown(name: str, detail: str) -> RestorePlan:
    """A stanza whose WAL segment size neither the repository nor the setting tells: nothing is planned
    (every segment name depends on it), an error naming the setting to give, never "failed"."""
    problem = Problem(code=segment_size.UNKNOWN, message=f"stanza {name} cannot be planned: {detail}")
    chain = Chain(ChainStatus.REFUSED, [], [problem], [RuleCheck(segment_size.RULE, False, detail)])
    return RestorePlan("postgres", name, chain)


def no_docker_for_auto() -> str:
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    return (f"--target auto restores into Docker, and no Docker engine answers at {host} (DOCKER_HOST): start it "
            "or point DOCKER_HOST at one; to restore with this host's PostgreSQL binaries instead, ask for it: "
            "--target local (the setting target: local, or RESTOREPROOF_TARGET=local)")


DIRECT_NEEDS_DOCKER = ("s3.restore_mode direct restores into a Docker target only (pgBackRest in it reads S3 "
                       "through its one way out), not --target local: use --target docker or auto, or "
                       "s3.restore_mode stage")
PORT = 5432  # the restored server's; on a socket private to its target
# pg_amcheck's sessions leave out the server's notices: --install-missing runs CREATE EXTENSION IF
# NOT EXISTS, whose notice (amcheck already installed, as on many production databases) is no
# finding; warnings and errors (a page that fails verification) still come through.
AMCHECK_ENV = {"PGOPTIONS": "-c client_min_messages=warning"}
TOOL_VERSION_COMMANDS = [["pgbackrest", "version"], ["postgres", "--version"], ["pg_amcheck", "--version"]]


class PostgresEngine:
    name = "postgres"
    display_name = "pgBackRest (PostgreSQL)"
    probe_container_start = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pg = settings.postgres

    # -- targets -----------------------------------------------------------------------------------

    def target_provider(self, kind: str, plans: list[RestorePlan], source: Source | None = None) -> TargetProvider:
        from verification.targets.docker import DockerTargetProvider, docker_available
        from verification.targets.local import LocalTargetProvider

        repository = direct_repository(source, self.settings) if source is not None else None
        if repository is not None:
            # Direct mode: pgBackRest in a container reads the repository in S3 itself (check_settings
            # refused a local target before the run started; said again for a caller that did not ask).
            if kind == "local":
                raise ConfigError(DIRECT_NEEDS_DOCKER)
            from verification.engines.postgres.direct import DirectTargetProvider

            image, images, refused = self._images(plans)
            return DirectTargetProvider(self.settings, image, repository, images, refused)
        if kind == "auto":
            # Docker, never the host's binaries instead: a restore on the host is asked for by name.
            kind = "docker"
            if not docker_available():
                raise TargetError(no_docker_for_auto())
        if kind == "docker":
            image, images, refused = self._images(plans)
            return DockerTargetProvider(self.settings.docker, image, state_dir=self.settings.state_dir, images=images,
                                        refused=refused)
        return LocalTargetProvider(self.pg.bin_dir, self.settings.state_dir, *bin_dirs_for(self.pg, plans))

    def _images(self, plans: list[RestorePlan]) -> tuple[str, dict[str, str], dict[str, str]]:
        """The image each restored database needs (chosen from its backup, checked before any target
        starts), why a database has none (its own error: the others still restore), and the image for
        the rest: docker.postgres_image, only when something needs it."""
        from verification.images import ensure_image

        docker_settings = self.settings.docker
        images: dict[str, str] = {}
        refused: dict[str, str] = {}
        for plan in plans:
            try:
                images |= images_for(docker_settings, [plan])
            except EngineUnavailableError:
                raise
            except TargetError as exc:
                refused[plan.database] = str(exc)
        restored = [p.database for p in plans if p.chain.status is ChainStatus.COMPLETE]
        if images and all(database in images or database in refused for database in restored):
            return next(iter(images.values())), images, refused
        if restored and all(database in refused for database in restored):
            return docker_settings.postgres_image, images, refused  # no target will start: nothing to build
        return ensure_image(docker_settings.postgres_image, docker_settings.build_context), images, refused

    def check_target(self, kind: str) -> None:
        self.target_provider(kind, [])

    def check_settings(self, source: Source, target: str) -> None:
        """s3.restore_mode direct: a Docker target (its pgBackRest reads S3 itself), keys to give it, and
        an endpoint its certificate check can pass; all known before anything is recorded or started."""
        if target == "offline" or not is_direct(source):
            return
        if target == "local":
            raise ConfigError(DIRECT_NEEDS_DOCKER)
        try:
            direct_repository(source, self.settings)
        except TargetError as exc:  # the endpoint's name
            raise ConfigError(f"s3.restore_mode direct with the S3 endpoint of s3.endpoint_url (or "
                              f"AWS_ENDPOINT_URL): {exc}") from None

    def phase_work(self, plan: RestorePlan) -> list[PhaseWork]:
        return work.phase_work(plan, self.settings)

    def tool_versions(self, target: Target) -> dict[str, str]:
        """Each tool's own words on its version, asked in one command (each command in a container
        costs the engine a process start): per tool its exit status and output, NUL-separated."""
        script = 'for tool in "$@"; do out=$($tool 2>&1); printf "%s\\0%s\\0" "$?" "$out"; done'
        try:
            result = target.run(["bash", "-c", script, "versions", *(" ".join(argv) for argv in TOOL_VERSION_COMMANDS)],
                                timeout=60)
        except TargetError as exc:
            return {argv[0]: f"(not run: {exc})" for argv in TOOL_VERSION_COMMANDS}
        fields = result.stdout.split("\0")
        versions: dict[str, str] = {}
        for index, argv in enumerate(TOOL_VERSION_COMMANDS):
            said = fields[2 * index:2 * index + 2]
            if len(said) < 2 or not said[0].isdigit():
                versions[argv[0]] = f"(not run: exit {result.exit_code}, {result.output.strip()[-200:]!r})"
            else:
                versions[argv[0]] = said[1].strip() if said[0] == "0" else f"(exit {said[0]})"
        return versions

    def product_versions(self, tool_versions: dict[str, str]) -> dict[str, str]:
        return said_versions(tool_versions)

    # -- discovery and planning ------------------------------------------------------------------

    def detect(self, source: Source) -> bool:
        try:
            return bool(find_stanzas(source))
        except SourcePermissionError:
            raise  # cannot tell: saying "not pgBackRest's" would send the source to another engine
        except SourceError:
            return False

    def plan(self, source: Source, at: datetime | None, point: PointChoice | None = None) -> SourcePlan:
        find_stanzas(source)  # says precisely why the source is not a repository at all
        plans: list[RestorePlan] = []
        unreadable: list[UnreadableFile] = []
        patterns = self.settings.exclude
        ciphers: list[str | None] = []
        # Stanzas none of whose info files the passphrase opens, by their place among the plans.
        unopened: dict[int, tuple[str, WrongPassphraseError]] = {}
        warnings: list[str] = []
        for name in stanza_names(source):
            if pattern := excluded(f"backup/{name}/backup.info", patterns):
                unreadable.append(UnreadableFile(f"backup/{name}", UnreadableKind.EXCLUDED,
                                                 f"stanza {name} excluded by the pattern {pattern!r}", name))
                continue
            try:
                # A passphrase missing is not caught here: a ConfigError, it stops the run (a wrong one too,
                # unless another stanza's info files prove it right, below).
                stanza = read_stanza(source, name, self.pg.wal_segment_size, self.pg.repo_cipher_pass)
            except RepositoryFileError as exc:
                # The stanza is still reported, failed, with the file that stopped it.
                unreadable.append(UnreadableFile(exc.path, UnreadableKind.CORRUPT, str(exc), name))
                plans.append(unreadable_stanza(name, exc))
                continue
            except WrongPassphraseError as exc:
                unopened[len(plans)] = (name, exc)
                plans.append(unreadable_stanza(name, RepositoryFileError(f"backup/{name}", str(exc))))
                continue
            ciphers.append(stanza.cipher)
            plans.append(self._plan_stanza(source, stanza, at, point))
            if (said := self._segment_size_warning(stanza)) is not None:
                warnings.append(said)
            for path, why in unrecognised_files(source, stanza):
                kind = UnreadableKind.CORRUPT if path.startswith("archive/") else UnreadableKind.NOT_A_BACKUP
                if pattern := excluded(path, patterns):
                    kind, why = UnreadableKind.EXCLUDED, f"{why}; excluded by the pattern {pattern!r}"
                unreadable.append(UnreadableFile(path, kind, why, name))
        if unopened and CIPHER not in ciphers:
            raise next(iter(unopened.values()))[1]  # no stanza proves the passphrase: it is wrong
        for index, (name, wrong) in unopened.items():
            # One passphrase encrypts a whole repository, and another stanza's info files open with it:
            # this stanza's are damaged (or not this repository's), what is wrong with the backups.
            damaged = RepositoryFileError(wrong.files[0], (
                f"no info file of stanza {name} decrypts with the passphrase that opens the repository's other "
                f"stanzas ({', '.join(wrong.files)}): damaged, or not encrypted with this repository's passphrase"))
            unreadable += [UnreadableFile(path, UnreadableKind.CORRUPT, str(damaged), name) for path in wrong.files]
            plans[index] = unreadable_stanza(name, damaged)
        if self.pg.repo_cipher_pass is not None and ciphers and not any(ciphers):
            warnings.append(f"postgres.repo_cipher_pass is set, but the repository {source.describe()} is not "
                            "encrypted (its info files are plain text): the passphrase is not used")
        return SourcePlan(plans, unreadable, warnings)

    def _segment_size_warning(self, stanza: Stanza) -> str | None:
        """Said where it matters to whoever set postgres.wal_segment_size: ignored, or relied on."""
        said = [f"{_cluster(stanza, archive_id)}{found.detail}" for archive_id, found in stanza.segment_sizes.items()
                if found.setting_used or (found.setting_ignored and "wal_segment_size" in self.pg.model_fields_set)]
        return f"stanza {stanza.name}: WAL segment size {'; '.join(said)}" if said else None

    def _plan_stanza(self, source: Source, stanza: Stanza, at: datetime | None,
                     point: PointChoice | None) -> RestorePlan:
        when, rule = at, None
        if at is None and point is not None:
            when, rule = choose(point, stanza.name, [b for b in stanza.backups if not b.error])
        timeline = point.timeline if point is not None else None
        # The restored cluster's size: after a stanza upgrade, each cluster (archive id) has its own.
        cluster = stanza.cluster_of(chain_rules.choose_backup(stanza, when, timeline))
        found = stanza.segment_sizes.get(cluster) or segment_size.SegmentSize(
            self.pg.wal_segment_size, "from the setting postgres.wal_segment_size", setting_used=True)
        if found.bytes is None:
            return segment_size_unknown(stanza.name, _cluster(stanza, cluster) + found.detail)
        size_rule = RuleCheck(segment_size.RULE, True, _cluster(stanza, cluster) + found.detail)
        result = chain_rules.plan(source, stanza, when, found.bytes, timeline)
        result.chain.rules.insert(0, size_rule)
        # "older-full" asks for a full backup's own end: its consistent point, not a moment (a time needs
        # a transaction after it to stop at, which a quiet database never writes).
        backup = result.target_backup
        result.consistent_point = bool(point is not None and point.strategy is PointStrategy.OLDER_FULL and when
                                       and backup is not None and backup.finish == when)
        if rule is not None:
            result.chain.rules.insert(0, rule)
        if point is not None and when is not None and at is None and not result.consistent_point:
            # A moment restoreproof chose: a quiet archive after it may be proven as its end instead.
            result.chosen_point = chosen_point(stanza, result, point.strategy.value, found.bytes, point.timeline)
        result.files = chain_files(source, stanza, result, found.bytes)
        result.encryption = stanza.cipher
        result.history = backup_history(source, stanza)
        refuse_beyond(result, archive_end(source, stanza), datetime.now(UTC))
        result.system_id = system_identifier(stanza)
        result.written_by = written_by(stanza, backup)
        return result

    # -- restore and checks ----------------------------------------------------------------------

    def check_backup_files(self, plan: RestorePlan, source: Source, evidence: Evidence) -> list[CheckResult]:
        # pgBackRest's own `verify` reads the repository with the tools and settings of the target,
        # so it runs with the restore (check pgbackrest_verify), not here.
        return []

    def restore_and_check(self, plan: RestorePlan, target: Target, evidence: Evidence,
                          outcome: RestoreOutcome | None = None,
                          data_checks: DataChecks | None = None) -> RestoreOutcome:
        run = _Verification(self, plan, target, evidence, outcome or RestoreOutcome(), data_checks)
        return run.execute()


@dataclass
class _Run:
    """One start of the restored server: pg_ctl's answer, the wait's, and its log."""

    start: ExecResult
    waited: ExecResult | None
    asked: float  # when pg_ctl start was asked (this process's monotonic clock)
    wall: float  # seconds from then to online (or to giving up)
    log: RecoveryLog

    @property
    def online(self) -> bool:
        return self.waited is not None and self.waited.ok

    def at(self, when: datetime | None) -> float | None:
        """A time of the log on this process's clock: the server started as `pg_ctl start` was asked."""
        started = self.log.server_started
        return None if when is None or started is None else self.asked + (when - started) / timedelta(seconds=1)


def _cluster(stanza: Stanza, archive_id: str) -> str:
    """Which cluster a segment size is of, where the stanza has more than one (a stanza upgrade)."""
    return f"cluster {archive_id} (archive id): " if len(stanza.segment_sizes) > 1 else ""


def _total(parts: Iterable[N | None]) -> N | None:
    """The sum of parts all known, else None."""
    known = list(parts)
    if any(part is None for part in known):
        return None
    return sum(p for p in known if p is not None)


class _Verification:
    """One database's restore into one target; collects phases, checks and reasons as it goes."""

    def __init__(self, engine: PostgresEngine, plan: RestorePlan, target: Target, evidence: Evidence,
                 outcome: RestoreOutcome, data_checks: DataChecks | None = None) -> None:
        self.pg = engine.pg
        self.check_timeout = engine.settings.checks.timeout
        self.run_data_checks = data_checks
        self.plan = plan
        # The plan's (read from the repository); the setting only where the plan has no WAL to replay.
        wal = plan.chain.wal
        self.segment_size = wal.segment_bytes if wal is not None and wal.segment_bytes else self.pg.wal_segment_size
        self.target = target
        self.evidence = evidence
        self.outcome = outcome
        work = target.work_dir
        self.data = f"{work}/data"
        # The restored server listens only on a Unix socket in a folder of the target's own, so the
        # port cannot clash with any other server (a target holds one), and nothing reaches it over
        # TCP. Where the target has a folder this process sees too, the socket goes there: the data
        # checks reach the server through it, and the target still has no way out.
        self.socket_dir = target.exchange[0] if target.exchange else f"{work}/socket"
        self.log = f"{work}/server.log"
        self.tool_dir = f"{work}/pgbackrest"
        self.cipher_env = cipher_environment(plan, self.pg.repo_cipher_pass)
        self.docker_cpus = engine.settings.docker.cpus
        # When each phase ran, to say which ran alongside which.
        self.spans = Spans()
        # The database restoreproof's own sessions connect to (the wait finds the first that accepts them).
        self.maintenance_db = MAINTENANCE_DATABASES[0]
        # pg_database as the checks found it (open_databases), None until read or when unreadable.
        self.catalog: list[Database] | None = None
        # The restored data's major version and postgresql.auto.conf, as _configure read them.
        self.major: int | None = None
        self.auto_conf: str | None = None
        # The settings recovery needs at least, from the restored pg_control (control.py).
        self.floors: dict[str, str] = {}

    def pgbackrest(self, command: str, *options: str) -> list[str]:
        # Lock and log folders inside the target: the repository is mounted read-only (or is in S3).
        lock = [f"--lock-path={self.tool_dir}"] if command != "verify" else []  # verify takes no lock
        # Direct mode: pgBackRest reads the repository in S3 itself (the keys are in its environment).
        repository = (self.target.pgbackrest_options() if isinstance(self.target, DirectTarget)
                      else [f"--repo1-path={self.target.repo_path}"])
        return ["pgbackrest", f"--stanza={self.plan.database}", *repository,
                *lock, f"--log-path={self.tool_dir}", "--log-level-file=off", *options, command]

    def execute(self) -> RestoreOutcome:
        out = self.outcome
        out.phases.append(PhaseTiming(PhaseName.PROVISION, PhaseStatus.MEASURED, seconds=self.target.provision_seconds))
        out.phases.append(PhaseTiming.absent(PhaseName.ZEROING,
                                             "PostgreSQL restores files as they are; nothing is zeroed"))
        database = self.plan.database
        with live_phase(database, PhaseName.TRANSFER):
            restored = self.restore()
        # pgbackrest verify reads only the repository: it starts as the transfer ends, alongside the
        # server's recovery (one process, redo, leaves a CPU free) and the checks, and is waited for
        # at the end. Not alongside the transfer itself: pgBackRest's restore processes already keep
        # the target's CPUs busy (measured: the verify lengthened the transfer more than it saved).
        # Should a step below fail, it is waited for before the error goes up (its command has its own
        # time limit), so it writes no evidence after the verification's own is taken; on an interrupt
        # it is not: removing the target ends its command.
        verify = Alongside("repository-verify", self.repository_verify) if self.pg.repository_verify else None
        try:
            if restored:
                with live_phase(database, RECOVERY_STEP, covers=RECOVERY_PHASES):
                    log = self.start_and_recover()
                if out.online and log is not None:
                    with live_phase(database, CHECKS_STEP, covers=(PhaseName.DATA_CHECKS, PhaseName.INTEGRITY_CHECK)):
                        self.server_checks()
        except Exception:
            if verify is not None:
                verify.wait()
            raise
        for name in (PhaseName.SERVER_START, PhaseName.REDO, PhaseName.RECOVERY_END, PhaseName.DATA_CHECKS,
                     PhaseName.INTEGRITY_CHECK):
            if not any(p.name == name for p in out.phases):
                out.phases.append(PhaseTiming.not_reached(name, "an earlier step did not complete"))
        if verify is not None:
            check, phase = verify.result()
            self.spans.add(PhaseName.REPOSITORY_VERIFY, verify.started, verify.finished or verify.started)
            out.checks.append(check)
            out.phases.append(phase)
        else:
            out.checks.append(disabled_check("pgbackrest_verify", "postgres.repository_verify"))
        self.spans.mark(out.phases)
        return out

    def target_cpus(self) -> int:
        """The CPUs the target is given: the Docker limit (rounded up: a share of a CPU still runs a
        job), or this host's for a local target; never more than the host has."""
        host = os.cpu_count() or 1
        limit = self.docker_cpus if self.target.kind == "docker" else None
        return max(1, min(host, math.ceil(limit) if limit else host))

    # transfer ------------------------------------------------------------------------------------

    def restore(self) -> bool:
        backup = self.plan.target_backup
        assert backup is not None, "restore_and_check needs a plan with a backup"
        prepared = self.target.run(["mkdir", "-p", "-m", "700", self.data, self.tool_dir, self.socket_dir],
                                   timeout=60)
        if not prepared.ok:
            self.outcome.errors.append(f"cannot prepare {self.data} in the target: {prepared.output.strip()}")
            return False
        options = [f"--pg1-path={self.data}", f"--set={backup.label}", "--log-level-console=info",
                   "--archive-mode=off", "--job-retry=0", f"--process-max={self.pg.restore_process_max}",
                   f"--tablespace-map-all={self.target.work_dir}/tablespaces"]
        if self.plan.consistent_point and not self.offline:
            options += ["--type=immediate", "--target-action=promote"]
        elif self.plan.stop_at is not None and not self.offline:
            # (An offline backup is planned for a point only at its end, its server stopped since before
            # its start: its own state is that point, restored as it is.)
            options += ["--type=time", f"--target={pg_time(self.plan.stop_at)}", "--target-action=promote"]
        if self.plan.target_timeline is not None:
            # The history the plan chose (recovery_target_timeline), never PostgreSQL's default of the newest.
            options.append(f"--target-timeline={self.plan.target_timeline}")
        started, started_at = time.monotonic(), datetime.now(UTC)
        result = self.target.run(self.pgbackrest("restore", *options), timeout=self.pg.restore_timeout,
                                 env=self.cipher_env)
        seconds = time.monotonic() - started
        self.spans.add(PhaseName.TRANSFER, started, started + seconds)
        evidence = self.evidence.write("pgbackrest-restore.log", result.output)
        size = re.search(r"restore size = (\S+), file total = (\d+)", result.output)
        phase = PhaseTiming(PhaseName.TRANSFER, PhaseStatus.MEASURED, seconds=seconds, bytes=backup.size_bytes,
                            started_at=started_at, details={"repo_bytes": backup.repo_size_bytes, "evidence": evidence,
                                     "process_max": self.pg.restore_process_max,
                                     "files": int(size.group(2)) if size else None})
        if result.ok:
            self.outcome.phases.append(phase)
            return True
        phase.status = PhaseStatus.NOT_REACHED
        phase.details["why"] = f"pgbackrest restore exited {result.exit_code}"
        self.outcome.phases.append(phase)
        self._restore_failed(result)
        return False

    def _restore_failed(self, result: ExecResult) -> None:
        label = self.plan.target_backup.label if self.plan.target_backup else "?"
        if result.timed_out:
            self.outcome.errors.append(f"pgbackrest restore of {label} did not finish within "
                                       f"{self.pg.restore_timeout:.0f} s")
            return
        errors = [m for m in ERROR_LINE.finditer(result.output)]
        said = "; ".join(f"[{m['code']}] {m['message'].strip()}" for m in errors) or result.output.strip()[-400:]
        codes = {m["code"] for m in errors}
        direct = self.target.repository if isinstance(self.target, DirectTarget) else None
        where = direct.url if direct is not None else self.target.repo_path
        # The repository as pgBackRest names its paths: repo1-path (in S3, the key prefix under the bucket).
        repository = f"/{direct.prefix.strip('/')}" if direct is not None else self.target.repo_path
        if transport := [m for m in errors if is_transport(m["code"])]:
            # The way to the repository failed (an S3 request denied, an expired token, a wrong region, no
            # route): whatever else the output says, the backups were not shown to be at fault.
            causes = "; ".join(dict.fromkeys(transport_cause(m["code"], m["message"], result.output)
                                             for m in transport))
            self.outcome.errors.append(f"pgbackrest restore of backup {label} could not read the repository "
                                       f"{where}: {causes}")
        elif direct is not None and FILE_MISSING in codes:
            # Direct mode: the plan was made from a listing that held every file the restore reads, so
            # an object missing now was deleted since (expired, rewritten by a backup run): not a fault
            # the plan proved in the backups.
            gone = [direct.object_url(path) for path in missing_files(result.output)] or ["(not named)"]
            self.outcome.errors.append(f"pgbackrest restore of backup {label}: {', '.join(gone)} gone from S3 "
                                       f"since the plan listed it (deleted since): {said}")
        elif any(blames_repository(m["code"], m["message"], repository, self.target.work_dir) for m in errors):
            self.outcome.failures.append(f"pgbackrest restore of backup {label} failed: {said}")
        elif paths := [p for m in errors if m["code"] in PATH_ERROR_CODES for p in named_paths(m["message"])]:
            # A path outside the repository: the restore's destination in the target (not writable, a
            # quota, a read-only or full file system, a folder gone or not empty), not the backups.
            self.outcome.errors.append(f"pgbackrest restore of backup {label} stopped at "
                                       f"{', '.join(dict.fromkeys(paths))}, in the target outside the repository "
                                       f"{where} (exit {result.exit_code}): {said}")
        else:
            self.outcome.errors.append(f"pgbackrest restore of backup {label} could not run "
                                       f"(exit {result.exit_code}): {said}")

    # server start and recovery -------------------------------------------------------------------

    def server_settings(self, major: int, recovery: dict[str, str]) -> Forced:
        """What the restored server is started with, on its command line, outranking whatever the
        backup's files say (settings.py: which settings, and why): the target's plumbing, the safe
        values, and recovery as pgBackRest wrote it for the plan. Raises SettingsError where
        postgres.server_options would weaken one of them."""
        work = self.target.work_dir
        plumbing = {"port": str(PORT), "unix_socket_directories": self.socket_dir, "data_directory": self.data,
                    "hba_file": f"{work}/pg_hba.conf", "ident_file": f"{work}/pg_ident.conf",
                    # Inside the target (it cannot be unset once the backup names a path elsewhere).
                    "external_pid_file": f"{work}/external.pid"}
        needed, below = with_options(self.floors, self.pg.server_options)
        forced = forced_settings(major, plumbing, recovery, needed)
        if conflicts := below + server_option_conflicts(self.pg.server_options, forced):
            raise SettingsError("; ".join(conflicts))
        return forced

    def _configure(self) -> Forced | None:
        """The authentication files, then what the restored data says of itself: its major version
        (PG_VERSION) and the recovery settings pgBackRest restore wrote for the plan."""
        work = shlex.quote(self.target.work_dir)
        data = shlex.quote(self.data)
        # One command, not one per file. Debian-style clusters keep postgresql.conf outside the data
        # folder, so the backup may not contain one.
        script = (f"set -e; printf 'local all all trust\\n' > {work}/pg_hba.conf; : > {work}/pg_ident.conf; "
                  f"test -f {data}/postgresql.conf || : > {data}/postgresql.conf; "
                  f"cat {data}/PG_VERSION {data}/postgresql.auto.conf; "
                  f"printf '\\n%s\\n' {shlex.quote(CONTROL_MARK)}; pg_controldata {data} || true; "
                  f"printf '\\n%s\\n' {shlex.quote(FILES_MARK)}; "
                  f"for n in {' '.join(FLOORED_SETTINGS)}; do "
                  f'printf "%s=%s\\n" "$n" "$(postgres -D {data} -C "$n" 2>/dev/null)"; done')
        configured = self.target.run(["bash", "-c", script, "configure"], timeout=60)
        if not configured.ok:
            self.outcome.errors.append(f"cannot configure the restored server: {configured.output.strip()[-300:]}")
            return None
        said, _, control = configured.stdout.partition(f"\n{CONTROL_MARK}\n")
        control, _, files = control.partition(f"\n{FILES_MARK}\n")
        version, _, auto_conf = said.partition("\n")
        self.floors = floors(control, configured_values(files))
        if not version.strip().isdigit():
            self.outcome.errors.append(f"cannot configure the restored server: its PG_VERSION reads {version!r}")
            return None
        # Kept: a start refused for want of a transaction after the point may go on to the end with them.
        self.major, self.auto_conf = int(version), auto_conf
        try:
            # An offline backup is restored without recovery settings (pgBackRest's type none): nothing
            # to hold to the plan, recovery and archiving are all left inert.
            recovery = {} if self.offline else pgbackrest_recovery(auto_conf)
            return self.server_settings(int(version), recovery)
        except SettingsError as exc:
            self.outcome.errors.append(f"cannot configure the restored server: {exc}")
            return None

    def _settings_query(self, sql: str, env: dict[str, str]) -> tuple[bool, str]:
        result = self.target.run(["psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.socket_dir,
                                  "-p", str(PORT), "-U", self.pg.superuser, "-d", self.maintenance_db, "-c", sql],
                                 timeout=120, env=env)
        return result.ok, result.stdout if result.ok else result.output

    def start_and_recover(self) -> RecoveryLog | None:
        forced = self._configure()
        if forced is None:
            return None
        run = self._start(forced, self.log, "server.log")
        if run.online:
            self._settle(run, forced)
            self._recovery_phases([run])
            self._restore_point(run.log)
            self._prove(run.log)
            return run.log
        if self._no_transaction_after_target(run) and why_not_to_end(self.plan) is None:
            return self._continue_to_end(run)
        self._not_online(run)
        return None

    def _start(self, forced: Forced, log_path: str, evidence: str) -> _Run:
        """`pg_ctl start`, then the wait until recovery has ended (or the server died); its log read."""
        timeout = self.pg.recovery_timeout
        started = time.monotonic()
        start = self.target.run(["pg_ctl", "start", "-w", "-t", str(int(timeout)), "-D", self.data, "-l", log_path,
                                 "-o", forced.command_line(self.pg.server_options)],
                                timeout=timeout + 30, env=self.cipher_env)
        waited = None
        if start.ok:
            # Its sessions give the forced settings as client options: what the catalog sets per database
            # and role (a library to preload, say) cannot keep the wait from connecting.
            waited = self.target.run(["bash", "-c", WAIT_ONLINE, "wait", self.socket_dir,
                                      str(PORT), self.pg.superuser, self.data, log_path],
                                     timeout=max(30.0, timeout - (time.monotonic() - started)),
                                     env={"PGOPTIONS": forced.client_options(),
                                          "MAINTENANCE_DATABASES": " ".join(MAINTENANCE_DATABASES)})
        wall = time.monotonic() - started
        log_text = self._read_log(log_path)
        self.evidence.write(evidence, log_text)
        return _Run(start, waited, started, wall, parse_server_log(log_text))

    def _settle(self, run: _Run, forced: Forced) -> None:
        """The server is online: before any check connects, the catalog's per-database and per-role
        settings reset, every forced value read back from the server; the backup's values it overrode
        reported."""
        assert run.waited is not None
        self.outcome.online = True
        said = run.waited.stdout.strip().splitlines()
        self.maintenance_db = said[-1] if said and said[-1] in MAINTENANCE_DATABASES else MAINTENANCE_DATABASES[0]
        settled = settle(self._settings_query, forced, self.data)
        self.evidence.write("server-settings.txt", settled.said)
        self.outcome.overridden_settings += settled.overridden
        self.outcome.errors += settled.errors

    def _wal_reader(self) -> TargetWalReader:
        return TargetWalReader(self.target, lambda: self.pgbackrest("archive-get", f"--pg1-path={self.data}"),
                               self.data, f"{self.target.work_dir}/wal-end", self.cipher_env,
                               self.pg.check_timeout, self.evidence)

    def _prove(self, log: RecoveryLog) -> None:
        if self.offline:
            proof = prove_offline(log, self.plan)
        elif self.plan.consistent_point:
            # Its record is the backup's end (backup-lsn-stop), named by the server itself.
            proof = prove_recovery(log, self.plan, self.segment_size)
            point = prove_consistent_point(log, self.plan)
            proof.proofs, proof.failures, proof.errors = (proof.proofs + point.proofs, proof.failures
                                                          + point.failures, proof.errors + point.errors)
        else:
            proof = prove_recovery(log, self.plan, self.segment_size)
            # To the record: the WAL the archive holds, read in the target, says where redo had to end.
            proof = prove_to_the_record(proof, log, self.plan, self.segment_size, self._wal_reader())
        self.outcome.proofs += proof.proofs
        self.outcome.failures += proof.failures
        self.outcome.errors += proof.errors

    def _no_transaction_after_target(self, run: _Run) -> bool:
        """The server refused the point for want of a transaction after it, and for nothing else."""
        log = run.log
        return (not self._out_of_time(run) and not (log.backup_faults or log.early_end or log.archive_get_errors)
                and any(NO_RECORD_AFTER_TARGET in line for line in log.errors))

    def _out_of_time(self, run: _Run) -> bool:
        return (run.waited is not None and run.waited.timed_out) or run.start.timed_out or \
            PG_CTL_TIMEOUT in run.start.output

    def _continue_to_end(self, first: _Run) -> RecoveryLog | None:
        """The archive holds no transaction after the point restoreproof chose (the server said so): its
        state there is the archive's end. Recovery goes on to it on the same restored data, started again
        with the recovery pgBackRest writes for latest (no target), and is proven as latest is."""
        assert self.auto_conf is not None and self.major is not None
        context = f"{explained(self.plan)}; but "
        try:
            auto_conf = latest_recovery(self.auto_conf)
            forced = self.server_settings(self.major, pgbackrest_recovery(auto_conf))
        except SettingsError as exc:
            self.outcome.errors.append(f"{context}it cannot be configured: {exc}")
            return None
        # The first start left recovery unfinished: recovery.signal is still there, and the data folder
        # resumes from its last restartpoint.
        signal = self.target.run(["test", "-f", f"{self.data}/recovery.signal"], timeout=60)
        if not signal.ok:
            self.outcome.errors.append(f"{context}the data folder has no recovery.signal after the first start "
                                       f"(exit {signal.exit_code}): it would not recover from the archive")
            return None
        self.target.write_text(f"{self.data}/postgresql.auto.conf", auto_conf)
        second = self._start(forced, f"{self.target.work_dir}/server-to-end.log", "server-to-end.log")
        if not second.online:
            self._not_online(second, context=f"{context}continuing recovery to the archive's end: ")
            return None
        self._settle(second, forced)
        self._recovery_phases([first, second])
        self._restore_point_at_end(first.log, second.log)
        latest = to_latest(self.plan)
        log = continued(first.log, second.log)
        size = self.segment_size
        proof = prove_recovery(log, latest, size)
        if gap := replay_gap(first.log, second.log):
            proof.errors.append(gap)
        proof = prove_to_the_record(proof, log, latest, size, self._wal_reader())
        if proof.proofs:
            proof.proofs.insert(0, explained(self.plan))
        self.outcome.proofs += proof.proofs
        self.outcome.failures += proof.failures
        self.outcome.errors += proof.errors
        return second.log

    def _not_online(self, run: _Run, context: str = "") -> None:
        """Why the restored server did not come online: the backups' fault only where the server's own
        words name bad WAL or data."""
        log = run.log
        said = [*log.early_end, *log.archive_get_errors, *log.errors]
        if self._out_of_time(run):
            # Our own limit ran out: nothing says the backups are at fault.
            self.outcome.errors.append(f"{context}the restored server did not finish starting and recovering within "
                                       f"{self.pg.recovery_timeout:.0f} s (postgres.recovery_timeout)"
                                       + (f"; the server said: {'; '.join(said)}" if said else ""))
            return
        if run.waited is not None and run.waited.exit_code == LOCALE_REFUSED:
            self.outcome.errors.append(f"{context}{locale_refused(run.waited.output)}")
            return
        reasons = "; ".join(said) or (run.start.output.strip()[-400:] if not run.start.ok else "server stopped")
        if log.backup_faults or log.early_end or log.archive_get_errors:
            # The server's own words say the backups' WAL or data are missing or bad.
            self.outcome.failures.append(f"{context}the restored server did not come online: {reasons}")
        elif any(NO_RECORD_AFTER_TARGET in line for line in log.errors):
            # Every planned segment was replayed and none held a transaction after the target.
            at = self.plan.stop_at.isoformat() if self.plan.stop_at else "the target"
            chosen = (f"; restoreproof chose this point, but cannot prove it as the archive's end: "
                      f"{why_not_to_end(self.plan)}" if self.plan.chosen_point is not None else "")
            self.outcome.errors.append(
                f"{context}the archive holds no transaction after {at}: PostgreSQL replayed all the WAL it could get "
                f"and stops at a time only on a transaction after it, so it refused the point ({reasons}); not a "
                "fault of the backups: verify latest, or a point with a later write (--point older-full "
                f"restores a backup's own consistent point){chosen}")
        elif any(CONFIG_ERROR in line for line in log.errors for CONFIG_ERROR in CONFIG_ERRORS):
            # The server refused its configuration (ours, or a setting the target image cannot
            # honour): restoreproof could not finish, the backup is not shown to be at fault.
            self.outcome.errors.append(f"{context}the restored server refused its configuration and did not start: "
                                       f"{reasons} (check postgres.server_options and the target image)")
        else:
            # Nothing recognised blames the backups (a missing library, the target's resources):
            # restoreproof could not finish, and says so in the server's words.
            self.outcome.errors.append(f"{context}the restored server did not come online, for a reason not shown "
                                       f"to be a fault of the backups: {reasons}")

    def _read_log(self, path: str) -> str:
        try:
            return self.target.read_text(path)
        except Exception as exc:  # the log is evidence; its absence must not hide the real failure
            return f"(server log unreadable: {exc})"

    def _recovery_phases(self, runs: list[_Run]) -> None:
        """Server start, redo and the end of recovery, from the server log's own times. Where recovery was
        started twice (to a point, then on to the archive's end), both starts count: server start holds
        both starts and the restart between them, redo both replays, so the phases add up to the time
        from the first start to the server online."""
        phases = self.outcome.phases
        for index, run in enumerate(runs):
            self._recovery_spans(run, last=index == len(runs) - 1)
        for before, after in pairwise(runs):
            # From the end of one start's redo to the next start: the refusal, the stop, the restart.
            if (first := before.at(before.log.redo_done)) is not None and \
                    (last := after.at(after.log.server_started)) is not None:
                self.spans.add(PhaseName.SERVER_START, first, last)
        first_run, last_run = runs[0], runs[-1]
        log = last_run.log
        wall = sum(run.wall for run in runs)
        starts = [seconds_between(run.log.server_started, run.log.redo_started or run.log.ready) for run in runs]
        restarts = [seconds_between(a.log.redo_done, b.log.server_started) for a, b in pairwise(runs)]
        redos = [seconds_between(run.log.redo_started, run.log.redo_done) for run in runs]
        start_details: dict[str, Any] = {"source": "server log: 'starting PostgreSQL' to 'redo starts at'",
                                         "wall_seconds_start_to_online": round(wall, 3)}
        redo_details: dict[str, Any] = {"reported_elapsed_seconds": _total(r.log.redo_elapsed_seconds for r in runs),
                                        "segments_restored": len(log.segments_restored) if len(runs) == 1 else
                                        len({s for r in runs for s in r.log.segments_restored}),
                                        "source": "server log: 'redo starts at' to 'redo done at'"}
        if len(runs) > 1:
            note = ("recovery started twice: to the point, which the server refused for want of a transaction "
                    "after it, then on to the archive's end on the same data; both starts are counted")
            start_details.update(note=note, starts_seconds=starts, restart_seconds=restarts,
                                 source="server log, each start: 'starting PostgreSQL' to 'redo starts at', and "
                                        "from the first's 'redo done at' to the second's 'starting PostgreSQL'")
            redo_details.update(note=note, redo_seconds=redos,
                                source="server log, each start: 'redo starts at' to 'redo done at'")
        phases.append(PhaseTiming(PhaseName.SERVER_START, PhaseStatus.MEASURED, seconds=_total([*starts, *restarts]),
                                  started_at=first_run.log.server_started, details=start_details))
        if log.redo_not_required and len(runs) == 1:
            phases.append(PhaseTiming(PhaseName.REDO, PhaseStatus.MEASURED, seconds=0.0, bytes=0,
                                      details={"why": "redo is not required"}))
        else:
            phases.append(PhaseTiming(PhaseName.REDO, PhaseStatus.MEASURED, seconds=_total(redos),
                                      bytes=_total(run.log.redo_bytes for run in runs),
                                      started_at=first_run.log.redo_started, details=redo_details))
        phases.append(PhaseTiming(PhaseName.RECOVERY_END, PhaseStatus.MEASURED,
                                  seconds=seconds_between(log.redo_done or log.redo_started or log.server_started,
                                                          log.ready),
                                  started_at=log.redo_done,
                                  details={"source": "server log: 'redo done at' to 'ready to accept connections'"}))

    def _recovery_spans(self, run: _Run, last: bool) -> None:
        """When one start's phases ran, on this process's clock (a start that did not end recovery has no
        end of recovery)."""
        log = run.log
        spans = [(PhaseName.SERVER_START, log.server_started, log.redo_started or log.ready),
                 (PhaseName.REDO, log.redo_started, log.redo_done)]
        if last:
            spans.append((PhaseName.RECOVERY_END, log.redo_done or log.redo_started or log.server_started, log.ready))
        for name, begin, end in spans:
            if (first := run.at(begin)) is not None and (until := run.at(end)) is not None:
                self.spans.add(name, first, until)

    @property
    def offline(self) -> bool:
        return self.plan.target_backup is not None and self.plan.target_backup.online is False

    def _restore_point(self, log: RecoveryLog) -> None:
        if self.offline and log.last_transaction is None:
            self.outcome.achieved = log.shut_down_at
            self.outcome.achieved_detail = "the clean shutdown the offline backup holds" if log.shut_down_at else None
            return
        self.outcome.achieved = log.achieved
        if self.plan.consistent_point and (backup := self.plan.target_backup) is not None:
            # The server names the point by LSN only; its time is pgBackRest's record of the backup's end.
            self.outcome.achieved = log.achieved or backup.finish
            self.outcome.achieved_detail = (f"backup {backup.label}'s consistent point ({backup.stop_lsn}); "
                                            + ("its time: the backup's end (backup-timestamp-stop)"
                                               if log.achieved is None else "its last transaction replayed"))
            return
        self.outcome.achieved_detail = log.stop_detail or (
            "last completed transaction replayed" if log.last_transaction else None)
        at = self.plan.stop_at
        if at is None:
            return
        if log.stopped_at is None and log.last_transaction is None:
            self.outcome.failures.append(f"recovery to {at.isoformat()} reported no transaction time")
        else:
            self._not_past(at, log.last_transaction)

    def _restore_point_at_end(self, first: RecoveryLog, second: RecoveryLog) -> None:
        """The point restoreproof chose, reached as the archive's end: the newest transaction either start
        replayed (none may follow the point), else the point itself."""
        at = self.plan.stop_at
        assert at is not None
        replayed = [t for t in (first.last_transaction, second.last_transaction) if t is not None]
        last = max(replayed, default=None)
        self._not_past(at, last)
        self.outcome.achieved = last or at
        self.outcome.achieved_detail = achieved_detail(self.plan, last)

    def _not_past(self, at: datetime, last: datetime | None) -> None:
        if last is not None and last > at:
            self.outcome.failures.append(
                f"recovery went past the target: last transaction {last.isoformat()} is after {at.isoformat()}")

    # checks --------------------------------------------------------------------------------------

    def _psql(self, database: str, query: str) -> ExecResult:
        return self.target.run(["psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1",
                                "-h", self.socket_dir, "-p", str(PORT),
                                "-U", self.pg.superuser, "-d", database, "-c", query],
                               timeout=self.pg.check_timeout)

    def open_databases(self) -> list[Database] | None:
        """Every row of pg_database, read before any check starts; each database that refuses
        connections is made to allow them (the target is a disposable copy), so that pg_amcheck and the
        data checks can look at it. None when the list could not be read (said in the errors)."""
        listed = self._psql(self.maintenance_db, LIST_SQL)
        self.evidence.write("pg_database.json", listed.output)
        if not listed.ok:
            self.outcome.errors.append(f"cannot list the restored server's databases: {_said(listed)}")
            return None
        try:
            databases = parse_catalog(listed.stdout)
        except UnrecognisedCatalog as exc:
            self.outcome.errors.append(f"cannot read the restored server's list of databases (pg_database): {exc}")
            return None
        for database in to_open(databases):
            allowed = self._psql(self.maintenance_db, allow_sql(database.name))
            databases[databases.index(database)] = opened(database, None if allowed.ok else _said(allowed))
        return databases

    def databases(self) -> list[str] | None:
        """The databases the data checks read (every one a connection reaches, templates left out: see
        databases.data_coverage), or None when pg_database could not be read (said already)."""
        if self.catalog is None:
            return None
        return list(data_coverage(self.catalog).checked)

    def data_access(self, databases: list[str]) -> DataAccess | None:
        if self.target.exchange is None:
            return None
        host_socket = self.target.exchange[1]
        user = self.pg.superuser
        # statement_timeout bounds every query of the checks inside the server itself.
        options = f"-c statement_timeout={int(self.check_timeout * 1000)}"

        def url(database: str) -> str:
            from sqlalchemy.engine import URL

            return URL.create("postgresql+psycopg", username=user, database=database,
                              query={"host": host_socket, "port": str(PORT), "options": options}
                              ).render_as_string(hide_password=False)

        # The main database is chosen among those the source's applications could connect to: one that
        # refused connections in the backup (and is checked now) does not make the choice ambiguous.
        shut = {d.name for d in self.catalog or [] if d.opened}
        usual = [name for name in databases if name not in shut]
        others = [name for name in usual if name != "postgres"]
        main = (self.plan.database if self.plan.database in databases
                else others[0] if len(others) == 1 else "postgres" if usual == ["postgres"] else None)
        backup = self.plan.target_backup
        return DataAccess(url, tuple(databases), main, self.outcome.achieved, backup.finish if backup else None)

    def data_checks(self, out: RestoreOutcome) -> None:
        """The data checks, into `out` (its own outcome while they run alongside pg_amcheck)."""
        started, started_at = time.monotonic(), datetime.now(UTC)
        if self.run_data_checks is None:
            out.phases.append(data_checks_off())
            return
        databases = self.databases()
        access = self.data_access(databases) if databases is not None else None
        if access is None or self.catalog is None:
            if databases is not None:
                out.errors.append("the data checks cannot reach the restored server: the target has no "
                                  "folder this process sees")
            out.phases.append(PhaseTiming.not_reached(PhaseName.DATA_CHECKS, "the server was not reachable"
                                                      if databases is not None else
                                                      "the restored server's databases could not be listed"))
            return
        coverage = data_coverage(self.catalog)
        run_data_checks(self.run_data_checks, access, self.evidence, out, started, databases=len(coverage.checked),
                        **coverage.details())
        # The checks that read every database say which they read, and which not and why.
        annotate(out.checks, (CheckName.DATA_BASELINE, CheckName.DATA_FRESHNESS), coverage)
        for phase in out.phases:
            if phase.name == PhaseName.DATA_CHECKS and phase.started_at is None:
                phase.started_at = started_at
        self.spans.add(PhaseName.DATA_CHECKS, started, time.monotonic())

    def server_checks(self) -> None:
        """The checks of the online server: the data checks (in this process) and pg_amcheck (in the
        target) at the same time, both only reading; then the clean stop, once both are done, and
        pg_checksums with nothing else running on the target."""
        # Before any check: every database listed, and opened to connections where it refused them.
        self.catalog = self.open_databases()
        data: Alongside[None] | None = None
        found = RestoreOutcome()
        if self.run_data_checks is not None:
            data = Alongside("data-checks", lambda: self.data_checks(found))
        else:
            self.data_checks(found)
        backup = self.plan.target_backup
        started, started_at = time.monotonic(), datetime.now(UTC)
        try:
            check, amcheck_details = self.amcheck()
        except Exception:
            if data is not None:
                data.wait()  # nothing of the data checks goes on (or writes evidence) after this step
            raise
        amchecked = time.monotonic()
        self.spans.add(PhaseName.INTEGRITY_CHECK, started, amchecked)
        # The amcheck finding is kept whatever the data checks met: a corruption it found still fails
        # the database when the data checks' thread raised.
        try:
            if data is not None:
                data.result()  # the server is stopped only once the data checks are done with it
        finally:
            # In the order a run one step after the other gives: the data checks first.
            self.outcome.checks += found.checks
            self.outcome.phases += found.phases
            self.outcome.errors += found.errors
            self.outcome.checks.append(check)
        stopping = time.monotonic()
        stop = self.target.run(["pg_ctl", "stop", "-m", "fast", "-w", "-D", self.data], timeout=600)
        stopped = time.monotonic()
        checksums_seconds = None
        result: CheckResult | None = None
        if not stop.ok:
            self.outcome.errors.append(f"the restored server did not stop cleanly: {stop.output.strip()[-300:]}")
        elif not self.pg.checksums_check:
            self.outcome.checks.append(disabled_check(CheckName.PG_CHECKSUMS, "postgres.checksums_check"))
        else:
            checksums = self.target.run(["pg_checksums", "--check", "-D", self.data], timeout=self.pg.check_timeout)
            checksums_seconds = time.monotonic() - stopped
            result = parse_pg_checksums(checksums.output, checksums.exit_code)
            result.evidence = self.evidence.write("pg_checksums.out", checksums.output)
            self.outcome.checks.append(result)
        heap_pages_said(check, result)
        finished = time.monotonic()
        self.spans.add(PhaseName.INTEGRITY_CHECK, stopping, finished)
        # Its own seconds: pg_amcheck, the stop and pg_checksums, not the wait for the data checks between.
        waited = stopping - amchecked
        self.outcome.phases.append(PhaseTiming(
            PhaseName.INTEGRITY_CHECK, PhaseStatus.MEASURED, seconds=(amchecked - started) + (finished - stopping),
            bytes=backup.size_bytes if backup else None, started_at=started_at,
            details={**amcheck_details, "stop_seconds": round(stopped - stopping, 3),
                     "pg_checksums_seconds": round(checksums_seconds, 3) if checksums_seconds is not None else None,
                     "waited_for_data_checks_seconds": round(waited, 3)}))

    def amcheck(self) -> tuple[CheckResult, dict[str, Any]]:
        """The restored major's own amcheck, and its seconds and jobs for the phase: the pg_amcheck
        program (PostgreSQL 14 and later), else the amcheck extension's SQL functions (amcheck_sql.py)."""
        started = time.monotonic()
        if self.major is not None and self.major < PG_AMCHECK_SINCE:
            check = self.amcheck_functions(self.major)
            return check, {"amcheck_functions_seconds": round(time.monotonic() - started, 3)}
        jobs = [] if _names_jobs(self.pg.amcheck_options) else [f"--jobs={self.target_cpus()}"]
        amcheck = self.target.run(["pg_amcheck", "-h", self.socket_dir, "-p", str(PORT),
                                   "-U", self.pg.superuser, "--all", "--install-missing", "--verbose", *jobs,
                                   *self.pg.amcheck_options], timeout=self.pg.check_timeout, env=AMCHECK_ENV)
        seconds = time.monotonic() - started
        check = parse_pg_amcheck(amcheck.output, amcheck.exit_code)
        # Passed only with every database of pg_database checked ("N of N databases").
        check = covered(check, self.catalog, amcheck_relations(amcheck.output), self.pg.amcheck_options)
        check.details |= {"postgres_major": self.major, "checked": PG_AMCHECK_CHECKED}
        check.evidence = self.evidence.write("pg_amcheck.out", amcheck.output)
        return check, {"pg_amcheck_seconds": round(seconds, 3), "pg_amcheck_jobs": self.target_cpus() if jobs else None}

    def amcheck_functions(self, major: int) -> CheckResult:
        """amcheck's btree checks over SQL in every database a connection reaches, one after the other
        (within the check's time), each database's outputs kept in the evidence."""
        deadline = time.monotonic() + self.pg.check_timeout
        reachable = [d.name for d in self.catalog or [] if d.unreachable is None]
        runs, said = [], []
        for database in reachable:
            result = self.target.run(amcheck_sql_argv(self.socket_dir, PORT, self.pg.superuser, database),
                                     timeout=max(1.0, deadline - time.monotonic()),
                                     env={AMCHECK_SCRIPT_VARIABLE: SCRIPT})
            runs.append(run_database(database, result.stdout, result.stderr, result.exit_code))
            said.append(f"== database {database}: exit {result.exit_code}\n{result.output}")
        check = amcheck_result(major, runs, self.catalog)
        check.evidence = self.evidence.write("amcheck.out", "\n".join(said))
        if ignored := options_not_applied(self.pg.amcheck_options):
            check.details["amcheck_options_not_applied"] = ignored
        return check

    def repository_verify(self) -> tuple[CheckResult, PhaseTiming]:
        """`pgbackrest verify`, its check and phase (run alongside the steps after the transfer: it
        reads only the repository)."""
        started, started_at = time.monotonic(), datetime.now(UTC)
        # Each pgBackRest version prints its own verify and takes its own options: the target's says which.
        version = self.target.run(["pgbackrest", "version"], timeout=60)
        options = verify_options(tool_version(version.output)) if version.ok else None
        if options is None:
            check = unknown_version(version.output, version.exit_code)
            check.evidence = self.evidence.write("pgbackrest-version.out", version.output)
            return check, PhaseTiming(PhaseName.REPOSITORY_VERIFY, PhaseStatus.MEASURED,
                                      seconds=time.monotonic() - started, started_at=started_at)
        result = self.target.run(self.pgbackrest("verify", "--log-level-console=info", *options),
                                 timeout=self.pg.check_timeout, env=self.cipher_env)
        check = parse_pgbackrest_verify(result.output, result.exit_code, self.plan.database)
        if self.outcome.staged_copy is not None:  # the target saw the planned chain, nothing else
            wal = self.plan.chain.wal
            check = scoped_to_staged_chain(check, [b.label for b in self.plan.chain.backups],
                                           (wal.first, wal.last) if wal is not None else None, self.outcome.staged_copy)
        check.evidence = self.evidence.write("pgbackrest-verify.out", result.output)
        return check, PhaseTiming(PhaseName.REPOSITORY_VERIFY, PhaseStatus.MEASURED,
                                  seconds=time.monotonic() - started, started_at=started_at)


def _said(result: ExecResult) -> str:
    """What a command that did not succeed said (its errors, else all it printed), or its exit status."""
    return (result.stderr.strip() or result.output.strip())[-300:] or f"exited {result.exit_code}"


def _names_jobs(options: list[str]) -> bool:
    """Whether postgres.amcheck_options already says how many connections pg_amcheck opens."""
    return any(option in ("-j", "--jobs") or option.startswith(("--jobs=", "-j")) for option in options)
