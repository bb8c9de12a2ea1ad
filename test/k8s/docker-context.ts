// Docker's build context, computed from .dockerignore with Docker's own rules, so that a test can
// say which files `docker build .` sends without a Docker daemon. A small port of:
//   - moby/patternmatcher ignorefile.ReadAll (formerly buildkit frontend/dockerfile/dockerignore):
//     reading the file;
//   - moby/patternmatcher (formerly moby pkg/fileutils): New, Pattern.compile / match, the
//     deprecated Matches (one parent directory checked) and MatchesOrParentMatches;
//   - moby pkg/archive TarWithOptions (Docker 20.10's CLI builds the legacy builder's context with
//     it): the walk that skips an excluded directory unless an exception ("!" pattern) starts with
//     the directory's literal path. That rule is why `**` + `!apps/*/package.json` sends no
//     apps/ (moby/moby#30018, docker/cli#2919), and why .dockerignore is a plain exclusion list.
// Patterns are regular expressions built the way Docker builds them (not filepath.Match, which
// Docker only calls to reject a malformed pattern): `*` and `?` stop at "/", `**` crosses it, a
// leading `**/` also matches at the top, a trailing `/**` matches everything below, and the last
// pattern that matches a path decides ("!" re-includes). Paths are slash-separated, relative to
// the context root.
//
// As a script: `node test/k8s/docker-context.ts [dir]` prints the context of dir (default: the
// repository) walked on disk, one path a line (infra/container/context-check.sh compares it with
// what a real Docker daemon puts in an image).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Go's path/filepath.Clean for slash-separated paths. */
export function goClean(p: string): string {
  if (p === '') return '.';
  const rooted = p.startsWith('/');
  const out: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length > 0 && out.at(-1) !== '..') out.pop();
      else if (!rooted) out.push('..');
      continue;
    }
    out.push(part);
  }
  const s = (rooted ? '/' : '') + out.join('/');
  return s === '' ? '.' : s;
}

/** Go's path/filepath.Dir. */
function goDir(p: string): string {
  const i = p.lastIndexOf('/');
  return goClean(i < 0 ? '' : p.slice(0, i + 1));
}

/**
 * ignorefile.ReadAll: a UTF-8 BOM is dropped; a line starting with "#" (before any trimming) is a
 * comment; the rest is trimmed, blank lines dropped; the pattern (after a "!", itself trimmed) is
 * filepath.Clean-ed and loses a leading "/".
 */
export function readIgnoreFile(text: string): string[] {
  const out: string[] = [];
  const lines = text.replace(/^\uFEFF/, '').split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (let line of lines) {
    if (line.endsWith('\r')) line = line.slice(0, -1); // bufio.ScanLines drops a trailing \r
    if (line.startsWith('#')) continue;
    let p = line.trim();
    if (p === '') continue;
    const invert = p.startsWith('!');
    if (invert) p = p.slice(1).trim();
    if (p.length > 0) {
      p = goClean(p);
      if (p.length > 1 && p.startsWith('/')) p = p.slice(1);
    }
    out.push(invert ? `!${p}` : p);
  }
  return out;
}

type MatchType = 'exact' | 'prefix' | 'suffix' | 'regexp';

/** One compiled pattern (patternmatcher.Pattern). */
export interface Pattern {
  readonly cleaned: string;
  readonly exclusion: boolean;
  readonly dirs: string[];
  match(file: string): boolean;
}

/** filepath.Match's syntax check (the only use Docker makes of it): a closed, non-empty `[...]`, no trailing `\`. */
function checkSyntax(p: string): void {
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === '\\') {
      if (++i >= p.length) throw new Error(`syntax error in pattern: ${p}`);
    } else if (c === '[') {
      let j = i + 1;
      if (p[j] === '^') j++;
      const start = j;
      for (; j < p.length && (p[j] !== ']' || j === start); j++) if (p[j] === '\\') j++;
      if (j >= p.length) throw new Error(`syntax error in pattern: ${p}`);
      i = j;
    }
  }
}

