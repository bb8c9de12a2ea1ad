#!/usr/bin/env bash
# fugu quickstart, behind `npm run demo` and `npm test`:
#   bash infra/quickstart.sh demo [args...]   start the local services, then run the demo
#   bash infra/quickstart.sh test [args...]   typecheck, lint and run the tests (args go to vitest)
#   bash infra/quickstart.sh bench <name>      run test/bench/<name>.bench.ts on the tests' services
#   bash infra/quickstart.sh cluster [args...] the multi-host tests (test/cluster; root: network namespaces)
#   bash infra/quickstart.sh images [args...]  the image built and run as containers (test/images; a Docker daemon)
#   bash infra/quickstart.sh harnesses [args...] Codex CLI, Claude Code and OpenCode against a gateway (test/harness)
#   bash infra/quickstart.sh fugu <command>    the fugu CLI with Node 24
# Needs only Node and npm: Node 24 comes from the npm registry when the system Node is older,
# and Redis/Postgres are the project's own (127.0.0.1:6390 and :5440, data in FUGU_HOME,
# default .fugu/) unless the configured or test URLs answer.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=infra/node-env.sh
source infra/node-env.sh

say() { printf 'fugu: %s\n' "$*" >&2; }
redact() { sed -E 's#//([^:/@]*):[^@/]*@#//\1:***@#'; }

# npm ci only when node_modules is missing or older than package-lock.json. The reference is
# the newer of our stamp and npm's own node_modules/.package-lock.json, so an `npm install`
# done by hand counts as up to date.
ensure_deps() {
  local stamp=node_modules/.fugu-deps-stamp ref=""
  if [ -d node_modules ]; then
    for f in "$stamp" node_modules/.package-lock.json; do
      if [ -e "$f" ] && { [ -z "$ref" ] || [ "$f" -nt "$ref" ]; }; then ref=$f; fi
    done
  fi
  if [ -n "$ref" ] && ! [ package-lock.json -nt "$ref" ]; then return 0; fi
  say "installing npm dependencies (npm ci; a minute or two the first time)..."
  local log
  log="$(mktemp)"
  export ONNXRUNTIME_NODE_INSTALL=skip
  if ! npm ci --no-audit --no-fund --loglevel=error >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    say "npm ci failed (output above)"
    exit 1
  fi
  rm -f "$log"
  touch "$stamp"
  say "dependencies installed"
}

reachable() { node infra/services.ts reachable "$1" 2>/dev/null; }

# Starts the project's own service ($1: redis|postgres) and prints its URL.
own_service() {
  local out
  out="$(node infra/services.ts up --only "$1")" || exit 1
  printf '%s\n' "$out" | sed -n 's/^FUGU_[A-Z_]*_URL=//p'
}

# demo: use FUGU_REDIS_URL / FUGU_DATABASE_URL when they answer, else the project's own services.
run_demo() {
  if [ -n "${FUGU_REDIS_URL:-}" ] && reachable "$FUGU_REDIS_URL"; then
    say "using Redis at $(redact <<<"$FUGU_REDIS_URL")"
  else
    [ -n "${FUGU_REDIS_URL:-}" ] && say "FUGU_REDIS_URL ($(redact <<<"$FUGU_REDIS_URL")) does not answer; using the project's own Redis"
    FUGU_REDIS_URL="$(own_service redis)"
  fi
  if [ -n "${FUGU_DATABASE_URL:-}" ] && reachable "$FUGU_DATABASE_URL"; then
    say "using Postgres at $(redact <<<"$FUGU_DATABASE_URL")"
  else
    [ -n "${FUGU_DATABASE_URL:-}" ] && say "FUGU_DATABASE_URL ($(redact <<<"$FUGU_DATABASE_URL")) does not answer; using the project's own Postgres"
    FUGU_DATABASE_URL="$(own_service postgres)"
  fi
  export FUGU_REDIS_URL FUGU_DATABASE_URL
  exec node apps/cli/src/main.ts demo "$@"
}

