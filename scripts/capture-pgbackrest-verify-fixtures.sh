#!/usr/bin/env bash
# Capture real `pgbackrest verify` outputs: <output folder>/pgbackrest-verify-<fault>.out.
#
# A real repository is made with the PostgreSQL and pgBackRest installed here (a cluster with data
# checksums, stanza-create, a full, a differential and an incremental backup, WAL switched several
# times, then `pgbackrest check`). Each fault is made on a copy of that repository and `pgbackrest
# verify` is run on the copy exactly as restoreproof runs it (engine.py, repository_verify; the options
# a version lacks left out, as verify_output.VERIFY_OPTIONS says). A fixture is what the parser is
# given: stdout, then stderr (ExecResult.output). Each run's exit code is printed at the end (the tests
# note them). Beside them, from the same repository: `pgbackrest info --output=json`
# (pgbackrest-info.json), its backup.info, archive.info and WAL file names (archive-listing.txt), and
# `pgbackrest restore` run as restoreproof runs it on the damaged copies (pgbackrest-restore-<fault>.out).
#
# Run as root (the clusters and pgBackRest run as the postgres user), on Debian 12's PostgreSQL 15 and
# pgBackRest 2.45 for tests/fixtures/postgres, or inside a project image through
# scripts/capture-pgbackrest-fixtures-in-image.sh (any PostgreSQL major, its suite's pgBackRest):
#     scripts/capture-pgbackrest-verify-fixtures.sh [output folder]
# Everything is made under one temporary folder; the servers are stopped and the folder removed on exit.
set -euo pipefail

OUT=${1:-$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures/postgres}
# The newest major installed (the images have one).
PG=${PG:-$(ls /usr/lib/postgresql | sort -n | tail -1)}
PGBIN=/usr/lib/postgresql/$PG/bin
BR=$(pgbackrest version | sed -n 's/^pgBackRest //p')
# pgBackRest 2.33's verify has neither --output nor --verbose (src/build/config/config.yaml at release/2.33).
case "$BR" in
    2.33) VERIFY_OPTIONS=() ;;
    *) VERIFY_OPTIONS=(--output=text --verbose) ;;
esac
STANZA=demo1
PORT=${PORT:-55491}
OTHER_PORT=${OTHER_PORT:-55492}
WORK=$(mktemp -d /tmp/rp-verify.XXXXXX)
chmod 755 "$WORK"
chown postgres:postgres "$WORK"
mkdir -p "$OUT"
echo "PostgreSQL $PG, pgBackRest $BR -> $OUT"

as_pg() { runuser -u postgres -- "$@"; }

