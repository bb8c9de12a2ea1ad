// The coding harnesses `npm run test:harnesses` drives (test/harness/harnesses.test.ts), pinned:
// where they are installed (a cache outside the repository: FUGU_HARNESS_CACHE, default
// ~/.cache/fugu/harnesses/<name>@<version>, by `npm install --prefix`), and how each is pointed at
// a gateway and run non-interactively, offline: its own config in a throwaway home (no telemetry,
// no update checks, no model list fetched), the gateway's key in an environment variable.
//
//   Codex CLI    `codex exec`   the Responses API (a model_providers entry, wire_api = "responses")
//   Claude Code  `claude -p`    the Anthropic Messages API (ANTHROPIC_BASE_URL)
//   OpenCode     `opencode run` Chat Completions (provider @ai-sdk/openai-compatible)
import { spawn } from 'node:child_process';
import { access, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

export type HarnessName = 'codex' | 'claude-code' | 'opencode';

/** How a harness talks to the gateway: its route. */
export type Wire = 'responses' | 'messages' | 'chat';

export type HarnessSpec = {
  name: HarnessName;
  /** the npm package and its pinned version */
  pkg: string;
  version: string;
  /** its command in node_modules/.bin */
  bin: string;
  wire: Wire;
};

export const HARNESSES: readonly HarnessSpec[] = [
  { name: 'codex', pkg: '@openai/codex', version: '0.169.0', bin: 'codex', wire: 'responses' },
  { name: 'claude-code', pkg: '@anthropic-ai/claude-code', version: '2.1.328', bin: 'claude', wire: 'messages' },
  { name: 'opencode', pkg: 'opencode-ai', version: '1.18.33', bin: 'opencode', wire: 'chat' },
];

/** The route of each wire (what gets a `requests` row). */
export const ROUTE: Readonly<Record<Wire, string>> = { responses: '/v1/responses', messages: '/v1/messages', chat: '/v1/chat/completions' };

/** The cache's root: FUGU_HARNESS_CACHE, else ~/.cache/fugu/harnesses. */
export const harnessCache = (env: NodeJS.ProcessEnv = process.env): string => env.FUGU_HARNESS_CACHE || path.join(homedir(), '.cache', 'fugu', 'harnesses');

export const harnessDir = (h: HarnessSpec, root: string): string => path.join(root, `${h.name}@${h.version}`);
export const harnessBin = (h: HarnessSpec, root: string): string => path.join(harnessDir(h, root), 'node_modules', '.bin', h.bin);

/** Installed: its bin is there and its package.json says the pinned version. */
export async function isInstalled(h: HarnessSpec, root: string): Promise<boolean> {
  try {
    await access(harnessBin(h, root));
    const pkg = JSON.parse(await readFile(path.join(harnessDir(h, root), 'node_modules', ...h.pkg.split('/'), 'package.json'), 'utf8')) as { version?: string };
    return pkg.version === h.version;
  } catch {
    return false;
  }
}

export type Installed = { harness: HarnessName; installed: boolean; ms: number };

/**
 * Installs each harness that is missing from the cache (`npm install --prefix <tmp> --no-audit
 * --no-fund <pkg>@<version>`, then renamed into place, so a cut-off install leaves nothing half
 * there; another process that installed it first wins). Says what it did.
 */
export async function ensureHarnesses(root: string, say: (line: string) => void = () => {}): Promise<Installed[]> {
  await mkdir(root, { recursive: true });
  const out: Installed[] = [];
  for (const h of HARNESSES) {
    const t0 = performance.now();
    if (await isInstalled(h, root)) {
      out.push({ harness: h.name, installed: false, ms: performance.now() - t0 });
      continue;
    }
    const dir = harnessDir(h, root);
    const tmp = `${dir}.tmp-${process.pid}`;
    say(`installing ${h.pkg}@${h.version} into ${dir}`);
    await rm(tmp, { recursive: true, force: true });
    const r = await run('npm', ['install', '--prefix', tmp, '--no-audit', '--no-fund', '--loglevel=error', `${h.pkg}@${h.version}`], { cwd: root, timeoutMs: 600_000 });
    if (r.code !== 0) {
      await rm(tmp, { recursive: true, force: true });
      throw new Error(`npm install ${h.pkg}@${h.version} failed (exit ${r.code}): ${(r.stderr || r.stdout).slice(-2000)}`);
    }
    if (await isInstalled(h, root)) await rm(tmp, { recursive: true, force: true });
    else {
      await rm(dir, { recursive: true, force: true });
      await rename(tmp, dir);
    }
    out.push({ harness: h.name, installed: true, ms: performance.now() - t0 });
  }
  return out;
}

export type RunResult = { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; ms: number };

/** A command to its end (stdin closed), its output kept; killed (SIGKILL) past `timeoutMs`. */
export function run(cmd: string, args: readonly string[], o: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<RunResult> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: o.cwd, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

/** What a run of a harness needs: its command, arguments and environment, its final output's file (when it writes one). */
export type Invocation = { cmd: string; args: string[]; env: NodeJS.ProcessEnv; lastMessageFile?: string };

/**
 * A harness pointed at a gateway (`baseUrl`: the gateway's root, no /v1) with `model`, asked
 * `prompt`, its config and state in `home` (a throwaway directory: HOME too, so nothing of the
 * machine's own configuration is read). Telemetry, update checks and model-list fetches off.
 */
export async function invocation(h: HarnessSpec, o: { root: string; home: string; baseUrl: string; apiKey: string; model: string; prompt: string }): Promise<Invocation> {
  await mkdir(o.home, { recursive: true });
  const base: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: o.home, LANG: 'C.UTF-8', TERM: 'dumb', NO_COLOR: '1', FUGU_API_KEY: o.apiKey };
  const bin = harnessBin(h, o.root);
  switch (h.name) {
    case 'codex': {
      const codexHome = path.join(o.home, 'codex');
      await mkdir(codexHome, { recursive: true });
      // a model catalog entry, as for any model that is not OpenAI's: apply_patch as a freeform (custom) tool, no web search tool
      const entry = (slug: string) => ({
        slug, display_name: slug, description: `${slug} on a fugu gateway`, supported_reasoning_levels: [], shell_type: 'shell_command', visibility: 'list', supported_in_api: true,
        priority: 0, base_instructions: 'You are a coding agent. Use the tools to read and edit files.', supports_reasoning_summaries: false, default_reasoning_summary: 'none',
        support_verbosity: false, apply_patch_tool_type: 'freeform', truncation_policy: { mode: 'bytes', limit: 10000 }, supports_parallel_tool_calls: true,
        context_window: 128000, max_context_window: 128000, effective_context_window_percent: 95, experimental_supported_tools: [], input_modalities: ['text'], supports_search_tool: false,
      });
      await writeFile(path.join(codexHome, 'models.json'), JSON.stringify({ models: [entry('fugu'), entry('fugu-ultra')] }, null, 2));
      await writeFile(
        path.join(codexHome, 'config.toml'),
        [
          `model = "${o.model}"`,
          'model_provider = "fugu"',
          `model_catalog_json = "${path.join(codexHome, 'models.json')}"`,
          '# a hosted tool the gateway refuses (it runs on OpenAI\'s platform)',
          'web_search = "disabled"',
          'check_for_update_on_startup = false',
          '',
          '[analytics]',
          'enabled = false',
          '',
          '[model_providers.fugu]',
          'name = "fugu"',
          `base_url = "${o.baseUrl}/v1"`,
          'env_key = "FUGU_API_KEY"',
          'wire_api = "responses"',
          '# every request the harness makes is one turn the test counts',
          'request_max_retries = 0',
          'stream_max_retries = 0',
          '',
        ].join('\n'),
      );
      const lastMessageFile = path.join(o.home, 'codex-last-message.txt');
      return {
        cmd: bin,
        // the throwaway repository is the sandbox (bubblewrap is not there on every CI machine)
        args: ['exec', '--skip-git-repo-check', '--color', 'never', '-s', 'danger-full-access', '-m', o.model, '-o', lastMessageFile, o.prompt],
        env: { ...base, CODEX_HOME: codexHome },
        lastMessageFile,
      };
    }
    case 'claude-code':
      return {
        cmd: bin,
        args: ['-p', '--model', o.model, '--permission-mode', 'acceptEdits', '--output-format', 'text', o.prompt],
        env: {
          ...base,
          CLAUDE_CONFIG_DIR: path.join(o.home, 'claude'),
          ANTHROPIC_BASE_URL: o.baseUrl,
          ANTHROPIC_API_KEY: o.apiKey,
          DISABLE_TELEMETRY: '1',
          DISABLE_AUTOUPDATER: '1',
          DISABLE_ERROR_REPORTING: '1',
          DISABLE_BUG_COMMAND: '1',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
          DISABLE_NON_ESSENTIAL_MODEL_CALLS: '1',
          CLAUDE_CODE_MAX_RETRIES: '0',
        },
      };
    case 'opencode': {
      const config = path.join(o.home, 'opencode.json');
      await writeFile(
        config,
        JSON.stringify(
          {
            $schema: 'https://opencode.ai/config.json',
            provider: {
              fugu: {
                npm: '@ai-sdk/openai-compatible',
                name: 'fugu',
                options: { baseURL: `${o.baseUrl}/v1`, apiKey: '{env:FUGU_API_KEY}' },
                models: { fugu: { name: 'fugu', tool_call: true }, 'fugu-ultra': { name: 'fugu-ultra', tool_call: true } },
              },
            },
            model: `fugu/${o.model}`,
            small_model: `fugu/${o.model}`,
            autoupdate: false,
            share: 'disabled',
          },
          null,
          2,
        ),
      );
      return {
        cmd: bin,
        args: ['run', '--pure', '-m', `fugu/${o.model}`, o.prompt],
        env: {
          ...base,
          OPENCODE_CONFIG: config,
          XDG_CONFIG_HOME: path.join(o.home, 'config'),
          XDG_DATA_HOME: path.join(o.home, 'data'),
          XDG_CACHE_HOME: path.join(o.home, 'cache'),
          XDG_STATE_HOME: path.join(o.home, 'state'),
          OPENCODE_DISABLE_AUTOUPDATE: '1',
          OPENCODE_DISABLE_MODELS_FETCH: '1',
          OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
          OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
          OPENCODE_DISABLE_CLAUDE_CODE: '1',
        },
      };
    }
  }
}

/** A harness's printed output without terminal escapes. */
export const plain = (s: string): string => s.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;?]*[A-Za-z]`, 'g'), '');
