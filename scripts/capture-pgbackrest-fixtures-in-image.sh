#!/usr/bin/env bash
# Capture the pgBackRest fixtures of one project image (restoreproof/postgres:<major>): its suite's
# PostgreSQL and pgBackRest make a real repository and run verify, info and restore on damaged copies
# of it (scripts/capture-pgbackrest-verify-fixtures.sh, run as root inside a container of the image).
# The fixtures go to tests/fixtures/postgres/pgbackrest-<version>/ (the image's pgBackRest version).
#
#     scripts/capture-pgbackrest-fixtures-in-image.sh 13     # pgBackRest 2.33 (bullseye)
#
# The container has no network and is removed on exit; the files it writes are given to the caller.
set -euo pipefail

MAJOR=${1:?usage: $0 <postgres major>}
IMAGE=${IMAGE:-restoreproof/postgres:$MAJOR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(docker image inspect --format '{{ index .Config.Labels "restoreproof.pgbackrest-version" }}' "$IMAGE")
OUT=$ROOT/tests/fixtures/postgres/pgbackrest-$VERSION
NAME=rp-capture-$MAJOR-$$
mkdir -p "$OUT"
trap 'docker rm -f "$NAME" >/dev/null 2>&1 || true' EXIT
docker run --name "$NAME" --rm --network none --entrypoint bash \
    -v "$ROOT/scripts:/capture:ro" -v "$OUT:/out" "$IMAGE" \
    -c "/capture/capture-pgbackrest-verify-fixtures.sh /out; chown -R $(id -u):$(id -g) /out"
