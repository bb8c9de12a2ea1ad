import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, type WorkerPool } from '@fugu/core';
import { REPO_ROOT } from './llmrouter.ts';
import { loadWorkerPool, parseWorkerPool, resolvePool, writeWorkerPool } from './pool.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'fugu-pool-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const YAML_POOL = `name: my-pool
workers:
  - name: gpt-4o-mini
    provider: openai
    model: gpt-4o-mini
    api_key_env: OPENAI_API_KEY
    temperature: 0.7
    max_tokens: 1024
    reasoning_effort: low
    price: { input: "0.15", output: "0.60" }
  - name: local-llama
    provider: openai-compatible
    model: llama3
    base_url: http://127.0.0.1:8000/v1
    price: { input: 0, output: 0 }
  - name: claude
    provider: anthropic
    model: claude-sonnet-4-5
    api_key_env: ANTHROPIC_API_KEY
    top_p: 0.9
    price: { input: 3, output: 15.0 }
`;

function errorOf(fn: () => unknown): InputError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return e as InputError;
  }
  throw new Error('expected an InputError');
}

/** The example pool with one line replaced. */
function withLine(from: string, to: string): string {
  expect(YAML_POOL).toContain(from);
  return YAML_POOL.replace(from, to);
}

describe('parsing pool files', () => {
  it('reads YAML into a WorkerPool with exact decimal prices', () => {
    const pool = parseWorkerPool(YAML_POOL, 'pool.yaml');
    expect(pool.name).toBe('my-pool');
    expect(pool.workers[0]).toEqual({
      name: 'gpt-4o-mini',
      provider: 'openai',
      model: 'gpt-4o-mini',
      apiKeyEnv: 'OPENAI_API_KEY',
      settings: { temperature: 0.7, maxTokens: 1024, reasoningEffort: 'low' },
      prices: { inputPerMTok: '0.15', outputPerMTok: '0.60' },
    });
    expect(pool.workers[1]).toEqual({
      name: 'local-llama',
      provider: 'openai-compatible',
      model: 'llama3',
      baseUrl: 'http://127.0.0.1:8000/v1',
      settings: {},
      prices: { inputPerMTok: '0', outputPerMTok: '0' },
    });
    expect(pool.workers[2]!.prices).toEqual({ inputPerMTok: '3', outputPerMTok: '15' });
    expect(pool.workers[2]!.settings).toEqual({ topP: 0.9 });
  });

  it('reads JSON', () => {
    const pool = parseWorkerPool(
      JSON.stringify({ name: 'j', workers: [{ name: 'w', provider: 'google', model: 'gemini-2.5-flash', price: { input: '0.30', output: '2.50' } }] }),
    );
    expect(pool.workers[0]!.prices.outputPerMTok).toBe('2.50');
  });

  const cases: Array<[string, string, string, string, number | undefined, RegExp]> = [
    ['a negative price', '    price: { input: "0.15", output: "0.60" }', '    price: { input: "-0.15", output: "0.60" }', 'workers[0].price.input', 10, /negative/],
    ['a negative number price', '    price: { input: 3, output: 15.0 }', '    price: { input: 3, output: -1 }', 'workers[2].price.output', 21, /negative/],
    ['a non-decimal price', '    price: { input: "0.15", output: "0.60" }', '    price: { input: "cheap", output: "0.60" }', 'workers[0].price.input', 10, /decimal/],
    ['an unknown provider', '    provider: anthropic', '    provider: mistral', 'workers[2].provider', 17, /provider must be one of openai, anthropic/],
    ['a duplicate worker name', '  - name: claude', '  - name: gpt-4o-mini', 'workers[2].name', 16, /duplicate worker name "gpt-4o-mini" \(also workers\[0\]\)/],
    ['a missing model', '    model: llama3\n', '', 'workers[1].model', 11, /missing model/],
    ['openai-compatible without base_url', '    base_url: http://127.0.0.1:8000/v1\n', '', 'workers[1].base_url', 11, /needs base_url/],
    ['an unknown field', '    max_tokens: 1024', '    max_tokenz: 1024', 'workers[0].max_tokenz', 8, /unknown field "max_tokenz"/],
    ['a temperature out of range', '    temperature: 0.7', '    temperature: 7', 'workers[0].temperature', 7, /temperature/],
    ['a bad reasoning effort', '    reasoning_effort: low', '    reasoning_effort: extreme', 'workers[0].reasoning_effort', 9, /reasoning_effort/],
    ['an empty description', '    reasoning_effort: low', '    reasoning_effort: low\n    description: "  "', 'workers[0].description', 10, /description must not be empty/],
    ['a description that is not text', '    reasoning_effort: low', '    reasoning_effort: low\n    description: [1]', 'workers[0].description', 10, /description must be a string/],
  ];
  for (const [what, from, to, field, line, message] of cases) {
    it(`rejects ${what}, naming file, line and field`, () => {
      const e = errorOf(() => parseWorkerPool(withLine(from, to), 'pools/p.yaml'));
      expect(e.file).toBe('pools/p.yaml');
      expect(e.field).toBe(field);
      expect(e.line).toBe(line);
      expect(e.message).toMatch(message);
      expect(e.message).toContain(`field ${field}`);
    });
  }

  it('rejects a literal secret without echoing it', () => {
    const secret = 'sk-proj-abcdefghijklmnopqrstuvwxyz123456';
    const e1 = errorOf(() => parseWorkerPool(withLine('    api_key_env: OPENAI_API_KEY', `    api_key: ${secret}`), 'p.yaml'));
    expect(e1.field).toBe('workers[0].api_key');
    expect(e1.message).toMatch(/literal secret/);
    expect(e1.message).not.toContain(secret);
    // a key pasted where the variable name belongs
    const e2 = errorOf(() => parseWorkerPool(withLine('    api_key_env: OPENAI_API_KEY', `    api_key_env: ${secret}`), 'p.yaml'));
    expect(e2.field).toBe('workers[0].api_key_env');
    expect(e2.message).not.toContain(secret);
    const e3 = errorOf(() => parseWorkerPool(withLine('    api_key_env: ANTHROPIC_API_KEY', '    api_key_env: AIzaSyDUMMYdummyDUMMYdummy12345'), 'p.yaml'));
    expect(e3.field).toBe('workers[2].api_key_env');
    expect(e3.message).not.toContain('AIzaSy');
  });

  it('reports YAML syntax errors with a line', () => {
    const e = errorOf(() => parseWorkerPool('name: x\nworkers:\n  - name: [unclosed\n', 'bad.yaml'));
    expect(e.file).toBe('bad.yaml');
    expect(e.line).toBeGreaterThan(0);
    expect(errorOf(() => parseWorkerPool('- just\n- a list\n')).message).toMatch(/mapping/);
    expect(errorOf(() => parseWorkerPool('name: empty\nworkers: []\n')).message).toMatch(/at least one worker/);
  });
});