/** Pattern.compile with "/" as the separator: the pattern's match type and, for regexpMatch, its regular expression. */
function compile(pattern: string): { type: MatchType; re?: RegExp } {
  let reg = '^';
  let type: MatchType = 'exact';
  const chars = [...pattern]; // text/scanner reads Unicode characters
  let pos = 0;
  const peek = (): string | undefined => chars[pos];
  const next = (): string => chars[pos++]!;
  for (let i = 0; peek() !== undefined; i++) {
    const ch = next();
    if (ch === '*') {
      if (peek() === '*') {
        next(); // some flavour of "**"
        if (peek() === '/') next(); // "**/" is "**"
        if (peek() === undefined) {
          // "**" at the end: everything below
          if (type === 'exact') type = 'prefix';
          else {
            reg += '.*';
            type = 'regexp';
          }
        } else {
          reg += '(.*/)?'; // any number of directories, even none
          type = 'regexp';
        }
        if (i === 0) type = 'suffix';
      } else {
        reg += '[^/]*';
        type = 'regexp';
      }
    } else if (ch === '?') {
      reg += '[^/]';
      type = 'regexp';
    } else if ('.+()|{}$'.includes(ch)) {
      reg += `\\${ch}`; // regexp metacharacters that mean nothing to filepath.Match
    } else if (ch === '\\') {
      if (peek() !== undefined) {
        reg += `\\${next()}`;
        type = 'regexp';
      } else reg += '\\';
    } else if (ch === '[' || ch === ']') {
      reg += ch;
      type = 'regexp';
    } else reg += ch;
  }
  return type === 'regexp' ? { type, re: new RegExp(`${reg}$`) } : { type };
}

function newPattern(cleaned: string, exclusion: boolean): Pattern {
  let compiled: { type: MatchType; re?: RegExp } | undefined;
  return {
    cleaned,
    exclusion,
    dirs: cleaned.split('/'),
    match(file: string): boolean {
      compiled ??= compile(cleaned);
      switch (compiled.type) {
        case 'exact':
          return file === cleaned;
        case 'prefix':
          return file.startsWith(cleaned.slice(0, -2)); // strip the trailing **
        case 'suffix': {
          const suffix = cleaned.slice(2); // strip the leading **
          if (file.endsWith(suffix)) return true;
          return suffix.startsWith('/') && file === suffix.slice(1); // "**/foo" matches "foo"
        }
        case 'regexp':
          return compiled.re!.test(file);
      }
    },
  };
}

/** patternmatcher.PatternMatcher. */
export class PatternMatcher {
  readonly patterns: Pattern[] = [];
  readonly exclusions: boolean = false;

  constructor(patterns: readonly string[]) {
    for (let p of patterns) {
      p = p.trim();
      if (p === '') continue;
      p = goClean(p);
      let exclusion = false;
      if (p.startsWith('!')) {
        if (p.length === 1) throw new Error('illegal exclusion pattern: "!"');
        exclusion = true;
        p = p.slice(1);
        this.exclusions = true;
      }
      checkSyntax(p);
      this.patterns.push(newPattern(p, exclusion));
    }
  }

  /** The deprecated Matches (Docker 20.10's pkg/archive uses it): the file, or its parent directory cut to the pattern's depth. */
  matches(file: string): boolean {
    return this.#scan(file, (pattern, dirs) => pattern.dirs.length <= dirs.length && pattern.match(dirs.slice(0, pattern.dirs.length).join('/')));
  }

  /** MatchesOrParentMatches: the file or any of its parent directories. */
  matchesOrParentMatches(file: string): boolean {
    return this.#scan(file, (pattern, dirs) => dirs.some((_, i) => pattern.match(dirs.slice(0, i + 1).join('/'))));
  }

