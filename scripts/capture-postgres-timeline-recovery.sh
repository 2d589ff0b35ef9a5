#!/usr/bin/env bash
# Capture a real PostgreSQL 15 server log of a recovery whose WAL changes timeline in the middle:
# tests/fixtures/postgres/server-recovery-timeline-switch.log and .history (the history file the
# archive held, 00000002.history).
#
# A throwaway cluster (WAL archived by cp) gets a base backup (pg_basebackup -X none) and writes on
# timeline 1; a copy of the backup is then recovered and promoted (timeline 2, archiving into the
# same archive) and writes more. The backup is restored once more, the way restoreproof restores
# (recovery.signal, restore_command, the settings engine.py appends, recovery_target_timeline left
# at 'latest'): PostgreSQL follows timeline 1, then timeline 2 from the switch.
#
# Run as root (the clusters run as the postgres user):
#     scripts/capture-postgres-timeline-recovery.sh [output folder]
# Everything is made under one temporary folder; the servers are stopped and the folder removed on exit.
set -euo pipefail

OUT=${1:-$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures/postgres}
PGBIN=/usr/lib/postgresql/15/bin
PORT=${PORT:-55494}
WORK=$(mktemp -d /tmp/rp-timeline.XXXXXX)
chmod 755 "$WORK"
chown postgres:postgres "$WORK"

# shellcheck source=scripts/lib/restore-target.sh
source "$(dirname "$0")/lib/restore-target.sh"
as_pg() { runuser -u postgres -- "$@"; }
sql() { as_pg "$PGBIN/psql" -X -q -h "$WORK/$1-sock" -p "$PORT" -U postgres -d postgres -c "$2" >/dev/null; }

cleanup() {
    for data in "$WORK"/*-data; do
        if [ -f "$data/postmaster.pid" ]; then as_pg "$PGBIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null || true; fi
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

settings() {  # name: the settings of a server of that name (socket folder, archiving into the archive)
    as_pg mkdir -p "$WORK/$1-sock"
    as_pg tee -a "$WORK/$1-data/postgresql.auto.conf" >/dev/null <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK/$1-sock'
archive_mode = on
archive_command = 'test ! -f $WORK/archive/%f && cp %p $WORK/archive/%f'
restore_command = 'cp $WORK/archive/%f "%p"'
EOF
}
ready() {  # name: wait until the server accepts connections after recovery
    for _ in $(seq 1 600); do
        grep -q "ready to accept connections" "$WORK/$1.log" && return 0
        sleep 0.1
    done
    echo "$1 did not come online" >&2; exit 1
}
writes() {  # name: WAL on the current timeline, switched and archived
    sql "$1" "CREATE TABLE IF NOT EXISTS t AS SELECT 0 AS id; INSERT INTO t SELECT generate_series(1, 20000)"
    sql "$1" "SELECT pg_switch_wal()"
    sql "$1" "INSERT INTO t SELECT generate_series(1, 20000)"
    sql "$1" "SELECT pg_switch_wal()"
    sql "$1" "CHECKPOINT"
    sleep 2
}

as_pg mkdir -p "$WORK/archive"
as_pg "$PGBIN/initdb" -k -A trust -U postgres -D "$WORK/src-data" >/dev/null
settings src
as_pg "$PGBIN/pg_ctl" -D "$WORK/src-data" -l "$WORK/src.log" -w start >/dev/null
as_pg "$PGBIN/pg_basebackup" -X none --checkpoint=fast -h "$WORK/src-sock" -p "$PORT" -U postgres -D "$WORK/base"
writes src
as_pg "$PGBIN/pg_ctl" -D "$WORK/src-data" -m fast -w stop >/dev/null

# Timeline 2: the backup recovered to the end of timeline 1 and promoted, then written to.
as_pg cp -a "$WORK/base" "$WORK/tl2-data"
settings tl2
as_pg touch "$WORK/tl2-data/recovery.signal"
as_pg "$PGBIN/pg_ctl" -D "$WORK/tl2-data" -l "$WORK/tl2.log" start >/dev/null
ready tl2
writes tl2
as_pg "$PGBIN/pg_ctl" -D "$WORK/tl2-data" -m fast -w stop >/dev/null

# The backup restored as restoreproof restores it: it follows timeline 1, then 2.
as_pg cp -a "$WORK/base" "$WORK/final-data"
restore_target "$WORK/final-data" "$WORK/archive" "$WORK/final-sock" "$PORT"
as_pg "$PGBIN/pg_ctl" start -w -t 60 -D "$WORK/final-data" -l "$WORK/final.log" >/dev/null
ready final
cp "$WORK/final.log" "$OUT/server-recovery-timeline-switch.log"
as_pg "$PGBIN/pg_ctl" -D "$WORK/final-data" -m fast -w stop >/dev/null
cp "$WORK/archive/00000002.history" "$OUT/server-recovery-timeline-switch.history"
echo "archive:"; ls "$WORK/archive"
