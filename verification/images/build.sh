#!/usr/bin/env bash
# Build the images restoreproof needs, locally, and only when their inputs changed.
#
#   build.sh            build every image but the on-demand ones (idempotent)
#   build.sh NAME...    build these images (e.g. airflow, for docker/compose.yaml)
#   build.sh --print    print the image tags it would produce
#   build.sh --up-to-date NAME   exit 0 when NAME's image was built from these inputs, else 1 saying why
#
# It lives in the package (verification/images/), so an installed restoreproof can build its images
# too; `restoreproof paths images` prints where. `make images` runs it from a checkout.
#
# 1. The Debian base. If BASE_IMAGE (default debian:bookworm-slim) is already present, or can be
#    pulled, it is used as is. Otherwise (no registry reachable) a minimal Debian 12 is made with
#    debootstrap from the Debian mirror apt already uses, and imported under the same tag.
# 2. Every <name>/Dockerfile of the images folder (this one, or RESTOREPROOF_DOCKER__BUILD_CONTEXT) is
#    built as restoreproof/<name>:<tag>, labelled with a hash of its inputs (the build folder plus
#    the base image id); an image whose label already carries that hash is not rebuilt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The checkout this script sits in (verification/images/ -> the repository), for the on-demand
# images that bundle the whole project; an installed package has none.
project=$(cd "$here/../.." && pwd)
# Your own Dockerfiles (a folder of <name>/Dockerfile, like this one) instead of the shipped ones;
# restoreproof's setting docker.build_context reads the same variable.
images=${RESTOREPROOF_DOCKER__BUILD_CONTEXT:-$here}
BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
SUITE=${DEBIAN_SUITE:-bookworm}
HASH_LABEL=restoreproof.inputs-hash

log() { printf '[images/build] %s\n' "$*" >&2; }

debian_mirror() {
  # The mirror apt on this machine already uses, so the build needs no other host.
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  local m
  m=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  [ -z "$m" ] && m=$(grep -hsE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

ensure_base() {
  if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "base $BASE_IMAGE present"; return
  fi
  if timeout 60 docker pull -q "$BASE_IMAGE" >/dev/null 2>&1; then
    log "base $BASE_IMAGE pulled"; return
  fi
  command -v debootstrap >/dev/null || { log "debootstrap is missing (apt-get install debootstrap)"; exit 2; }
  local mirror root start
  mirror=$(debian_mirror)
  root=$(mktemp -d /tmp/restoreproof-debootstrap.XXXXXX)
  # The rootfs folder is removed whatever happens, so a failed build leaves nothing behind.
  trap 'rm -rf "$root"' EXIT
  start=$(date +%s)
  log "no registry: making $BASE_IMAGE with debootstrap from $mirror"
  debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >/tmp/restoreproof-debootstrap.log 2>&1 || {
    log "debootstrap failed; see /tmp/restoreproof-debootstrap.log"; tail -n 20 /tmp/restoreproof-debootstrap.log >&2; exit 2; }
  # Like the official slim image: no apt caches or docs.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
  tar -C "$root" -c . | docker import \
      --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
      --message "debootstrap --variant=minbase $SUITE $mirror" - "$BASE_IMAGE" >/dev/null
  rm -rf "$root" /tmp/restoreproof-debootstrap.log; trap - EXIT
  log "base $BASE_IMAGE imported in $(( $(date +%s) - start )) s"
}

inputs_hash() {  # folder -> hash of its files, the base image id, and (on-demand images) the project files
  local dir=$1
  { docker image inspect --format '{{.Id}}' "$BASE_IMAGE"
    (cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    if [ -f "$dir/ON_DEMAND" ]; then
      (cd "$project" && find requirements.txt pyproject.toml README.md verification dags plugins -type f \
         -not -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    fi
  } | sha256sum | cut -c1-16
}

image_tag() { echo "restoreproof/$1:${2}"; }

project_context() {  # folder of an on-demand image -> a temporary build context with the project in it
  local dir=$1 context
  context=$(mktemp -d /tmp/restoreproof-build.XXXXXX)
  cp "$dir/Dockerfile" "$context/"
  (cd "$project" && cp -r requirements.txt pyproject.toml README.md verification dags plugins "$context/")
  find "$context" -name __pycache__ -prune -exec rm -rf {} +
  # CA certificates this host trusts locally (a TLS-inspecting proxy in front of PyPI, say) are
  # trusted by the build too; public CAs come with Debian's ca-certificates.
  mkdir -p "$context/extra-ca"
  cp /usr/local/share/ca-certificates/*.crt "$context/extra-ca/" 2>/dev/null || true
  echo "$context"
}

build_one() {
  local name=$1 dir=$images/$1 tag hash current context
  [ -f "$dir/Dockerfile" ] || { log "no image $name (no $images/$name/Dockerfile)"; exit 2; }
  # An installed package carries no requirements.txt or DAGs to bundle.
  if [ -f "$dir/ON_DEMAND" ] && [ ! -f "$project/pyproject.toml" ]; then
    log "image $name bundles the project: build it from a checkout (no pyproject.toml in $project)"; exit 2
  fi
  context=$dir
  tag=$(image_tag "$name" "$(cat "$dir/TAG" 2>/dev/null || echo latest)")
  hash=$(inputs_hash "$dir")
  current=$(docker image inspect --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" "$tag" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then
    log "$tag up to date ($hash)"; return
  fi
  local start; start=$(date +%s)
  log "building $tag ($hash)"
  local mirror; mirror=$(debian_mirror)
  if [ -f "$dir/ON_DEMAND" ]; then
    context=$(project_context "$dir")
    # Removed when the function returns, and when a failed build ends the script (set -e: no RETURN then).
    trap 'rm -rf "$context"' RETURN
    trap "rm -rf '$context'" EXIT
  fi
  docker build -q --label "$HASH_LABEL=$hash" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      --build-arg "DEBIAN_MIRROR=$mirror" -t "$tag" "$context" >/dev/null
  log "$tag built in $(( $(date +%s) - start )) s"
}

if [ "${1:-}" = "--print" ]; then
  for d in "$images"/*/Dockerfile; do n=$(basename "$(dirname "$d")"); image_tag "$n" "$(cat "$images/$n/TAG" 2>/dev/null || echo latest)"; done
  exit 0
fi

docker info >/dev/null 2>&1 || { log "no Docker engine reachable"; exit 2; }
if [ "${1:-}" = "--up-to-date" ]; then  # NAME: exit 0 when its image was built from these inputs, else 1 saying why
  name=${2:?--up-to-date needs an image name}
  tag=$(image_tag "$name" "$(cat "$images/$name/TAG" 2>/dev/null || echo latest)")
  hash=$(inputs_hash "$images/$name")
  current=$(docker image inspect --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" "$tag" 2>/dev/null || true)
  [ "$current" = "$hash" ] && exit 0
  echo "$tag was built from other inputs (${current:-no image}) than this checkout's ($hash)"; exit 1
fi
ensure_base
if [ $# -gt 0 ]; then
  for name in "$@"; do build_one "$name"; done
else
  # Images marked ON_DEMAND (the Airflow image: large, only for docker/compose.yaml) are built on request.
  for d in "$images"/*/Dockerfile; do
    name=$(basename "$(dirname "$d")")
    [ -f "$images/$name/ON_DEMAND" ] || build_one "$name"
  done
fi
