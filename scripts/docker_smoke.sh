#!/usr/bin/env bash
# Builds the CPU image and smoke-tests it as a user runs it, with no image registry: makes a
# Debian 12 (bookworm) base with debootstrap, imports it as crossreg-base:bookworm, builds
# the Dockerfile on it (BUILD_BASE and RUNTIME_BASE), starts a container, waits for the
# image's HEALTHCHECK to report healthy, sends one POST /v1/completions and checks for a
# 200 with text, then stops and removes the container. Prints each phase's time.
#
#   sudo scripts/docker_smoke.sh                  # everything (debootstrap needs root)
#   scripts/docker_smoke.sh --reuse-base          # keep an existing crossreg-base:bookworm
#   scripts/docker_smoke.sh --no-build --image registry.example.com/ml/crossreg:0.1.0
#   scripts/docker_smoke.sh -- --threads=2        # arguments after -- go to crossreg-server
#
# Needs: a running Docker daemon (docker info), debootstrap and root for the base (not with
# --reuse-base once the base exists, nor with --no-build), and python3 or curl for the
# request. Builds with whatever builder `docker build` uses: BuildKit through the default
# docker driver or the classic builder, which both find the imported base in the local image
# store (a buildx docker-container builder would not). The base is made under $TMPDIR
# (default /tmp: about 200 MB, on a file system mounted without noexec or nodev).
# The build compiles the whole project: about as long as scripts/setup.sh's build.
# Exits 0 when every check passed, 1 on the first failure (the container's log is printed),
# 2 on a usage error or a missing requirement.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/docker_smoke.sh [options] [-- crossreg-server arguments]

Builds the crossreg CPU image on a debootstrapped Debian 12 base and smoke-tests it:
HEALTHCHECK healthy, then one POST /v1/completions answered 200 with text.

