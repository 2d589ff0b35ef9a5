"""When a Docker target's commands show its disk full, on the words real tools print."""

from __future__ import annotations

from verification.targets.base import ExecResult
from verification.targets.docker import ResourceWords

DF_FULL = "df /var/lib/restoreproof: 32 MiB used of 32 MiB, 0 bytes available"
# pgBackRest 2.45's worker on a full volume (storage/posix/write.c), as the disk-full fault test saw it.
PGBACKREST_FULL = ("P00  ERROR: [064]: raised from local-1 protocol: unable to write "
                   "'/var/lib/restoreproof/data/base/5/16384.pgbackrest.tmp'\n")
AMCHECK_CORRUPT = 'heap table "postgres.public.pgbench_accounts", block 3:\n    invalid line pointer\n'


def result(argv: list[str], code: int, output: str) -> ExecResult:
    return ExecResult(argv, code, output, "", 0.5)


def test_df_alone_with_every_command_succeeded_is_not_a_full_disk() -> None:
    # A data volume sized tight: the restore fits, leaving less than 1 MiB; nothing failed for it.
    words = ResourceWords()
    words.watch(result(["pgbackrest", "--stanza=demo1", "restore"], 0, "INFO: restore command end: completed\n"))
    words.watch(result(["pg_ctl", "start"], 0, "server started\n"))
    assert words.disk_full(DF_FULL) == []


def test_words_of_a_full_disk_in_what_failed_are_a_full_disk_even_before_df_says_so() -> None:
    words = ResourceWords()
    words.watch(result(["pgbackrest", "--stanza=demo1", "restore"], 64, PGBACKREST_FULL))
    assert words.disk_full(None) == [
        "pgbackrest --stanza=demo1: P00  ERROR: [064]: raised from local-1 protocol: unable to write "
        "'/var/lib/restoreproof/data/base/5/16384.pgbackrest.tmp'"]
    assert words.disk_full(DF_FULL)[0] == DF_FULL


def test_enospc_read_back_by_a_command_that_succeeded_counts() -> None:
    words = ResourceWords()
    words.watch(result(["cat", "/var/lib/restoreproof/server.log"], 0,
                       'PANIC: could not write to file "pg_wal/xlogtemp.61": No space left on device\n'))
    assert words.disk_full(None) == ['cat /var/lib/restoreproof/server.log: PANIC: could not write to file '
                                     '"pg_wal/xlogtemp.61": No space left on device']


def test_unable_to_write_in_a_command_that_succeeded_is_not_a_full_disk() -> None:
    words = ResourceWords()
    words.watch(result(["cat", "/var/lib/restoreproof/server.log"], 0, "LOG: unable to write statistics\n"))
    assert words.disk_full(None) == []


def test_a_command_that_failed_while_df_shows_the_disk_full_is_a_full_disk() -> None:
    words = ResourceWords()
    words.watch(result(["pg_amcheck", "-h"], 2, AMCHECK_CORRUPT))
    assert words.disk_full(DF_FULL) == [DF_FULL, "pg_amcheck -h exited 2"]
    # With room left, the same failure is what the check found, not the disk.
    assert words.disk_full(None) == []


def test_a_killed_command_is_kept_for_the_memory_reason() -> None:
    words = ResourceWords()
    words.watch(ExecResult(["pg_amcheck", "-h"], 137, "", "", 3.0, budget=600.0))
    assert words.killed == ["pg_amcheck -h was killed (exit 137) after 3.0 s"]