cleanup() {
    for data in "$WORK/main-data" "$WORK/other-data"; do
        if [ -f "$data/postmaster.pid" ]; then as_pg "$PGBIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null || true; fi
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

# A cluster with its own socket folder, port, pgBackRest configuration and repository; archiving on.
make_cluster() {  # name port
    local name=$1 port=$2
    as_pg mkdir -p "$WORK/$name-sock" "$WORK/$name-log" "$WORK/$name-lock"
    as_pg "$PGBIN/initdb" -k -A trust -U postgres -D "$WORK/$name-data" >/dev/null
    as_pg tee "$WORK/$name.conf" >/dev/null <<EOF
[global]
repo1-path=$WORK/$name-repo
repo1-retention-full=9
log-path=$WORK/$name-log
lock-path=$WORK/$name-lock
log-level-console=warn
start-fast=y

[$STANZA]
pg1-path=$WORK/$name-data
pg1-port=$port
pg1-socket-path=$WORK/$name-sock
EOF
    as_pg tee -a "$WORK/$name-data/postgresql.auto.conf" >/dev/null <<EOF
port = $port
listen_addresses = ''
unix_socket_directories = '$WORK/$name-sock'
archive_mode = on
archive_command = 'pgbackrest --config=$WORK/$name.conf --stanza=$STANZA archive-push %p'
EOF
    as_pg "$PGBIN/pg_ctl" -D "$WORK/$name-data" -l "$WORK/$name-pg.log" -w start >/dev/null
    as_pg pgbackrest --config="$WORK/$name.conf" --stanza="$STANZA" stanza-create
}
sql() { as_pg "$PGBIN/psql" -X -q -h "$WORK/$1-sock" -p "$2" -U postgres -d postgres -c "$3" >/dev/null; }
backup() { as_pg pgbackrest --config="$WORK/$1.conf" --stanza="$STANZA" --type="$2" backup; }

make_cluster main "$PORT"
as_pg "$PGBIN/pgbench" -q -i -s 4 -h "$WORK/main-sock" -p "$PORT" -U postgres postgres 2>/dev/null
backup main full
as_pg "$PGBIN/pgbench" -n -t 300 -h "$WORK/main-sock" -p "$PORT" -U postgres postgres >/dev/null
backup main diff
sql main "$PORT" "CREATE TABLE after_diff AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g"
backup main incr
for _ in 1 2 3; do
    sql main "$PORT" "INSERT INTO after_diff SELECT g, md5(g::text) FROM generate_series(1, 5000) g; SELECT pg_switch_wal()"
done
# check switches WAL once more and waits until it is archived: the archive is complete and quiet.
as_pg pgbackrest --config="$WORK/main.conf" --stanza="$STANZA" check
as_pg cp -a "$WORK/main-repo" "$WORK/base"

# A backup really interrupted: a full backup killed (with its local processes) once its manifest
# copy is written, leaving a newest backup folder that backup.info does not list.
before=$(ls "$WORK/main-repo/backup/$STANZA")
setsid runuser -u postgres -- pgbackrest --config="$WORK/main.conf" --stanza="$STANZA" --type=full backup &
BACKUP_PID=$!
new=""
for _ in $(seq 1 600); do
    new=$(ls "$WORK/main-repo/backup/$STANZA" | grep -vxF "$before" | grep -E '^2' || true)
    if [ -n "$new" ] && [ -f "$WORK/main-repo/backup/$STANZA/$new/backup.manifest.copy" ]; then break; fi
    sleep 0.1
done
sleep 1
kill -KILL -- "-$BACKUP_PID" || true
wait "$BACKUP_PID" 2>/dev/null || true
if [ -z "$new" ] || [ -e "$WORK/main-repo/backup/$STANZA/$new/backup.manifest" ]; then
    echo "the full backup was not interrupted in time" >&2; exit 1
fi
echo "backup-interrupted: $new killed"
as_pg cp -a "$WORK/main-repo" "$WORK/interrupted"
as_pg "$PGBIN/pg_ctl" -D "$WORK/main-data" -m fast -w stop >/dev/null

# Another cluster (another system id), same stanza name: its info files and a backup of it.
make_cluster other "$OTHER_PORT"
backup other full
as_pg "$PGBIN/pg_ctl" -D "$WORK/other-data" -m fast -w stop >/dev/null

B="backup/$STANZA"
A="archive/$STANZA/$PG-1"
labels=$(cd "$WORK/base/$B" && ls -d 2*)
FULL=$(echo "$labels" | grep -E 'F$')
DIFF=$(echo "$labels" | grep -E 'D$')
INCR=$(echo "$labels" | grep -E 'I$')
WALS=$(cd "$WORK/base/$A" && find . -name '0000000*.gz' | sed 's|^\./||' | sort)
if [ "$(echo "$WALS" | wc -l)" -lt 8 ]; then echo "too few WAL segments archived" >&2; exit 1; fi
MIDDLE_WAL=$(echo "$WALS" | sed -n 5p)
LATE_WAL=$(echo "$WALS" | sed -n 8p)

fault() {  # name: a fresh copy of the repository, $WORK/faults/<name>
    as_pg mkdir -p "$WORK/faults"
    as_pg cp -a "$WORK/base" "$WORK/faults/$1"
    echo "$WORK/faults/$1"
}
digit() {  # file, key: the first digit after the key's first occurrence changed, in place
    local offset byte
    offset=$(( $(grep -boF "$2" "$1" | head -n 1 | cut -d: -f1) + ${#2} ))
    byte=$(dd if="$1" bs=1 skip="$offset" count=1 status=none)
    if [ "$byte" = 9 ]; then byte=8; else byte=9; fi
    printf %s "$byte" | dd of="$1" bs=1 seek="$offset" conv=notrunc status=none
}
flip() {  # file: one byte in the middle xor 0xff (no Python in the images)
    local offset byte
    offset=$(( $(stat -c %s "$1") / 2 ))
    byte=$(od -An -tu1 -j "$offset" -N 1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $(( byte ^ 255 )))" | dd of="$1" bs=1 seek="$offset" conv=notrunc status=none
}

declare -A REPOS
REPOS[baseline]=$(fault baseline)

r=$(fault manifest-and-copy-removed); rm "$r/$B/$DIFF/backup.manifest" "$r/$B/$DIFF/backup.manifest.copy"
REPOS[manifest-and-copy-removed]=$r

r=$(fault manifest-copy-only); rm "$r/$B/$DIFF/backup.manifest"
REPOS[manifest-copy-only]=$r

# The incremental's folder holds nothing but its backup.manifest.copy.
r=$(fault backup-folder-copy-only)
find "$r/$B/$INCR" -mindepth 1 -maxdepth 1 ! -name backup.manifest.copy -exec rm -rf {} +
REPOS[backup-folder-copy-only]=$r

# The full backup's largest file (stored again by the differential) with one byte flipped.
r=$(fault backup-byte-flipped)
big=$(cd "$r/$B/$FULL" && find pg_data -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2)
flip "$r/$B/$FULL/$big"
echo "backup-byte-flipped: $FULL/$big"
REPOS[backup-byte-flipped]=$r

# A file of the full backup that the differential and incremental reference (not stored again).
r=$(fault backup-referenced-file-flipped)
shared=$(cd "$r/$B/$FULL" && find pg_data/base -type f -size +2k | sort | while read -r f; do
    if [ ! -e "$r/$B/$DIFF/$f" ] && [ ! -e "$r/$B/$INCR/$f" ]; then echo "$f"; break; fi; done)
flip "$r/$B/$FULL/$shared"
echo "backup-referenced-file-flipped: $FULL/$shared"
REPOS[backup-referenced-file-flipped]=$r

r=$(fault backup-file-missing); rm "$r/$B/$FULL/pg_data/global/pg_control.gz"
REPOS[backup-file-missing]=$r

r=$(fault wal-segment-truncated); truncate -s 2000 "$r/$A/$MIDDLE_WAL"
echo "wal-segment-truncated: $MIDDLE_WAL"
REPOS[wal-segment-truncated]=$r

r=$(fault wal-segment-deleted); rm "$r/$A/$MIDDLE_WAL"
echo "wal-segment-deleted: $MIDDLE_WAL"
REPOS[wal-segment-deleted]=$r

# A WAL file listed but gone when read (as if expired during verify): a dangling symbolic link.
r=$(fault wal-vanished); rm "$r/$A/$LATE_WAL"; ln -s "/nonexistent/$(basename "$LATE_WAL")" "$r/$A/$LATE_WAL"
echo "wal-vanished: $LATE_WAL"
REPOS[wal-vanished]=$r

# A second copy of one WAL segment under another checksum.
r=$(fault wal-duplicate)
seg=$(basename "$MIDDLE_WAL")
cp -p "$r/$A/$MIDDLE_WAL" "$r/$A/$(dirname "$MIDDLE_WAL")/${seg:0:24}-0000000000000000000000000000000000000000.gz"
REPOS[wal-duplicate]=$r

# An archive folder of another database id (15-2 for 15), and one of another version with the same id (14-1).
r=$(fault archive-id-not-in-history); as_pg mkdir "$r/archive/$STANZA/$PG-2"
REPOS[archive-id-not-in-history]=$r
r=$(fault archive-id-other-version); as_pg mkdir "$r/archive/$STANZA/$((PG - 1))-1"
REPOS[archive-id-other-version]=$r

r=$(fault backup-info-and-copy-removed); rm "$r/$B/backup.info" "$r/$B/backup.info.copy"
REPOS[backup-info-and-copy-removed]=$r

# backup.info, and the incremental's backup.manifest, each with one digit of a value changed (the file
# still parses; its checksum no longer matches); their copies intact: pgBackRest loads the copies.
r=$(fault backup-info-damaged); digit "$r/$B/backup.info" '"backup-info-size":'
REPOS[backup-info-damaged]=$r
r=$(fault manifest-damaged); digit "$r/$B/$INCR/backup.manifest" '"size":'
REPOS[manifest-damaged]=$r

# archive.info (and its copy) of another cluster: the two info files disagree.
r=$(fault history-mismatch); cp -p "$WORK/other-repo/archive/$STANZA/archive.info"* "$r/archive/$STANZA/"
REPOS[history-mismatch]=$r

# Another cluster's backup, newest in the folder, not in backup.info.
r=$(fault foreign-backup); cp -a "$WORK/other-repo/$B/"2*F "$r/$B/"
REPOS[foreign-backup]=$r

# Info files kept, every backup and WAL folder removed.
r=$(fault nothing-to-verify); rm -rf "$r/$B/"2* "$r/$B/latest" "$r/archive/$STANZA/$PG-1"
REPOS[nothing-to-verify]=$r

REPOS[backup-interrupted]=$WORK/interrupted

as_pg mkdir -p "$WORK/verify-log"
# What ExecResult.output gives the parser: stdout, then stderr from a line of its own.
keep() {  # fixture
    cat "$WORK/stdout" >"$1"
    if [ -s "$WORK/stderr" ]; then
        if [ -s "$WORK/stdout" ] && [ "$(tail -c 1 "$WORK/stdout" | od -An -tx1 | tr -d ' ')" != 0a ]; then echo >>"$1"; fi
        cat "$WORK/stderr" >>"$1"
    fi
}
EXTRA=()  # options added to the command line of the next capture
capture() {  # name repo [NAME=value...]: run verify as restoreproof does, write the fixture, print the exit code
    local name=$1 repo=$2; shift 2
    local rc=0
    env "$@" runuser -u postgres -- pgbackrest "--stanza=$STANZA" "--repo1-path=$repo" "--log-path=$WORK/verify-log" \
        --log-level-file=off "${EXTRA[@]}" --log-level-console=info "${VERIFY_OPTIONS[@]}" verify \
        >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
    keep "$OUT/pgbackrest-verify-$name.out"
    printf '%-32s exit %s\n' "$name" "$rc"
}

for name in $(printf '%s\n' "${!REPOS[@]}" | sort); do
    capture "$name" "${REPOS[$name]}"
done
# pgBackRest warns about its own configuration (on stderr), on the unchanged repository.
capture config-warning "${REPOS[baseline]}" PGBACKREST_NOT_AN_OPTION=1
# An option verify does not take: pgBackRest stops before reading anything.
EXTRA=(--type=full)
capture bad-option "${REPOS[baseline]}"

# What the repository says of itself: pgbackrest info, its info files and its WAL file names.
runuser -u postgres -- pgbackrest "--stanza=$STANZA" "--repo1-path=$WORK/base" "--log-path=$WORK/verify-log" \
    --log-level-file=off --output=json info >"$OUT/pgbackrest-info.json"
cp "$WORK/base/$B/backup.info" "$WORK/base/archive/$STANZA/archive.info" "$OUT/"
(cd "$WORK/base/$A" && find . -type f -name '0000000*' | sed 's|^.*/||' | sort) >"$OUT/archive-listing.txt"

# pgbackrest restore of the newest backup, as restoreproof runs it (engine.py, restore), on damaged copies.
restore() {  # name repo label
    local name=$1 repo=$2 label=$3 rc=0
    as_pg mkdir -p "$WORK/restore-$name/data" "$WORK/restore-$name/tablespaces"
    chmod 700 "$WORK/restore-$name/data"
    runuser -u postgres -- pgbackrest "--stanza=$STANZA" "--repo1-path=$repo" "--lock-path=$WORK/restore-$name" \
        "--log-path=$WORK/restore-$name" --log-level-file=off "--pg1-path=$WORK/restore-$name/data" "--set=$label" \
        --log-level-console=info --archive-mode=off --job-retry=0 --process-max=1 \
        "--tablespace-map-all=$WORK/restore-$name/tablespaces" --type=immediate --target-action=promote restore \
        >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
    keep "$OUT/pgbackrest-restore-$name.out"
    printf '%-32s exit %s\n' "restore $name" "$rc"
}
restore backup-byte-flipped "${REPOS[backup-byte-flipped]}" "$FULL"
restore backup-file-missing "${REPOS[backup-file-missing]}" "$FULL"
restore backup-referenced-file-flipped "${REPOS[backup-referenced-file-flipped]}" "$INCR"
