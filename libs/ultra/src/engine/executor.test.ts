// The one executor on its own, with a step runner answering in this process: the dataflow order,
// the stop rules and the tool turns, as every path (conduct jobs, GRPO rollouts, serving) gets them.
import { conductorPool, renderWorkflow, type Workflow } from '@fugu/conductor';
import type { ChatResult } from '@fugu/core';
import type { StoredWorker } from '@fugu/db';
import { describe, expect, it } from 'vitest';
import { endedStepRows, endSteps, finishOf, newStepsState, runSteps, type StepCall, type StepOutcome, type StepsContext } from './executor.ts';
import { validateWorkflowOptions, type WorkflowOptions } from './options.ts';
import { planWorkflow } from './plan.ts';

const workers: StoredWorker[] = ['alpha', 'beta', 'gamma'].map((name, i) => ({
  id: 10 + i, poolId: 1, name, provider: 'openai-compatible', model: name, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '1' },
}));
const pool = conductorPool(workers.map((w) => ({ name: w.name, description: w.name })));

// two proposers (alpha, beta) that see nothing, a third step (gamma) that sees both, and a fourth (alpha) that sees only step 0
const moa: Workflow = {
  steps: [
    { worker: 0, subtask: 'propose A', access: 'none' },
    { worker: 1, subtask: 'propose B', access: 'none' },
    { worker: 2, subtask: 'combine', access: [0, 1] },
    { worker: 0, subtask: 'check A', access: [0] },
  ],
};

function stateOf(w: Workflow, options: Partial<WorkflowOptions> = {}) {
  const plan = planWorkflow({ text: renderWorkflow(w), costPico: 0n }, pool, 5);
  if (!plan.ok) throw new Error(plan.error.message);
  return newStepsState(plan, { task: 'What is 6 * 7?', workers, itemId: null, seed: 0, options: validateWorkflowOptions({ maxSteps: 5, ...options }) });
}

const answer = (text: string, o: Partial<ChatResult> = {}): ChatResult => ({
  text, toolCalls: [], usage: { inputTokens: 10, outputTokens: 5 }, finishReason: 'stop', model: 'm', content: [{ type: 'text', text }], ...o,
});

/** A runner whose calls are answered in the order the test releases them; it records the batches it was given. */
function manualRunner() {
  const batches: number[][] = [];
  const open = new Map<number, (o: StepOutcome) => void>();
  const calls = new Map<number, StepCall>();
  const run: StepsContext['run'] = (cs) => {
    batches.push(cs.map((c) => c.step));
    return cs.map((c) => {
      c.agent.lastKey = `wf1.s${c.step}`;
      calls.set(c.step, c);
      return new Promise<StepOutcome>((resolve) => open.set(c.step, resolve));
    });
  };
  const release = async (step: number, o: StepOutcome): Promise<void> => {
    for (let i = 0; i < 50 && !open.has(step); i++) await new Promise((r) => setTimeout(r, 1));
    const r = open.get(step);
    if (!r) throw new Error(`step ${step} was never started`);
    open.delete(step);
    r(o);
  };
  return { run, batches, calls, release, started: () => [...calls.keys()] };
}

const ctxOf = (run: StepsContext['run'], o: Partial<StepsContext> = {}): StepsContext => ({ workflowId: 1, workerOf: (i) => workers.find((w) => w.id === stateOf(moa).workerIds[i])!, run, resumable: false, ...o });