# Services for tests and benchmarks: FUGU_TEST_*_URL when set; else the machine's Redis on 6379
# and Postgres database `test` on 5432 when they answer; else the project's own services.
select_test_services() {
  if [ -z "${FUGU_TEST_REDIS_URL:-}" ]; then
    if reachable redis://127.0.0.1:6379; then
      FUGU_TEST_REDIS_URL=redis://127.0.0.1:6379
    else
      FUGU_TEST_REDIS_URL="$(own_service redis)"
    fi
  fi
  if [ -z "${FUGU_TEST_DATABASE_URL:-}" ]; then
    if reachable postgres://postgres@127.0.0.1:5432/test; then
      FUGU_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test
    else
      FUGU_TEST_DATABASE_URL="$(own_service postgres)"
    fi
  fi
  export FUGU_TEST_REDIS_URL FUGU_TEST_DATABASE_URL
  say "using Redis $(redact <<<"$FUGU_TEST_REDIS_URL") and Postgres $(redact <<<"$FUGU_TEST_DATABASE_URL")"
}

run_bench() {
  local name="${1:?usage: quickstart.sh bench <name>}"
  shift
  select_test_services
  exec node "test/bench/$name.bench.ts" "$@"
}

run_tests() {
  select_test_services
  local failed=()
  say "typecheck (tsc)"
  npx tsc -p tsconfig.json || failed+=(typecheck)
  say "lint (eslint)"
  { npx nx show projects >/dev/null && npx eslint .; } || failed+=(lint)
  say "tests (vitest)"
  npx vitest run "$@" || failed+=(tests)
  if [ ${#failed[@]} -gt 0 ]; then
    say "FAILED: ${failed[*]}"
    exit 1
  fi
  say "all checks passed"
}

# test:cluster builds its own hosts (network namespaces) with their own Redis and Postgres.
run_cluster_tests() {
  if [ "$(id -u)" != 0 ]; then
    say "test:cluster builds network namespaces (ip netns) and must run as root"
    exit 1
  fi
  say "multi-host tests (vitest, test/cluster)"
  exec npx vitest run --config vitest.cluster.config.ts "$@"
}

# test:images builds the image and runs the stack as containers on a Docker daemon (DOCKER picks
# the client; FUGU_IMAGES_BUILDER=legacy|buildkit the builder, by default BuildKit where the client
# has it, else the legacy builder).
run_images_tests() {
  local docker="${DOCKER:-docker}"
  if ! command -v "$docker" >/dev/null 2>&1; then
    say "test:images needs Docker: no docker client ($docker); apt-get install docker.io, or set DOCKER"
    exit 1
  fi
  if ! "$docker" version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    say "test:images needs a Docker daemon: $docker version fails (start dockerd, or set DOCKER_HOST)"
    exit 1
  fi
  say "container tests (vitest, test/images)"
  exec npx vitest run --config vitest.images.config.ts "$@"
}

# test:harnesses: Codex CLI, Claude Code and OpenCode at their pinned versions against a gateway on
# the harness pool (test/harness); each harness is installed on first use from the npm registry into
# FUGU_HARNESS_CACHE (default ~/.cache/fugu/harnesses, outside the repository) and runs offline.
run_harness_tests() {
  select_test_services
  say "coding harnesses (vitest, test/harness; harness cache ${FUGU_HARNESS_CACHE:-$HOME/.cache/fugu/harnesses})"
  exec npx vitest run --config vitest.harness.config.ts "$@"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  demo) ensure_deps; run_demo "$@" ;;
  test) ensure_deps; run_tests "$@" ;;
  bench) ensure_deps; run_bench "$@" ;;
  cluster) ensure_deps; run_cluster_tests "$@" ;;
  images) ensure_deps; run_images_tests "$@" ;;
  harnesses) ensure_deps; run_harness_tests "$@" ;;
  fugu) ensure_deps; exec node apps/cli/src/main.ts "$@" ;;
  *) echo "usage: bash infra/quickstart.sh demo|test|cluster|images|harnesses|bench <name>|fugu <command> [args...]" >&2; exit 2 ;;
esac
