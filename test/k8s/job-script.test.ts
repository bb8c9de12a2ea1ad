// k8s/scripts/job.sh makes Jobs from the CronJob templates: the CLI's arguments reach the
// container one by one (spaces and quotes intact, no shell in between), and an ES coordinator
// Job gets its run. kubectl's server calls are replaced by a stand-in (KUBECTL) that answers
// `create job --from=cronjob/...` with what the API server would (the template's Job) and
// records what `create -f -` receives; the local transforms are the real kubectl's.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { render, type Container, type K8sObject } from './policy.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'fugu-jobsh-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const objects = render(path.join(root, 'k8s/base'));
const fake = path.join(dir, 'kubectl');
writeFileSync(
  fake,
  `#!/usr/bin/env bash
case "$*" in
  *"create job"*"--from=cronjob/"*"--dry-run=client"*) all="$*"; t="\${all##*--from=cronjob/}"; cat "${dir}/\${t%% *}.job.yaml" ;;
  *"create -f -"*) cat > "${dir}/created.yaml" ;;
  *) exec kubectl "$@" ;;
esac
`,
);
chmodSync(fake, 0o755);
for (const cj of objects.filter((o) => o.kind === 'CronJob')) {
  const job = { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'from-template', namespace: 'fugu' }, spec: (cj.spec as { jobTemplate: { spec: unknown } }).jobTemplate.spec };
  writeFileSync(path.join(dir, `${cj.metadata.name}.job.yaml`), stringify(job));
}

function jobSh(args: string[]): { spec: { template: { spec: { containers: Container[] } } } } {
  execFileSync('bash', [path.join(root, 'k8s/scripts/job.sh'), ...args], { env: { ...process.env, KUBECTL: fake, FOLLOW: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  return parse(readFileSync(path.join(dir, 'created.yaml'), 'utf8')) as K8sObject & { spec: { template: { spec: { containers: Container[] } } } };
}

describe('k8s/scripts/job.sh', () => {
  it('cli: each argument reaches the fugu command as one argument', () => {
    const job = jobSh(['cli', 'route-1', 'router', 'route', 'ck-1', 'What is "2 + 2"?', '--allowed', 'a,b', 'back\\slash']);
    expect(job.spec.template.spec.containers[0]!.args).toEqual(['node', 'apps/cli/src/main.ts', 'router', 'route', 'ck-1', 'What is "2 + 2"?', '--allowed', 'a,b', 'back\\slash']);
  });

  it('es-coordinator: the coordinator command with its run', () => {
    const c = jobSh(['es-coordinator', 'es-1']).spec.template.spec.containers[0]!;
    expect(c.args).toEqual(['node', 'apps/trainer/src/coordinator-main.ts']);
    expect(c.env?.filter((e) => e.name === 'FUGU_ES_RUN')).toEqual([{ name: 'FUGU_ES_RUN', value: 'es-1' }]);
  });

  it('grpo-coordinator: the GRPO coordinator command with its run', () => {
    const c = jobSh(['grpo-coordinator', 'grpo-1']).spec.template.spec.containers[0]!;
    expect(c.args).toEqual(['node', 'apps/trainer/src/grpo-main.ts']);
    expect(c.env?.filter((e) => e.name === 'FUGU_GRPO_RUN')).toEqual([{ name: 'FUGU_GRPO_RUN', value: 'grpo-1' }]);
  });

  it('refuses a job name that is not a DNS label', () => {
    expect(() => execFileSync('bash', [path.join(root, 'k8s/scripts/job.sh'), 'cli', 'Bad_Name', 'status'], { env: { ...process.env, KUBECTL: fake }, stdio: 'pipe' })).toThrow(/not a DNS label/);
  });
});
