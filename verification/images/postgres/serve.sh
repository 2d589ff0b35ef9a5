#!/usr/bin/env bash
# Run this image as a PostgreSQL server (the team deployment's metadata and results database):
# a cluster is made on first start from POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DATABASES.
set -euo pipefail
data=${PGDATA:-/var/lib/restoreproof/server}
if [ ! -s "$data/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
  install -d -o postgres -g postgres -m 700 "$data"
  pwfile=$(mktemp); printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"; chown postgres "$pwfile"
  runuser -u postgres -- initdb -k -D "$data" -U "${POSTGRES_USER:-postgres}" --pwfile="$pwfile" -A scram-sha-256 >/dev/null
  rm -f "$pwfile"
  printf "listen_addresses = '*'\n" >> "$data/postgresql.conf"
  printf "host all all all scram-sha-256\n" >> "$data/pg_hba.conf"
fi
# The databases are made on every start if missing, so a failed first start heals on the next.
runuser -u postgres -- pg_ctl -D "$data" -w start -o "-c listen_addresses=''" >/dev/null
for db in ${POSTGRES_DATABASES:-}; do
  exists=$(PGPASSWORD="$POSTGRES_PASSWORD" runuser -u postgres --preserve-environment -- psql -X -A -t -q \
    -U "${POSTGRES_USER:-postgres}" -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$db'")
  [ "$exists" = 1 ] || PGPASSWORD="$POSTGRES_PASSWORD" runuser -u postgres --preserve-environment -- \
    psql -X -q -U "${POSTGRES_USER:-postgres}" -d postgres -c "CREATE DATABASE \"$db\"" >/dev/null
done
runuser -u postgres -- pg_ctl -D "$data" -w stop >/dev/null
exec runuser -u postgres -- postgres -D "$data"