describe('the one executor (runSteps)', () => {
  it('dataflow: a step starts as soon as the steps it sees have answered, not when its level has; steps ready together go to the runner together', async () => {
    const state = stateOf(moa);
    const r = manualRunner();
    const done = runSteps(state, ctxOf(r.run));
    await r.release(0, { ok: true, result: answer('alpha-says-41'), cost: 1_000n });
    // step 3 reads only step 0: it starts while step 1 is still in flight; step 2 waits for both
    await r.release(3, { ok: true, result: answer('A checked'), cost: 1_000n });
    expect(r.started()).not.toContain(2);
    await r.release(1, { ok: true, result: answer('beta-says-42'), cost: 1_000n });
    await r.release(2, { ok: true, result: answer('42'), cost: 1_000n });
    const run = await done;
    expect(r.batches).toEqual([[0, 1], [3], [2]]);
    // step 2's prompt holds the answers it may see (0 and 1), step 3's only step 0's
    const prompt = (i: number) => JSON.stringify(r.calls.get(i)!.request.messages);
    expect(prompt(2)).toContain('alpha-says-41');
    expect(prompt(2)).toContain('beta-says-42');
    expect(prompt(3)).toContain('alpha-says-41');
    expect(prompt(3)).not.toContain('beta-says-42');
    expect(run.ended).toBeUndefined();
    expect(finishOf(state, run)).toBe('answered');
    expect(run.tally).toEqual({ inputTokens: 40, outputTokens: 20, cost: 4_000n });
    expect(endedStepRows(1, state).map((s) => [s.idx, s.status, s.answer])).toEqual([[0, 'ok', 'alpha-says-41'], [1, 'ok', 'beta-says-42'], [2, 'ok', '42'], [3, 'ok', 'A checked']]);
  });

  it('budget-usd: once the steps have spent options.maxUsd no step starts; the steps in flight are recorded, the rest skipped', async () => {
    const state = stateOf(moa, { maxUsd: '0.000001' }); // 1,000,000 picodollars
    const r = manualRunner();
    const done = runSteps(state, ctxOf(r.run));
    await r.release(0, { ok: true, result: answer('A'), cost: 1_000_000n });
    // step 3 is ready now, but the budget is spent: it never starts; step 1 (in flight) is still recorded
    await r.release(1, { ok: true, result: answer('B'), cost: 5n });
    const run = await done;
    expect(r.started().sort()).toEqual([0, 1]);
    expect(run.ended).toBe('budget-usd');
    endSteps(state, run.ended);
    expect(finishOf(state, run)).toBe('budget-usd');
    expect(state.agents.map((a) => a.status)).toEqual(['done', 'done', 'skipped', 'skipped']);
  });

  it("budget-tokens: a step cut at maxTokensPerStep ends the workflow (its readers would read a cut answer); every call is bounded by it", async () => {
    const state = stateOf(moa, { maxTokensPerStep: 7 });
    const r = manualRunner();
    const done = runSteps(state, ctxOf(r.run));
    await r.release(0, { ok: true, result: answer('A, cut', { finishReason: 'length' }), cost: 1n });
    await r.release(1, { ok: true, result: answer('B'), cost: 1n });
    const run = await done;
    expect([...r.calls.values()].map((c) => c.request.maxTokens)).toEqual([7, 7]);
    expect(run.ended).toBe('budget-tokens');
    expect(r.started().sort()).toEqual([0, 1]);
  });

  it('a failed step: an error that ends the workflow (a job, a batch line), or a call to make again (a served request that can be resumed)', async () => {
    for (const resumable of [false, true]) {
      const state = stateOf(moa);
      const r = manualRunner();
      const done = runSteps(state, ctxOf(r.run, { resumable }));
      await r.release(1, { ok: false, error: { code: 'provider-error', message: 'HTTP 503' } });
      await r.release(0, { ok: true, result: answer('A'), cost: 1n });
      const run = await done;
      expect(run.ended).toBe('step-error');
      expect(run.failed).toEqual({ step: 1, resumable });
      // nothing starts once it has ended (step 3 was ready after step 0)
      expect(r.started().sort()).toEqual([0, 1]);
      expect(state.agents[1]!.status).toBe(resumable ? 'call' : 'error');
      expect(state.agents[1]!.attempt).toBe(resumable ? 2 : 1);
    }
    // a provider's 400 is the request's own: never resumable
    const state = stateOf(moa);
    const r = manualRunner();
    const done = runSteps(state, ctxOf(r.run, { resumable: true }));
    await r.release(0, { ok: false, error: { code: 'provider-bad-request', message: 'bad tools' } });
    await r.release(1, { ok: true, result: answer('B'), cost: 1n });
    expect((await done).failed).toEqual({ step: 0, resumable: false });
  });

  it('tools: an agent that asks for the client tools waits with signed ids; a forced tool_choice holds for its first call only; past its tool-turn bound its step ends budget-tool-turns', async () => {
    const single: Workflow = { steps: [{ worker: 1, subtask: 'solve', access: 'none' }] };
    const tools = [{ name: 'weather', description: 'the weather', parameters: { type: 'object', properties: {} } }];
    const call = answer('', { toolCalls: [{ id: 'agent-1', name: 'weather', arguments: '{}' }], finishReason: 'tool-calls' });
    const state = stateOf(single);
    const r = manualRunner();
    const ctx = ctxOf(r.run, { workerOf: () => workers[1]!, request: { tools, toolChoice: 'required' }, toolTurns: { perAgent: 1, perWorkflow: 5 }, signCall: (step, seq) => `call_fu_${step}_${seq}` });
    let done = runSteps(state, ctx);
    await r.release(0, { ok: true, result: call, cost: 1n });
    expect(r.calls.get(0)!.request.toolChoice).toBe('required');
    expect((await done).ended).toBeUndefined();
    expect(state.agents[0]!.status).toBe('tools');
    expect(state.agents[0]!.pending.map((p) => [p.id, p.agentCallId])).toEqual([['call_fu_0_1', 'agent-1']]);
    // the client's results: the agent calls again, asks for tools again, and is past its bound
    state.agents[0]!.messages.push({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'agent-1', name: 'weather', content: 'sunny' }] });
    state.agents[0]!.status = 'call';
    done = runSteps(state, ctx);
    await r.release(0, { ok: true, result: { ...call, text: 'it is sunny, I think' }, cost: 1n });
    // with its results, a forced tool choice is `auto` again: the agent may answer
    expect(r.calls.get(0)!.request.toolChoice).toBe('auto');
    const run = await done;
    expect(state.agents[0]!.finish).toBe('budget-tool-turns');
    expect(finishOf(state, run)).toBe('budget-tool-turns');
  });
});
