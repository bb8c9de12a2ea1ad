#!/usr/bin/env bash
# Builds fugu's image (Dockerfile, or -f Dockerfile.cuda) on any builder machine, and prints its
# tag on stdout (the build's output goes to stderr):
#
#   bash infra/container/build-image.sh [-f Dockerfile] [-t fugu:dev] [--builder legacy|buildkit] [-- docker build args...]
#
# - NODE_IMAGE: $NODE_IMAGE when set; else node:24-bookworm-slim when the daemon has it or can pull
#   it; else the Debian-made base of infra/container/base-image.sh (built once, then reused).
# - The registry's CA: where npm reaches the registry only through a TLS-intercepting proxy (the
#   project's machines), the host names its CA bundle in NODE_EXTRA_CA_CERTS (or FUGU_BUILD_CA). The
#   Dockerfile's deps stage (npm ci) then runs on DEPS_IMAGE = NODE_IMAGE plus that bundle
#   (`docker create` + `docker cp` + `docker commit`, tag fugu-deps-ca:<hash>, local only, never
#   pushed); the runtime stage is FROM NODE_IMAGE and takes only /app/node_modules from the deps
#   stage, so the bundle is not in the image (test:images checks its files and history).
#   FUGU_BUILD_CA=none builds without it.
# - Network: --network host (FUGU_BUILD_NETWORK overrides, "default" for the daemon's bridge): npm
#   in the deps stage and apt-get in the runtime stage reach the registry and the apt mirror the way
#   this machine does.
# - Builder: --builder legacy (DOCKER_BUILDKIT=0) or buildkit (DOCKER_BUILDKIT=1; a Docker 23+
#   client needs its buildx plugin, Debian's 20.10 client has BuildKit built in); default: the
#   client's own default (DOCKER_BUILDKIT as set). DOCKER=<client> picks the docker binary.
# Exit status: 0 built; 1 with a message otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
docker="${DOCKER:-docker}"
say() { printf 'build-image: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

file=Dockerfile tag=fugu:dev builder=""
while [ $# -gt 0 ]; do
  case "$1" in
    -f) file="${2:?-f needs a Dockerfile}"; shift 2 ;;
    -t) tag="${2:?-t needs a tag}"; shift 2 ;;
    --builder) builder="${2:?--builder needs legacy or buildkit}"; shift 2 ;;
    --) shift; break ;;
    *) fail "unknown argument '$1' (usage: build-image.sh [-f Dockerfile] [-t tag] [--builder legacy|buildkit] [-- docker build args...])" ;;
  esac
done
[ -f "$file" ] || fail "no $file in $PWD"
case "$builder" in
  "") env=() ;;
  legacy) env=(DOCKER_BUILDKIT=0) ;;
  buildkit) env=(DOCKER_BUILDKIT=1) ;;
  *) fail "--builder must be legacy or buildkit, got '$builder'" ;;
esac
command -v "$docker" >/dev/null 2>&1 || fail "no docker client ($docker)"
"$docker" version --format '{{.Server.Version}}' >/dev/null 2>&1 || fail "no Docker daemon answers ($docker version fails; start dockerd, or set DOCKER_HOST)"

# ---- NODE_IMAGE ---------------------------------------------------------------------------------
official=node:24-bookworm-slim
node_image="${NODE_IMAGE:-}"
if [ -z "$node_image" ]; then
  if "$docker" image inspect "$official" >/dev/null 2>&1; then
    node_image=$official
  elif pull="$(timeout 120 "$docker" pull -q "$official" 2>&1)"; then
    node_image=$official
  else
    say "cannot pull $official ($(tail -1 <<<"$pull" | cut -c1-160)); using a base made from Debian packages (infra/container/base-image.sh)"
    node_image="$(bash infra/container/base-image.sh)" || fail "infra/container/base-image.sh failed (above)"
  fi
fi
"$docker" image inspect "$node_image" >/dev/null 2>&1 || fail "NODE_IMAGE $node_image is not on this daemon (docker pull it, or unset NODE_IMAGE)"
args=(--build-arg "NODE_IMAGE=$node_image")

# ---- the CA of the registry's proxy, for the deps stage only -------------------------------------
ca="${FUGU_BUILD_CA:-${NODE_EXTRA_CA_CERTS:-}}"
if [ -n "$ca" ] && [ "$ca" != none ]; then
  [ -r "$ca" ] || fail "the CA bundle $ca (FUGU_BUILD_CA / NODE_EXTRA_CA_CERTS) cannot be read"
  grep -q 'BEGIN CERTIFICATE' "$ca" || fail "$ca (FUGU_BUILD_CA / NODE_EXTRA_CA_CERTS) holds no PEM certificate"
  base_id="$("$docker" image inspect --format '{{.Id}}' "$node_image")"
  deps_image="fugu-deps-ca:$( { printf '%s\n' "$base_id"; cat "$ca"; } | sha256sum | cut -c1-12)"
  if ! "$docker" image inspect "$deps_image" >/dev/null 2>&1; then
    cid="$("$docker" create "$node_image" true)"
    if ! { "$docker" cp "$ca" "$cid:/usr/local/share/fugu-build-ca.pem" &&
      "$docker" commit --change 'ENV NODE_EXTRA_CA_CERTS=/usr/local/share/fugu-build-ca.pem' --change 'CMD ["node"]' "$cid" "$deps_image" >/dev/null; }; then
      "$docker" rm -f "$cid" >/dev/null 2>&1 || true
      fail "could not make $deps_image ($node_image + the CA bundle)"
    fi
    "$docker" rm -f "$cid" >/dev/null
    say "made $deps_image: $node_image + the CA bundle $ca (the deps stage only)"
  fi
  args+=(--build-arg "DEPS_IMAGE=$deps_image")
fi

network="${FUGU_BUILD_NETWORK:-host}"
[ "$network" = default ] || args+=(--network "$network")

say "docker build -f $file -t $tag ${args[*]} $*${builder:+ (builder: $builder)}"
start=$(date +%s.%N)
env "${env[@]}" "$docker" build -f "$file" -t "$tag" "${args[@]}" "$@" . >&2 || fail "docker build failed (above)"
size="$("$docker" image inspect --format '{{.Size}}' "$tag")"
say "built $tag in $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}') s, $((size / 1000000)) MB"
printf '%s\n' "$tag"