  /** The patterns in order, the last that matches (the file, else `parentMatch` on its parent's parts) deciding. */
  #scan(file: string, parentMatch: (pattern: Pattern, parentDirs: string[]) => boolean): boolean {
    let matched = false;
    const parentPath = goDir(file);
    const parentPathDirs = parentPath.split('/');
    for (const pattern of this.patterns) {
      // an inclusion that already matched, or an exclusion with nothing to re-include, cannot change the result
      if (pattern.exclusion !== matched) continue;
      const match = pattern.match(file) || (parentPath !== '.' && parentMatch(pattern, parentPathDirs));
      if (match) matched = !pattern.exclusion;
    }
    return matched;
  }

  /** pkg/archive's rule for an excluded directory: walk into it only if an exception starts with its literal path. */
  mayWalkInto(dir: string): boolean {
    if (!this.exclusions) return false;
    return this.patterns.some((p) => p.exclusion && `${p.cleaned}/`.startsWith(`${dir}/`));
  }
}

/** A directory tree: a file is null, a directory a map of its entries. */
export type Tree = Map<string, Tree | null>;

/** The tree of a list of slash-separated file paths. */
export function treeOf(files: Iterable<string>): Tree {
  const root: Tree = new Map();
  for (const f of files) {
    const parts = f.split('/');
    let node = root;
    for (const dir of parts.slice(0, -1)) {
      let child = node.get(dir);
      if (!child) node.set(dir, (child = new Map()));
      node = child;
    }
    node.set(parts.at(-1)!, null);
  }
  return root;
}

export type Matcher = 'matches' | 'matchesOrParentMatches';

/**
 * The files Docker sends, walking the tree as pkg/archive's TarWithOptions does (entries in byte
 * order; an excluded file is left out; an excluded directory is skipped whole unless
 * mayWalkInto), testing each path with the given matcher. Sorted in byte order.
 */
export function walkContext(tree: Tree, pm: PatternMatcher, matcher: Matcher = 'matches'): string[] {
  const out: string[] = [];
  const walk = (node: Tree, prefix: string): void => {
    for (const name of [...node.keys()].sort(byteOrder)) {
      const rel = prefix ? `${prefix}/${name}` : name;
      const child = node.get(name)!;
      const skip = pm[matcher](rel);
      if (child === null) {
        if (!skip) out.push(rel);
      } else if (!skip || pm.mayWalkInto(rel)) walk(child, rel);
    }
  };
  walk(tree, '');
  return out.sort(byteOrder);
}

/** The context as each file's own verdict (MatchesOrParentMatches): what the rules mean, walk or no walk. */
export function filterContext(files: Iterable<string>, pm: PatternMatcher): string[] {
  return [...files].filter((f) => !pm.matchesOrParentMatches(goClean(f))).sort(byteOrder);
}

const byteOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** The tree of a directory on disk (symbolic links are files, as filepath.Walk's Lstat sees them), pruned where pm excludes a directory for good. */
export function diskTree(dir: string, pm: PatternMatcher): Tree {
  const read = (abs: string, rel: string): Tree => {
    const node: Tree = new Map();
    for (const e of readdirSync(abs, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        // an excluded directory that the walk would skip is not read (node_modules, .git)
        node.set(e.name, pm.matches(r) && !pm.mayWalkInto(r) ? new Map() : read(path.join(abs, e.name), r));
      } else node.set(e.name, null);
    }
    return node;
  };
  return read(dir, '');
}

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The patterns of a context directory's .dockerignore (none when it has no such file). */
export function readDockerignore(dir: string = repoRoot): string[] {
  try {
    return readIgnoreFile(readFileSync(path.join(dir, '.dockerignore'), 'utf8'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dir = path.resolve(process.argv[2] ?? repoRoot);
  const pm = new PatternMatcher(readDockerignore(dir));
  process.stdout.write(walkContext(diskTree(dir, pm), pm).map((f) => `${f}\n`).join(''));
}
