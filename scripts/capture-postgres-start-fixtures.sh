#!/usr/bin/env bash
# Capture real PostgreSQL 15 outputs of a restored server that does not start, and of pg_amcheck
# that cannot connect: tests/fixtures/postgres/server-start-<case>.log and pg_amcheck-<case>.out.
#
# A throwaway cluster (data checksums, WAL archived by cp) gets a base backup taken with
# pg_basebackup -X none while pgbench writes, so the backup's WAL spans several segments. Each case
# restores a copy of that backup with recovery.signal and a restore_command reading a copy of the
# archive, the server settings restoreproof appends (engine.py, server_settings), and starts it with
# `pg_ctl start -w`, exactly the way restoreproof does:
#   server-start-checkpoint-missing.log   the segment holding the backup's checkpoint removed
#   server-start-backup-end-missing.log   the segment holding the backup's end removed
#   server-start-missing-library.log      shared_preload_libraries names a library the binaries lack
#                                         (a fault of the target, not of the backups)
# pg_amcheck is run as restoreproof runs it (engine.py, integrity_checks); a fixture is stdout then
# stderr (ExecResult.output), with the exit code printed at the end of this script's output:
#   pg_amcheck-no-server.out              a socket folder where no server listens
#   pg_amcheck-in-recovery.out            a server still in recovery with hot_standby off
#   pg_amcheck-no-role.out                a role that does not exist
#   pg_amcheck-bad-option.out             an option pg_amcheck does not know (postgres.amcheck_options)
#
# Run as root (the clusters run as the postgres user):
#     scripts/capture-postgres-start-fixtures.sh [output folder]
# Everything is made under one temporary folder; the servers are stopped and the folder removed on exit.
set -euo pipefail

OUT=${1:-$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures/postgres}
PGBIN=/usr/lib/postgresql/15/bin
PORT=${PORT:-55493}
WORK=$(mktemp -d /tmp/rp-start.XXXXXX)
chmod 755 "$WORK"
chown postgres:postgres "$WORK"

# shellcheck source=scripts/lib/restore-target.sh
source "$(dirname "$0")/lib/restore-target.sh"
as_pg() { runuser -u postgres -- "$@"; }

