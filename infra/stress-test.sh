#!/usr/bin/env bash
# `npm test` N times in a row (default 3) in a fresh clone of this repository's HEAD while
# another process keeps both cores busy (two `node -e 'for(;;){}'` busy loops): the check that
# no test depends on an idle machine. Prints one line per run; exits non-zero if any run failed.
#   bash infra/stress-test.sh [runs] [clone dir]
set -u
runs=${1:-3}
dir=${2:-$(mktemp -d)}
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=infra/node-env.sh
source "$repo/infra/node-env.sh"
git clone -q "$repo" "$dir/fugu" && cd "$dir/fugu" || exit 1
echo "stress: $(git log --oneline -1) in $dir/fugu"
node -e 'for(;;){}' & l1=$!
node -e 'for(;;){}' & l2=$!
trap 'kill $l1 $l2 2>/dev/null' EXIT
echo "stress: load = two busy loops (pids $l1 $l2)"
failed=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  env -u FUGU_REDIS_URL -u FUGU_DATABASE_URL ONNXRUNTIME_NODE_INSTALL=skip npm test >"$dir/run$i.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || failed=1
  echo "stress: run $i: exit $rc, $(grep -E '^tests: ' "$dir/run$i.log" | tail -1), $(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg) (log $dir/run$i.log)"
done
exit $failed
