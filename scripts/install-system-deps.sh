#!/usr/bin/env bash
# Install the Debian packages restoreproof needs on the host, only those that are missing:
#   debootstrap          to make the Debian base image when no registry is reachable
#   postgresql-15        the local-process target and the tools' host copies
#   pgbackrest           the local-process target
#   chromium             the test that opens report.html headless and keeps a screenshot
#   prometheus-pushgateway  the test that pushes metrics to a real Pushgateway
#   redis-server         the Celery broker of the CeleryExecutor test and bench (started per run, on a free port)
#   docker-compose       the tests that validate and start docker/compose.yaml (unless `docker compose` exists)
# Docker itself is expected to be installed and running.
set -euo pipefail
need=()
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
[ -x /usr/lib/postgresql/15/bin/pg_amcheck ] || need+=(postgresql-15)
command -v pgbackrest >/dev/null 2>&1 || need+=(pgbackrest)
command -v runuser >/dev/null 2>&1 || need+=(util-linux)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/bin/prometheus-pushgateway ] || need+=(prometheus-pushgateway)
[ -x /usr/bin/redis-server ] || need+=(redis-server)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
if [ ${#need[@]} -eq 0 ]; then
  echo "[system] debootstrap, postgresql-15, pgbackrest, chromium, prometheus-pushgateway, redis-server, compose present"
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "[system] installing: ${need[*]}"
# postgresql-common must not create and start a default cluster on the host.
$sudo mkdir -p /etc/postgresql-common/createcluster.d
echo 'create_main_cluster = false' | $sudo tee /etc/postgresql-common/createcluster.d/restoreproof.conf >/dev/null
$sudo apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
# The package's own service (a redis-server on port 6379 for the whole host) is not wanted: restoreproof
# starts its own per run, on a free port in a folder of its own.
if [[ " ${need[*]} " == *" redis-server "* ]] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
fi
echo "[system] installed: ${need[*]}"