cleanup() {
    for data in "$WORK"/*-data; do
        if [ -f "$data/postmaster.pid" ]; then as_pg "$PGBIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null || true; fi
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

as_pg mkdir -p "$WORK/src-sock" "$WORK/archive" "$WORK/nosock"
as_pg "$PGBIN/initdb" -k -A trust -U postgres -D "$WORK/src-data" >/dev/null
as_pg tee -a "$WORK/src-data/postgresql.auto.conf" >/dev/null <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK/src-sock'
archive_mode = on
archive_command = 'cp %p $WORK/archive/%f'
EOF
as_pg "$PGBIN/pg_ctl" -D "$WORK/src-data" -l "$WORK/src.log" -w start >/dev/null
as_pg "$PGBIN/pgbench" -q -i -s 5 -h "$WORK/src-sock" -p "$PORT" -U postgres postgres 2>/dev/null
# Writes during the (rate-limited) copy move WAL past several segments before the backup ends.
as_pg "$PGBIN/pgbench" -n -T 20 -h "$WORK/src-sock" -p "$PORT" -U postgres postgres >/dev/null &
WRITER=$!
as_pg "$PGBIN/pg_basebackup" -X none --checkpoint=fast --max-rate=8M -h "$WORK/src-sock" -p "$PORT" \
    -U postgres -D "$WORK/base"
wait "$WRITER"
as_pg "$PGBIN/psql" -X -q -h "$WORK/src-sock" -p "$PORT" -U postgres -d postgres -c "SELECT pg_switch_wal()" >/dev/null
sleep 2
as_pg "$PGBIN/pg_ctl" -D "$WORK/src-data" -m fast -w stop >/dev/null

HISTORY=$(ls "$WORK/archive"/*.backup)
START_SEGMENT=$(sed -n 's/^START WAL LOCATION: .* (file \([0-9A-F]*\))$/\1/p' "$HISTORY")
STOP_SEGMENT=$(sed -n 's/^STOP WAL LOCATION: .* (file \([0-9A-F]*\))$/\1/p' "$HISTORY")
echo "backup WAL: $START_SEGMENT to $STOP_SEGMENT"
if [ "$START_SEGMENT" = "$STOP_SEGMENT" ]; then echo "the backup's WAL fits one segment" >&2; exit 1; fi

# A copy of the backup and of the archive, set to recover the way restoreproof sets it.
restored() {  # name -> data folder
    local name=$1
    as_pg cp -a "$WORK/base" "$WORK/$name-data"
    as_pg cp -a "$WORK/archive" "$WORK/$name-archive"
    restore_target "$WORK/$name-data" "$WORK/$name-archive" "$WORK/$name-sock" "$PORT"
    echo "$WORK/$name-data"
}
start() {  # name fixture: pg_ctl start as restoreproof runs it; the server log kept once recovery ends
    as_pg "$PGBIN/pg_ctl" start -w -t 60 -D "$WORK/$1-data" -l "$WORK/$1.log" && echo "$1: started" || echo "$1: pg_ctl exit $?"
    # pg_ctl may return while recovery still runs (hot standby off): wait until the server is
    # ready or has stopped, as restoreproof's WAIT_ONLINE does.
    for _ in $(seq 1 600); do
        grep -q "ready to accept connections" "$WORK/$1.log" && break
        as_pg "$PGBIN/pg_ctl" status -D "$WORK/$1-data" >/dev/null || break
        sleep 0.1
    done
    cp "$WORK/$1.log" "$OUT/$2"
}

restored checkpoint-missing >/dev/null
rm "$WORK/checkpoint-missing-archive/$START_SEGMENT"
start checkpoint-missing server-start-checkpoint-missing.log

restored backup-end-missing >/dev/null
rm "$WORK/backup-end-missing-archive/$STOP_SEGMENT"
start backup-end-missing server-start-backup-end-missing.log

data=$(restored missing-library)
echo "shared_preload_libraries = 'restoreproof_absent'" | as_pg tee -a "$data/postgresql.auto.conf" >/dev/null
start missing-library server-start-missing-library.log

amcheck() {  # fixture socket-folder [options]: stdout then stderr, exit code reported
    local fixture=$1 sock=$2
    shift 2
    local code=0
    # Found on PATH, as restoreproof runs it: getopt's complaints begin with the name it was run by.
    as_pg env PATH="$PGBIN:$PATH" pg_amcheck -h "$sock" -p "$PORT" -U postgres --all --install-missing --verbose "$@" \
        >"$WORK/amcheck.stdout" 2>"$WORK/amcheck.stderr" || code=$?
    cat "$WORK/amcheck.stdout" "$WORK/amcheck.stderr" >"$OUT/$fixture"
    echo "$fixture: exit $code"
}
amcheck pg_amcheck-no-server.out "$WORK/nosock"
amcheck pg_amcheck-bad-option.out "$WORK/nosock" --restoreproof-absent-option

# A server that stays in recovery (standby, nothing to replay yet) with hot standby off.
data=$(restored standby)
as_pg touch "$data/standby.signal"
as_pg "$PGBIN/pg_ctl" start -D "$data" -l "$WORK/standby.log" >/dev/null
for _ in $(seq 1 100); do
    grep -q "entering standby mode" "$WORK/standby.log" 2>/dev/null && break
    sleep 0.1
done
sleep 1
amcheck pg_amcheck-in-recovery.out "$WORK/standby-sock"
as_pg "$PGBIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null

# A server online (the whole backup recovered), asked as a role it does not have.
data=$(restored online)
start online server-start-online.log
rm "$OUT/server-start-online.log"
as_pg env PATH="$PGBIN:$PATH" pg_amcheck -h "$WORK/online-sock" -p "$PORT" -U restoreproof_absent --all --install-missing \
    --verbose >"$WORK/amcheck.stdout" 2>"$WORK/amcheck.stderr" && code=0 || code=$?
cat "$WORK/amcheck.stdout" "$WORK/amcheck.stderr" >"$OUT/pg_amcheck-no-role.out"
echo "pg_amcheck-no-role.out: exit $code"
as_pg "$PGBIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null
