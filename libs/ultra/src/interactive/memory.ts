// The shared memory of a conversation as an agent reads it: the tool calls and results of the
// conversation's earlier workflows (ultra_tool_log), newest kept, within the deployment's limits
// (memoryMaxEntries entries, memoryMaxChars characters: a result longer than a quarter of the
// budget is cut, and the oldest entries are dropped first; what was left out is counted).
import type { ToolMemoryEntry } from '@fugu/db';

export type MemoryLimits = { maxEntries: number; maxChars: number };

/** The memory section of an agent's task, or '' when there is nothing to show. */
export function renderToolMemory(entries: readonly ToolMemoryEntry[], total: number, limits: MemoryLimits): string {
  if (entries.length === 0 || limits.maxEntries === 0 || limits.maxChars === 0) return '';
  const cut = Math.max(200, Math.floor(limits.maxChars / 4));
  const clip = (t: string): string => (t.length > cut ? `${t.slice(0, cut)}... [${t.length - cut} more characters]` : t);
  const lines: string[] = [];
  let used = 0;
  for (let i = entries.length - 1; i >= 0 && lines.length < limits.maxEntries; i--) {
    const e = entries[i]!;
    const line = `- ${e.name}(${clip(e.arguments)}) returned: ${clip(e.result)}`;
    if (used + line.length > limits.maxChars) break;
    lines.push(line);
    used += line.length + 1;
  }
  if (lines.length === 0) return '';
  lines.reverse();
  const dropped = total - lines.length;
  return [
    'Tool results already known in this conversation (from earlier turns; use them instead of calling the tool again):',
    ...(dropped > 0 ? [`(${dropped} older tool result${dropped === 1 ? '' : 's'} not shown)`] : []),
    ...lines,
  ].join('\n');
}
