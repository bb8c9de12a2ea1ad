import { InputError } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { FIXED_SUBTASKS, FIXED_SUBTASKS_VERSION, fixedWorkflow, type FixedWorkflowInput } from './fixed.ts';
import { scheduleOf } from './schedule.ts';
import { parseConductorSpec, type FixedConductorSpec } from './spec.ts';
import { parseWorkflow, renderWorkflow } from './text.ts';
import { checkWorkflow, conductorPool, sameWorkflow, type Workflow } from './workflow.ts';

const pool = conductorPool(['gpt-4o', 'llama-8b', 'qwen-7b', 'mistral-7b'].map((name) => ({ name, description: `${name} model` })));
// ids: gpt-4o 0, llama-8b 1, qwen-7b 2, mistral-7b 3; best first by training mean:
const ranking = ['qwen-7b', 'gpt-4o', 'mistral-7b', 'llama-8b'];
const question = 'What is 2 + 2? Answer "4" or \'four\'.';

function fixed(text: string, over: Partial<FixedWorkflowInput> = {}): Workflow {
  return fixedWorkflow(parseConductorSpec(text) as FixedConductorSpec, { pool, ranking, question, ...over });
}

function inputError(f: () => unknown, field: string): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toBe(field);
    return (e as InputError).message;
  }
  throw new Error('expected an InputError');
}

function expectValidAndRoundTrips(w: Workflow, maxSteps = 5): void {
  expect(checkWorkflow(w, { poolSize: pool.workers.length, maxSteps })).toBeUndefined();
  const parsed = parseWorkflow(renderWorkflow(w), { poolSize: pool.workers.length, maxSteps });
  expect(parsed.ok).toBe(true);
  if (parsed.ok) expect(sameWorkflow(parsed.workflow, w)).toBe(true);
}

describe('fixedWorkflow', () => {
  it('single: one step with the named worker, the question embedded', () => {
    const w = fixed('fixed:single:llama-8b');
    expect(w.steps).toEqual([{ worker: 1, subtask: FIXED_SUBTASKS.solve.replace('{{question}}', question), access: 'none' }]);
    expect(w.steps[0]!.subtask).toContain(question);
    expect(scheduleOf(w).topology).toBe('single');
    expectValidAndRoundTrips(w);
  });

  it("router: one step with the router's choice", () => {
    const w = fixed('fixed:router:r1', { routerChoice: 'mistral-7b' });
    expect(w.steps.map((s) => [s.worker, s.access])).toEqual([[3, 'none']]);
    expectValidAndRoundTrips(w);
  });

  it('moa:n: the n best solve independently, the best aggregates with access to all', () => {
    const w = fixed('fixed:moa:3');
    expect(w.steps.map((s) => [s.worker, s.access])).toEqual([
      [2, 'none'],
      [0, 'none'],
      [3, 'none'],
      [2, 'all'],
    ]);
    expect(w.steps.slice(0, 3).every((s) => s.subtask === FIXED_SUBTASKS.propose.replace('{{question}}', question))).toBe(true);
    expect(w.steps[3]!.subtask).toBe(FIXED_SUBTASKS.aggregate.replace('{{question}}', question));
    expect(scheduleOf(w).topology).toBe('parallel');
    expectValidAndRoundTrips(w);
    const one = fixed('fixed:moa:1');
    expect(one.steps.map((s) => [s.worker, s.access])).toEqual([
      [2, 'none'],
      [2, 'all'],
    ]);
    expect(scheduleOf(one).topology).toBe('chain');
    expectValidAndRoundTrips(one);
    expectValidAndRoundTrips(fixed('fixed:moa:4'));
  });

  it('chain: the best solves, the second-best verifies with access to step 0', () => {
    const w = fixed('fixed:chain');
    expect(w.steps.map((s) => [s.worker, s.access])).toEqual([
      [2, 'none'],
      [0, [0]],
    ]);
    expect(w.steps[1]!.subtask).toBe(FIXED_SUBTASKS.verify.replace('{{question}}', question));
    expect(scheduleOf(w).topology).toBe('chain');
    expectValidAndRoundTrips(w);
  });

  it('round-trips questions that look like structure', () => {
    const nasty = [
      'model id = [0]\nsubtasks = ["x"]\naccess list = ["all"]',
      '<think>hidden</think> Compute \\frac{1}{2} \\neq \\times "quoted" \'single\' `tick` “smart”',
      'Tab\there, newline\nthere, {{question}} stays, unicode ∑ 😀 \u0000 end',
      ']]]]["[[',
    ];
    for (const q of nasty) {
      for (const text of ['fixed:single:gpt-4o', 'fixed:router:r', 'fixed:moa:2', 'fixed:moa:4', 'fixed:chain']) {
        const w = fixed(text, { question: q, routerChoice: 'gpt-4o' });
        expect(w.steps.every((s) => s.subtask.includes(q.trim()))).toBe(true);
        expectValidAndRoundTrips(w);
      }
    }
  });

  it('has a version for its wording', () => {
    expect(FIXED_SUBTASKS_VERSION).toBe('fixed-v1');
    for (const t of Object.values(FIXED_SUBTASKS)) expect(t).toContain('{{question}}');
  });

  it('names what is wrong', () => {
    expect(inputError(() => fixed('fixed:chain', { question: '  ' }), 'question')).toMatch(/fixed:chain: the question is empty/);
    expect(inputError(() => fixed('fixed:single:claude'), 'conductor')).toMatch(/fixed:single:claude: worker "claude" is not in the pool \(the pool has gpt-4o, llama-8b, qwen-7b, mistral-7b\)/);
    expect(inputError(() => fixed('fixed:router:r1'), 'routerChoice')).toMatch(/fixed:router:r1: no router choice given/);
    expect(inputError(() => fixed('fixed:router:r1', { routerChoice: 'claude' }), 'routerChoice')).toMatch(/router choice "claude" is not in the pool/);
    expect(inputError(() => fixed('fixed:moa:3', { ranking: ['qwen-7b', 'gpt-4o'] }), 'ranking')).toMatch(/fixed:moa:3: 3 proposers needs 3 ranked workers, the ranking has 2/);
    expect(inputError(() => fixed('fixed:chain', { ranking: ['qwen-7b'] }), 'ranking')).toMatch(/fixed:chain: a solver and a verifier needs 2 ranked workers, the ranking has 1/);
    expect(inputError(() => fixed('fixed:chain', { ranking: ['qwen-7b', 'claude'] }), 'ranking')).toMatch(/ranking entry 2, worker "claude" is not in the pool/);
    expect(inputError(() => fixed('fixed:chain', { ranking: ['qwen-7b', 'qwen-7b'] }), 'ranking')).toMatch(/ranking entry 2, worker "qwen-7b", appears twice/);
    expect(inputError(() => fixed('fixed:moa:3', { maxSteps: 3 }), 'conductor')).toMatch(/fixed:moa:3: 3 proposers and an aggregator are 4 steps, more than maxSteps = 3/);
    expect(inputError(() => fixed('fixed:chain', { maxSteps: 1 }), 'conductor')).toMatch(/a chain is 2 steps, more than maxSteps = 1/);
    expect(inputError(() => fixed('fixed:chain', { maxSteps: 11 }), 'maxSteps')).toMatch(/maxSteps must be an integer/);
  });
});
