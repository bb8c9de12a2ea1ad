import { InputError } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { conductorExamples, fill, loadPromptTemplate, parseTemplate, promptVersions, renderConductorPrompt, renderWorkerPrompt } from './prompts.ts';
import { parseWorkflow } from './text.ts';
import { conductorPool, type Workflow } from './workflow.ts';

const workflow: Workflow = {
  steps: [
    { worker: 2, subtask: 'Solve the equation.', access: 'none' },
    { worker: 0, subtask: 'Solve it by another method.', access: 'none' },
    { worker: 1, subtask: 'Compare the answers of steps 0 and 1 and give the final answer.', access: 'all' },
  ],
};

describe('templates', () => {
  it('ships versioned worker and conductor templates', () => {
    expect(promptVersions()).toEqual(expect.arrayContaining(['conductor-v1', 'worker-v1']));
    const t = loadPromptTemplate('worker-v1');
    expect(t.version).toBe('worker-v1');
    expect(t.sections.map((s) => s.name)).toEqual(expect.arrayContaining(['user', 'context', 'no-context', 'visible-step']));
  });
  it('rejects unknown versions and path tricks', () => {
    expect(() => loadPromptTemplate('worker-v9')).toThrow(/unknown prompt template "worker-v9"; known: .*worker-v1/);
    expect(() => loadPromptTemplate('../package')).toThrow(InputError);
  });
  it('fills placeholders once, never re-reading inserted text, and names a missing value', () => {
    expect(fill('t', 'a {{x}} b', { x: '{{y}}' })).toBe('a {{y}} b');
    expect(() => fill('t', '{{x}} {{z}}', { x: 1 })).toThrow(/no value for \{\{z\}\}/);
    expect(parseTemplate('t', 'note\n=== a ===\n\nline 1\n  line 2\n\n=== b ===\nx\n').sections).toEqual([
      { name: 'a', body: 'line 1\n  line 2' },
      { name: 'b', body: 'x' },
    ]);
  });
});

describe('renderWorkerPrompt', () => {
  it('gives the task, the visible steps marked by agent, then the step own subtask, with the version', () => {
    const p = renderWorkerPrompt({ question: 'Solve x^2 = 4.', workflow, step: 2, answers: new Map([[0, 'x = 2 or x = -2'], [1, 'x = ±2']]) });
    expect(p.version).toBe('worker-v1');
    expect(p.messages).toHaveLength(1);
    const text = p.messages[0]!.content as string;
    expect(p.messages[0]!.role).toBe('user');
    const order = ['Solve x^2 = 4.', 'Agent 2 (step 0) was asked:\nSolve the equation.\nIt answered:\nx = 2 or x = -2', 'Agent 0 (step 1) was asked:\nSolve it by another method.\nIt answered:\nx = ±2', 'Agent 1, step 2', 'Compare the answers of steps 0 and 1'];
    const at = order.map((s) => text.indexOf(s));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
  });
  it('shows only the steps the access list names', () => {
    const wf: Workflow = { steps: [...workflow.steps.slice(0, 2), { worker: 1, subtask: 'Check step 1.', access: [1] }] };
    const text = renderWorkerPrompt({ question: 'Q', workflow: wf, step: 2, answers: ['A0', 'A1'] }).messages[0]!.content as string;
    expect(text).toContain('A1');
    expect(text).not.toContain('A0');
  });
  it('a step that sees nothing says so; a visible step without an answer is an InputError', () => {
    const text = renderWorkerPrompt({ question: 'Q', workflow, step: 0, answers: [] }).messages[0]!.content as string;
    expect(text).toContain('You see no other agent');
    expect(text).not.toContain('It answered');
    expect(() => renderWorkerPrompt({ question: 'Q', workflow, step: 2, answers: ['A0'] })).toThrow(/sees step 2, which has no answer/);
    expect(() => renderWorkerPrompt({ question: 'Q', workflow, step: 3, answers: [] })).toThrow(InputError);
  });
  it('inserts a question with placeholder-like text verbatim', () => {
    const text = renderWorkerPrompt({ question: 'What is {{subtask}}?', workflow, step: 0, answers: [] }).messages[0]!.content as string;
    expect(text).toContain('What is {{subtask}}?');
  });
});

describe('renderConductorPrompt', () => {
  const pool = conductorPool([
    { name: 'gpt-4o', description: 'strong at reasoning and code' },
    { name: 'llama-8b', description: 'small, fast, cheap' },
    { name: 'qwen-72b', description: 'strong at math' },
  ]);
  it('lists the numbered workers by description (no names), the maximum steps and the format', () => {
    const p = renderConductorPrompt({ question: 'What is 17 * 23?', pool, maxSteps: 4 });
    expect(p.version).toBe('conductor-v1');
    const [system, user] = p.messages;
    expect(system!.role).toBe('system');
    const s = system!.content as string;
    expect(s).toContain('0: strong at reasoning and code\n1: small, fast, cheap\n2: strong at math');
    expect(s).not.toContain('gpt-4o');
    expect(s).toContain('1 to 4 steps');
    expect(s).toContain('(0 to 2)');
    for (const l of ['model id = [', 'subtasks = [', 'access list = [']) expect(s).toContain(l);
    expect(user).toEqual({ role: 'user', content: 'What is 17 * 23?' });
  });
  it('every worked example parses for any pool size, and examples over the maximum are left out', () => {
    for (const k of [1, 2, 3, 7]) {
      const ex = conductorExamples('conductor-v1', k);
      expect(ex.length).toBeGreaterThanOrEqual(3);
      for (const e of ex) expect(parseWorkflow(e.text, { poolSize: k, maxSteps: 10 }).ok).toBe(true);
    }
    const one = renderConductorPrompt({ question: 'q', pool, maxSteps: 1 }).messages[0]!.content as string;
    expect(one.match(/model id = \[\d/g)).toHaveLength(1);
    const five = renderConductorPrompt({ question: 'q', pool }).messages[0]!.content as string;
    expect(five.match(/model id = \[\d/g)!.length).toBe(conductorExamples('conductor-v1', 3).length);
    expect(() => renderConductorPrompt({ question: 'q', pool, maxSteps: 0 })).toThrow(/maxSteps/);
  });
  it('the prompt as a whole parses to the last example: the format the Conductor is shown is the one the parser reads', () => {
    const s = renderConductorPrompt({ question: 'q', pool }).messages[0]!.content as string;
    expect(parseWorkflow(s, { poolSize: 3 }).ok).toBe(true);
  });
});
