// The container images' rules, read from Dockerfile and Dockerfile.cuda without Docker (the
// install: infra/container/prod-install-check.sh; the build context: test/k8s/context.test.ts and,
// with a real Docker, infra/container/context-check.sh): both builders, a Node 24 slim base,
// production dependencies only, every workspace manifest copied, non-root numeric user, tini as
// PID 1, FUGU_HOME on a volume, the CUDA variant with ONNX Runtime's CUDA 12 provider.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseDockerfile, type Stage } from './dockerfile.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const read = (f: string) => parseDockerfile(readFileSync(path.join(root, f), 'utf8'));
const all = (s: Stage, op: string) => s.instructions.filter((x) => x.op === op);
const last = (s: Stage, op: string) => all(s, op).at(-1)?.args;
const workspaceManifests = ['apps', 'libs'].flatMap((d) => readdirSync(path.join(root, d)).map((p) => `${d}/${p}/package.json`)).sort();

describe.each([
  { file: 'Dockerfile', cmd: ['node', 'apps/gateway/src/main.ts'], runtimeBase: /^node:24-[a-z]+-slim$/ },
  { file: 'Dockerfile.cuda', cmd: ['node', 'apps/router-worker/src/main.ts'], runtimeBase: /^nvidia\/cuda:12\.\d+(\.\d+)?-cudnn-runtime-ubuntu24\.04$/ },
])('$file', ({ file, cmd, runtimeBase }) => {
  const { stages } = read(file);
  const runtime = stages.at(-1)!;
  const deps = stages.find((s) => s.name === 'deps');

  it('builds with the legacy builder as with BuildKit: no BuildKit-only syntax', () => {
    const text = readFileSync(path.join(root, file), 'utf8');
    // `# syntax=` makes BuildKit pull a frontend image (fails where the registry cannot be reached);
    // the legacy builder rejects RUN --mount, COPY --link/--chmod/--parents/--exclude and heredocs
    expect(text, `${file}: a # syntax= directive`).not.toMatch(/^#\s*syntax\s*=/im);
    expect(text, `${file}: a BuildKit-only flag`).not.toMatch(/^\s*(RUN|COPY|ADD)\s+(.*\s)?--(mount|network|security|link|chmod|parents|exclude)\b/im);
    expect(text, `${file}: a heredoc`).not.toMatch(/^\s*(RUN|COPY)\s.*<<-?["']?\w+/im);
  });

  it('builds on Node 24 slim (the runtime stage, or the node it copies)', () => {
    expect(runtime.from, `${file}: final stage FROM`).toMatch(runtimeBase);
    for (const s of stages.filter((x) => x.from.startsWith('node:'))) expect(s.from, `${file}: stage ${s.name}`).toMatch(/^node:24-[a-z]+-slim$/);
    if (!runtime.from.startsWith('node:')) {
      const copy = all(runtime, 'COPY').find((c) => /--from=node\s+\/usr\/local\/bin\/node\b/.test(c.args));
      expect(copy, `${file}: the runtime stage copies node from the node:24 image`).toBeDefined();
    }
  });

  it('installs production dependencies only, from the lock file, with every workspace manifest', () => {
    expect(deps, `${file}: a stage named deps`).toBeDefined();
    const run = all(deps!, 'RUN').map((r) => r.args).join(' ');
    expect(run).toMatch(/npm ci --omit=dev\b/);
    const copied = all(deps!, 'COPY').flatMap((c) => c.args.split(/\s+/).filter((a) => a.endsWith('package.json') && a.includes('/')));
    expect(copied.sort(), `${file}: the deps stage copies each workspace's package.json`).toEqual(workspaceManifests);
    expect(all(deps!, 'COPY').some((c) => c.args.includes('package-lock.json'))).toBe(true);
    expect(all(runtime, 'COPY').some((c) => /--from=deps\s+\/app\/node_modules/.test(c.args))).toBe(true);
  });

  it('runs as a numeric non-root user under tini, with the documented command', () => {
    const user = last(runtime, 'USER');
    expect(user, `${file}: USER`).toMatch(/^\d+(:\d+)?$/);
    expect(Number(user!.split(':')[0])).toBeGreaterThan(0);
    expect(user).toBe('10001:10001');
    expect(JSON.parse(last(runtime, 'ENTRYPOINT')!)).toEqual(['/usr/bin/tini', '--']);
    expect(all(runtime, 'RUN').some((r) => /apt-get install\b.*\btini\b/.test(r.args)), `${file}: tini installed with apt`).toBe(true);
    expect(JSON.parse(last(runtime, 'CMD')!)).toEqual(cmd);
    expect(last(runtime, 'WORKDIR')).toBe('/app');
  });

  it('writes only to FUGU_HOME (a volume owned by the user) and /tmp', () => {
    const env = all(runtime, 'ENV').map((e) => e.args).join(' ');
    expect(env).toMatch(/FUGU_HOME=\/var\/lib\/fugu\b/);
    expect(last(runtime, 'VOLUME')).toContain('/var/lib/fugu');
    expect(all(runtime, 'RUN').some((r) => /chown 10001:10001 \/var\/lib\/fugu/.test(r.args))).toBe(true);
  });
});

describe('Dockerfile.cuda', () => {
  it("installs onnxruntime-node's CUDA 12 provider and fails the build without it", () => {
    const { stages } = read('Dockerfile.cuda');
    const run = all(stages.find((s) => s.name === 'deps')!, 'RUN').map((r) => r.args).join(' ');
    expect(run).toContain('ONNXRUNTIME_NODE_INSTALL=cuda12');
    expect(run).toMatch(/test -f \S*libonnxruntime_providers_cuda\.so/);
    const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
    // the comment's version reasoning (CUDA 12 + cuDNN 9) is for onnxruntime-node 1.30
    expect(lock.packages['node_modules/onnxruntime-node']?.version).toMatch(/^1\.30\./);
  });
});