Options:
  --image TAG           image to build and test (default crossreg:smoke)
  --base-tag TAG        local base image to make and build on (default crossreg-base:bookworm)
  --reuse-base          use --base-tag as it is when it exists already (no debootstrap)
  --no-build            test --image as it is: no base, no build
  --file PATH           Dockerfile to build (default the repository's Dockerfile)
  --build-arg NAME=VAL  passed to docker build (repeatable)
  --mirror URL          Debian mirror for debootstrap (default $DEBIAN_MIRROR or
                        http://deb.debian.org/debian)
  --health-timeout S    seconds to wait for "healthy" (default 600)
  --keep                leave the container running at the end (for inspection)
  -h, --help            this text

The base is made under $TMPDIR (default /tmp; about 200 MB, not noexec or nodev).
Phases, each timed: base (debootstrap + docker import), build, image checks (user 10001,
no DEBIAN_FRONTEND, no apt lists or caches), start, healthy, request, stop.
EOF
}

die() { echo "docker_smoke: $*" >&2; exit 2; }
log() { echo "[docker_smoke] $*"; }

REPO=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=crossreg:smoke
BASE_TAG=crossreg-base:bookworm
REUSE_BASE=0
NO_BUILD=0
DOCKERFILE=$REPO/Dockerfile
BUILD_ARGS=()
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
HEALTH_TIMEOUT=600
KEEP=0
SERVER_ARGS=()

while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --image) [ $# -ge 2 ] || die "--image needs a value"; IMAGE=$2; shift 2 ;;
    --base-tag) [ $# -ge 2 ] || die "--base-tag needs a value"; BASE_TAG=$2; shift 2 ;;
    --reuse-base) REUSE_BASE=1; shift ;;
    --no-build) NO_BUILD=1; shift ;;
    --file) [ $# -ge 2 ] || die "--file needs a value"; DOCKERFILE=$2; shift 2 ;;
    --build-arg) [ $# -ge 2 ] || die "--build-arg needs a value"; BUILD_ARGS+=(--build-arg "$2"); shift 2 ;;
    --mirror) [ $# -ge 2 ] || die "--mirror needs a value"; MIRROR=$2; shift 2 ;;
    --health-timeout) [ $# -ge 2 ] || die "--health-timeout needs a value"; HEALTH_TIMEOUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --) shift; SERVER_ARGS=("$@"); break ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[[ "$HEALTH_TIMEOUT" =~ ^[0-9]+$ ]] || die "--health-timeout wants whole seconds, not '$HEALTH_TIMEOUT'"
[ -f "$DOCKERFILE" ] || die "no Dockerfile at $DOCKERFILE"

# ---- requirements ----------------------------------------------------------------------
command -v docker >/dev/null 2>&1 ||
  die "docker (the CLI) is not installed: on Debian 12, apt-get install docker.io"
if ! docker_info_err=$(docker info 2>&1 >/dev/null); then
  die "the Docker daemon does not answer (docker info: $(echo "$docker_info_err" | tail -n 1));" \
      "start it (systemctl start docker, or dockerd &) or set DOCKER_HOST"
fi
if command -v python3 >/dev/null 2>&1; then
  CLIENT=python3
elif command -v curl >/dev/null 2>&1; then
  CLIENT=curl
else
  die "neither python3 nor curl is installed on this host: one is needed to send the request"
fi
MAKE_BASE=0
if [ $NO_BUILD = 0 ]; then
  if [ $REUSE_BASE = 0 ] || ! docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
    MAKE_BASE=1
    # /usr/sbin is not on every user's PATH (sudo's is).
    DEBOOTSTRAP=$(command -v debootstrap 2>/dev/null || true)
    [ -n "$DEBOOTSTRAP" ] || { [ -x /usr/sbin/debootstrap ] && DEBOOTSTRAP=/usr/sbin/debootstrap; } ||
      die "debootstrap is not installed (apt-get install debootstrap), or pass --reuse-base with an existing $BASE_TAG"
    [ "$(id -u)" -eq 0 ] ||
      die "debootstrap needs root: run with sudo, or pass --reuse-base with an existing $BASE_TAG"
  fi
elif ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  die "--no-build: there is no image $IMAGE (docker pull it or build it first)"
fi

# ---- timing and cleanup ----------------------------------------------------------------
PHASES=()
now() { date +%s.%N; }
phase_start=0
begin() { phase_start=$(now); log "$1 ..."; }
end() {
  local took
  took=$(awk -v a="$phase_start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  PHASES+=("$(printf '%-13s %8s s' "$1" "$took")")
  log "$1: ${took} s${2:+ ($2)}"
}
summary() {
  [ ${#PHASES[@]} -gt 0 ] || return 0
  echo "[docker_smoke] phase times:"
  printf '  %s\n' "${PHASES[@]}"
}

BASE_DIR=""
CONTAINER=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CONTAINER" ] && docker container inspect "$CONTAINER" >/dev/null 2>&1; then
    if [ $rc -ne 0 ]; then
      echo "[docker_smoke] the container's log (last 40 lines):" >&2
      docker logs --tail 40 "$CONTAINER" >&2 2>&1 || true
      docker inspect -f '{{json .State.Health}}' "$CONTAINER" >&2 2>/dev/null || true
    fi
    if [ $KEEP = 1 ]; then
      log "--keep: container $CONTAINER left running (docker rm -f $CONTAINER)"
    else
      docker rm -f "$CONTAINER" >/dev/null 2>&1 || true
    fi
  fi
  # Only the directory this run made (mktemp), never a path from outside.
  # --one-file-system: never into a /proc or /sys that a failed debootstrap left mounted.
  if [ -n "$BASE_DIR" ] && [ -d "$BASE_DIR" ]; then rm -rf --one-file-system "$BASE_DIR" || true; fi
  summary
  if [ $rc -eq 0 ]; then log "PASS"; else echo "[docker_smoke] FAIL (exit $rc)" >&2; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() { echo "[docker_smoke] FAIL: $*" >&2; exit 1; }

# ---- base: debootstrap -> docker import ------------------------------------------------
if [ $MAKE_BASE = 1 ]; then
  begin base
  BASE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/crossreg-base.XXXXXX")
  "$DEBOOTSTRAP" --variant=minbase bookworm "$BASE_DIR/root" "$MIRROR" >"$BASE_DIR/debootstrap.log" 2>&1 || {
    tail -n 20 "$BASE_DIR/debootstrap.log" >&2
    fail "debootstrap --variant=minbase bookworm $MIRROR (log above)"
  }
  # What debootstrap leaves behind and a registry's debian image does not ship.
  rm -rf "$BASE_DIR/root/var/lib/apt/lists/"* "$BASE_DIR/root/var/cache/apt/"*.bin \
         "$BASE_DIR/root/var/cache/apt/archives/"*.deb
  # The configuration debian:bookworm-slim has (docker import sets none).
  tar -C "$BASE_DIR/root" --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' - "$BASE_TAG" >/dev/null || fail "docker import of the debootstrapped tree"
  rm -rf --one-file-system "$BASE_DIR"; BASE_DIR=""
  end base "$BASE_TAG, $(docker image inspect -f '{{.Size}}' "$BASE_TAG" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
elif [ $NO_BUILD = 0 ]; then
  log "base: reusing $BASE_TAG"
fi

# ---- build ------------------------------------------------------------------------------
if [ $NO_BUILD = 0 ]; then
  begin build
  docker build -f "$DOCKERFILE" \
    --build-arg BUILD_BASE="$BASE_TAG" --build-arg RUNTIME_BASE="$BASE_TAG" \
    ${BUILD_ARGS[@]+"${BUILD_ARGS[@]}"} -t "$IMAGE" "$REPO" || fail "docker build"
  end build "$IMAGE, $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
fi

# ---- image checks -----------------------------------------------------------------------
begin image
user=$(docker image inspect -f '{{.Config.User}}' "$IMAGE")
[ "$user" = "10001:10001" ] || fail "the image runs as '$user', not 10001:10001"
healthcheck=$(docker image inspect -f '{{if .Config.Healthcheck}}{{json .Config.Healthcheck.Test}}{{end}}' "$IMAGE")
case "$healthcheck" in
  '["CMD",'*) ;;
  *) fail "the image has no exec-form HEALTHCHECK (Config.Healthcheck.Test: '${healthcheck:-none}')" ;;
esac
if docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$IMAGE" | grep -q '^DEBIAN_FRONTEND='; then
  fail "DEBIAN_FRONTEND is set in the image's environment"
fi
leftovers=$(docker run --rm --entrypoint bash "$IMAGE" -c \
  'ls -A /var/lib/apt/lists | grep -v -x -e lock -e partial; ls -A /var/cache/apt | grep -v -x archives; ls -A /var/cache/apt/archives | grep -v -x -e lock -e partial' || true)
[ -z "$leftovers" ] || fail "apt's lists or caches are left in the image: $(echo "$leftovers" | tr '\n' ' ')"
end image "user 10001:10001, HEALTHCHECK, no DEBIAN_FRONTEND, no apt lists or caches"

# ---- start ------------------------------------------------------------------------------
begin start
CONTAINER=crossreg-smoke-$$
# Host ports chosen by docker, on loopback only.
docker run -d --name "$CONTAINER" -p 127.0.0.1::8000 -p 127.0.0.1::9090 "$IMAGE" \
  ${SERVER_ARGS[@]+"${SERVER_ARGS[@]}"} >/dev/null || fail "docker run $IMAGE"
end start "$CONTAINER"

# ---- healthy ----------------------------------------------------------------------------
begin healthy
deadline=$(( $(date +%s) + HEALTH_TIMEOUT ))
while :; do
  state=$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' "$CONTAINER")
  case "$state" in
    "running healthy") break ;;
    "running unhealthy") fail "the HEALTHCHECK reports unhealthy" ;;
    "running none") fail "the container has no health status (no HEALTHCHECK in $IMAGE?)" ;;
    running*) ;;
    *) fail "the container is ${state%% *} (exit code $(docker inspect -f '{{.State.ExitCode}}' "$CONTAINER"))" ;;
  esac
  [ "$(date +%s)" -lt "$deadline" ] || fail "not healthy after ${HEALTH_TIMEOUT} s (state: $state)"
  sleep 1
