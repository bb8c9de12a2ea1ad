// A Dockerfile read without Docker: stages, their instructions (continuation lines joined,
// comments dropped) and the global ARG defaults, substituted in FROM as both builders do. Used by
// test/k8s/dockerfile.test.ts and test/k8s/dockerfile-stages.test.ts.

export interface Instruction {
  op: string;
  args: string;
  line: number;
}
export interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

/** Instructions by stage, continuation lines joined, comments dropped, global ARG defaults substituted in FROM. */
export function parseDockerfile(text: string): { stages: Stage[]; args: Record<string, string> } {
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.endsWith('\\') && i + 1 < lines.length) {
      i++;
      if (/^\s*#/.test(lines[i]!)) continue;
      line = `${line.slice(0, -1)} ${lines[i]!.trim()}`;
    }
    const m = /^\s*(\w+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`line ${start + 1}: not an instruction: ${line}`);
    const op = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(rest)!;
      const from = f[1]!.replace(/\$\{(\w+)\}/g, (_, k: string) => args[k] ?? `\${${k}}`);
      stages.push({ from, ...(f[2] && { name: f[2] }), instructions: [] });
    } else if (op === 'ARG' && stages.length === 0) {
      // a global ARG's default may name an earlier one (ARG DEPS_IMAGE=${NODE_IMAGE}): both builders substitute it
      const [k, v] = rest.split('=');
      args[k!] = (v ?? '').replace(/\$\{(\w+)\}/g, (_, a: string) => args[a] ?? `\${${a}}`);
    } else {
      if (!stages.length) throw new Error(`line ${start + 1}: ${op} before FROM`);
      stages.at(-1)!.instructions.push({ op, args: rest, line: start + 1 });
    }
  }
  return { stages, args };
}
