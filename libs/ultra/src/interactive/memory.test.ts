import { describe, expect, it } from 'vitest';
import { renderToolMemory } from './memory.ts';

const entry = (seq: number, result = `result ${seq}`) => ({ seq, workflowId: 1, step: 0, name: 'lookup', arguments: `{"q":${seq}}`, result });

describe('the shared tool memory an agent is shown', () => {
  it('keeps the newest entries within the entry limit, oldest first, and counts what it left out', () => {
    const text = renderToolMemory([1, 2, 3, 4, 5].map((s) => entry(s)), 12, { maxEntries: 3, maxChars: 10_000 });
    const lines = text.split('\n');
    expect(lines[1]).toBe('(9 older tool results not shown)');
    expect(lines.slice(2)).toEqual(['- lookup({"q":3}) returned: result 3', '- lookup({"q":4}) returned: result 4', '- lookup({"q":5}) returned: result 5']);
  });

  it('drops the oldest entries to fit the character limit, and cuts a long result', () => {
    const long = 'x'.repeat(5000);
    const text = renderToolMemory([entry(1), entry(2, long), entry(3)], 3, { maxEntries: 50, maxChars: 300 });
    expect(text).not.toContain('result 1');
    expect(text).toContain('result 3');
    expect(text).toContain(`${'x'.repeat(200)}... [4800 more characters]`);
    expect(text).toContain('(1 older tool result not shown)');
  });

  it('shows nothing when there is nothing, or when the limits allow nothing', () => {
    expect(renderToolMemory([], 0, { maxEntries: 5, maxChars: 100 })).toBe('');
    expect(renderToolMemory([entry(1)], 1, { maxEntries: 0, maxChars: 100 })).toBe('');
    expect(renderToolMemory([entry(1)], 1, { maxEntries: 5, maxChars: 5 })).toBe('');
  });
});
