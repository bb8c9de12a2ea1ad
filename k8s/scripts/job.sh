#!/usr/bin/env bash
# Runs fugu commands in the cluster as Jobs made from the suspended CronJob templates of
# k8s/base/job-templates.yaml (same image, configuration, Secrets and security settings as the
# apps), then follows them:
#   k8s/scripts/job.sh cli <job-name> <fugu args...>   e.g. cli eval-100k eval --dataset llmrouter ...
#   k8s/scripts/job.sh es-coordinator <es-run-id>       the coordinator of an ES run (Job fugu-es-<run>)
#   k8s/scripts/job.sh grpo-coordinator <grpo-run-id>   the coordinator of a GRPO run (Job fugu-grpo-<run>)
# Environment: FUGU_NAMESPACE (default fugu), KUBECTL (default kubectl), FOLLOW=0 to return at once.
# Job names must be DNS labels (lowercase letters, digits, '-'); so must ES and GRPO run ids used here.
set -euo pipefail
ns="${FUGU_NAMESPACE:-fugu}"
kubectl="${KUBECTL:-kubectl}"
usage() { sed -n '2,9p' "$0" >&2; exit 2; }
# a JSON array of strings (backslashes, quotes and control characters escaped)
json_array() {
  local out='[' sep='' a
  for a in "$@"; do
    a=${a//\\/\\\\}
    a=${a//\"/\\\"}
    a=${a//$'\n'/\\n}
    a=${a//$'\t'/\\t}
    out+="$sep\"$a\""
    sep=','
  done
  printf '%s]' "$out"
}
[ $# -ge 2 ] || usage
kind=$1
shift
case "$kind" in
  cli)
    name=$1
    shift
    [ $# -ge 1 ] || usage
    template=fugu-cli
    # the container's args, each of ours as one argument (no shell: spaces and quotes survive)
    patch="[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/args\",\"value\":$(json_array node apps/cli/src/main.ts "$@")}]"
    settings=(patch --local -f - --type=json -p "$patch" -o yaml)
    ;;
  es-coordinator)
    run=$1
    name="fugu-es-$run"
    template=fugu-es-coordinator
    settings=(set env --local -f - "FUGU_ES_RUN=$run" -o yaml)
    ;;
  grpo-coordinator)
    run=$1
    name="fugu-grpo-$run"
    template=fugu-grpo-coordinator
    settings=(set env --local -f - "FUGU_GRPO_RUN=$run" -o yaml)
    ;;
  *) usage ;;
esac
if ! [[ "$name" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]]; then
  echo "job.sh: job name \"$name\" is not a DNS label (lowercase letters, digits, '-', at most 63)" >&2
  exit 2
fi

"$kubectl" -n "$ns" create job "$name" --from="cronjob/$template" --dry-run=client -o yaml \
  | "$kubectl" "${settings[@]}" \
  | "$kubectl" -n "$ns" create -f -
[ "${FOLLOW:-1}" = 1 ] || exit 0
# until its pod has started (image pull, scheduling; a short command may already be done)
for _ in $(seq 1 600); do
  phase="$("$kubectl" -n "$ns" get pods -l "job-name=$name" -o jsonpath='{.items[*].status.phase}' 2>/dev/null || true)"
  case "$phase" in *Running* | *Succeeded* | *Failed*) break ;; esac
  sleep 1
done
"$kubectl" -n "$ns" logs -f "job/$name" || true
# the Job's outcome, as an exit status
for _ in $(seq 1 60); do
  status="$("$kubectl" -n "$ns" get job "$name" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}')"
  case "$status" in
    *Complete*) echo "job.sh: job/$name completed" >&2; exit 0 ;;
    *Failed*) echo "job.sh: job/$name failed ($("$kubectl" -n "$ns" get job "$name" -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}'))" >&2; exit 1 ;;
  esac
  sleep 2
done
echo "job.sh: job/$name still running; follow it with: $kubectl -n $ns logs -f job/$name" >&2
