# Sourced by the scripts that capture real PostgreSQL outputs: how restoreproof's PostgreSQL engine
# sets up a restored cluster (verification/engines/postgres/engine.py), so the captured logs are the
# ones restoreproof reads. The sourcing script defines as_pg (run as the postgres user).

# restore_target DATA ARCHIVE SOCKET PORT: recovery.signal, WAL restored from ARCHIVE by cp, and the
# settings the engine appends (a private socket folder, no TCP, no archiving, the log on stderr).
restore_target() {
    local data=$1 archive=$2 socket=$3 port=$4
    as_pg mkdir -p "$socket"
    as_pg touch "$data/recovery.signal"
    as_pg tee -a "$data/postgresql.auto.conf" >/dev/null <<EOF
restore_command = 'cp $archive/%f "%p"'

# Added by restoreproof for the disposable restore target
listen_addresses = ''
port = '$port'
unix_socket_directories = '$socket'
hot_standby = 'off'
archive_mode = 'off'
ssl = 'off'
logging_collector = 'off'
log_destination = 'stderr'
log_line_prefix = '%m [%p] '
log_timezone = 'UTC'
EOF
}