done
end healthy

# ---- request ----------------------------------------------------------------------------
begin request
http_addr=$(docker port "$CONTAINER" 8000/tcp | head -n 1)
[ -n "$http_addr" ] || fail "docker port $CONTAINER 8000/tcp published nothing"
URL="http://$http_addr/v1/completions"
BODY='{"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}'
if [ "$CLIENT" = python3 ]; then
  text=$(python3 - "$URL" "$BODY" <<'EOF'
import json, sys, urllib.error, urllib.request
url, body = sys.argv[1], sys.argv[2].encode()
req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        status, reply = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    status, reply = e.code, e.read().decode(errors="replace")
if status != 200:
    sys.exit(f"HTTP {status}: {reply[:500]}")
text = json.loads(reply)["choices"][0]["text"]
if not text:
    sys.exit(f"200 with empty text: {reply[:500]}")
print(text)
EOF
  ) || fail "POST $URL"
else
  reply_file=$(mktemp)
  status=$(curl -sS -o "$reply_file" -w '%{http_code}' --max-time 60 \
    -H 'Content-Type: application/json' -d "$BODY" "$URL") || { rm -f "$reply_file"; fail "POST $URL (curl)"; }
  reply=$(cat "$reply_file"); rm -f "$reply_file"
  [ "$status" = 200 ] || fail "POST $URL: HTTP $status: ${reply:0:500}"
  # Without python3: the "text" field's JSON string (escapes left as they are), non-empty.
  text=$(printf '%s' "$reply" | sed -n 's/.*"text" *: *"\(\([^"\\]\|\\.\)*\)".*/\1/p' | head -n 1)
  [ -n "$text" ] || fail "POST $URL: 200 without text: ${reply:0:500}"
fi
end request "200, text: \"$(printf '%s' "$text" | tr '\n' ' ')\""

# ---- stop -------------------------------------------------------------------------------
if [ $KEEP = 0 ]; then
  begin stop
  # SIGTERM: the server drains, then exits; docker kills it after 30 s.
  docker stop -t 30 "$CONTAINER" >/dev/null
  code=$(docker inspect -f '{{.State.ExitCode}}' "$CONTAINER")
  docker rm "$CONTAINER" >/dev/null
  CONTAINER=""
  [ "$code" = 0 ] || fail "crossreg-server exited with $code on SIGTERM (0 expected)"
  end stop "exit code 0"
fi