describe('pool files on disk', () => {
  it('writes YAML and JSON that load back to the same pool', async () => {
    const pool = parseWorkerPool(YAML_POOL);
    for (const name of ['out.yaml', 'out.json']) {
      const p = join(dir, 'nested', name);
      await writeWorkerPool(p, pool);
      expect(await loadWorkerPool(p)).toEqual(pool);
    }
    expect(JSON.parse(await readFile(join(dir, 'nested', 'out.json'), 'utf8')).workers[0].api_key_env).toBe('OPENAI_API_KEY');
  });

  it('keeps a worker\'s description and size through a write and a load', async () => {
    const pool = parseWorkerPool(YAML_POOL.replace('    reasoning_effort: low', '    reasoning_effort: low\n    description: a small fast model\n    size: 8B'));
    expect(pool.workers[0]).toMatchObject({ description: 'a small fast model', size: '8B' });
    expect(pool.workers[1]!.description).toBeUndefined();
    const p = join(dir, 'described.yaml');
    await writeWorkerPool(p, pool);
    expect(await loadWorkerPool(p)).toEqual(pool);
  });

  it('refuses to write an invalid pool', async () => {
    const pool: WorkerPool = { name: 'x', workers: [{ name: 'w', provider: 'openai', model: 'm', settings: {}, prices: { inputPerMTok: '-1', outputPerMTok: '0' } }] };
    await expect(writeWorkerPool(join(dir, 'invalid.yaml'), pool)).rejects.toThrow(/negative/);
    await expect(readFile(join(dir, 'invalid.yaml'))).rejects.toThrow();
  });

  it('names a missing file', async () => {
    await expect(loadWorkerPool(join(dir, 'missing.yaml'))).rejects.toThrow(/missing\.yaml: no such pool file/);
  });

  it('resolvePool reads a file path, and llmrouter:<dir> errors name the directory', async () => {
    const p = join(dir, 'p.yaml');
    await writeFile(p, YAML_POOL);
    expect((await resolvePool(p)).name).toBe('my-pool');
    await expect(resolvePool(`llmrouter:${join(dir, 'nowhere')}`)).rejects.toThrow(/nowhere: no such directory/);
    await expect(resolvePool('llmrouter:')).rejects.toThrow(InputError);
  });

  it('a scripted worker\'s script: read, written and loaded back; the shipped pool resolves by name; mistakes name the field', async () => {
    const shipped = await resolvePool('scripted');
    expect(shipped.workers.map((w) => w.provider)).toEqual(['scripted', 'scripted', 'scripted', 'scripted']);
    expect(shipped.workers.find((w) => w.name === 'sim-flaky')?.script).toEqual({ seed: 4, latencyMs: 150, outputTokens: 40, style: 'concise', tools: 'auto', failures: { rateLimit: 0.05, serverError: 0.03, timeout: 0 } });
    const p = join(dir, 'scripted.yaml');
    await writeWorkerPool(p, shipped);
    expect(await loadWorkerPool(p)).toEqual(shipped);
    const one = (script: string, provider = 'scripted') => `name: s\nworkers:\n  - name: w\n    provider: ${provider}\n    model: m\n    price: { input: "0", output: "0" }\n    script: ${script}\n`;
    expect(() => parseWorkerPool(one('{ seed: 1 }', 'openai'), 'p.yaml')).toThrow(/p\.yaml:7, field workers\[0\]\.script: script is for provider scripted \(this worker's provider is openai\)/);
    expect(() => parseWorkerPool(one('{ failures: { rate_limit: 0.7, server_error: 0.5 } }'), 'p.yaml')).toThrow(/workers\[0\]\.script\.failures: .*add up to more than 1/);
    expect(() => parseWorkerPool(one('{ style: poetic }'), 'p.yaml')).toThrow(/workers\[0\]\.script\.style: script\.style must be one of concise, detailed, echo/);
    expect(() => parseWorkerPool(one('{ latency: 5 }'), 'p.yaml')).toThrow(/unknown field "latency"/);
  });

  it("a scripted worker's tool rules: read in order, written and loaded back (the harness pool too); a bad rule names its field", async () => {
    const one = (rules: string) => `name: s\nworkers:\n  - name: w\n    provider: scripted\n    model: m\n    price: { input: "0", output: "0" }\n    script:\n      tools: none\n      tool_rules:\n${rules}`;
    const pool = parseWorkerPool(
      one(`        - { when: "code word in (\\\\S+)", tool: Read, arguments: { file_path: "{{cwd}}/$1" } }\n        - { when: "change", tool: Edit, after: [Read], arguments: { old_string: "$1", n: 2 } }\n        - { when: "x", tool: Bash }\n`),
      'p.yaml',
    );
    expect(pool.workers[0]!.script).toEqual({
      tools: 'none',
      toolRules: [
        { when: 'code word in (\\S+)', tool: 'Read', arguments: { file_path: '{{cwd}}/$1' } },
        { when: 'change', tool: 'Edit', after: ['Read'], arguments: { old_string: '$1', n: 2 } },
        { when: 'x', tool: 'Bash', arguments: {} },
      ],
    });
    const p = join(dir, 'rules.yaml');
    await writeWorkerPool(p, pool);
    expect(await loadWorkerPool(p)).toEqual(pool);
    const harness = await loadWorkerPool(join(REPO_ROOT, 'data', 'pools', 'harness.yaml'));
    expect(harness.workers.every((w) => (w.script?.toolRules?.length ?? 0) > 0)).toBe(true);
    expect(() => parseWorkerPool(one('        - { when: "(unclosed", tool: Read }\n'), 'p.yaml')).toThrow(/p\.yaml:10, field workers\[0\]\.script\.tool_rules\[0\]\.when: when is not a valid regular expression/);
    expect(() => parseWorkerPool(one('        - { when: "x" }\n'), 'p.yaml')).toThrow(/field workers\[0\]\.script\.tool_rules\[0\]\.tool: missing tool/);
    expect(() => parseWorkerPool(one('        - { when: "x", tool: Read, arguments: [1] }\n'), 'p.yaml')).toThrow(/field workers\[0\]\.script\.tool_rules\[0\]\.arguments: arguments must be a mapping/);
    expect(() => parseWorkerPool(one('        - { when: "x", tool: Read, after: Read }\n'), 'p.yaml')).toThrow(/field workers\[0\]\.script\.tool_rules\[0\]\.after: after must be a list of tool names/);
    expect(() => parseWorkerPool(one('        - { when: "x", tool: Read, then: Edit }\n'), 'p.yaml')).toThrow(/field workers\[0\]\.script\.tool_rules\[0\]\.then: unknown field "then"/);
  });
});
