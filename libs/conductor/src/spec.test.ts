import { InputError } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { checkConductorSpec, parseConductorSpec, parseConductorSpecs, type ConductorSpec } from './spec.ts';

function inputError(f: () => unknown): InputError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toBe('conductor');
    return e as InputError;
  }
  throw new Error('expected an InputError');
}

describe('parseConductorSpec', () => {
  it('reads every form into a typed spec with its canonical text', () => {
    expect(parseConductorSpec('llm:gpt-4o')).toEqual({ kind: 'llm', spec: 'llm:gpt-4o', model: 'gpt-4o' });
    expect(parseConductorSpec('llm:vllm:Qwen/Qwen3-8B')).toEqual({ kind: 'llm', spec: 'llm:vllm:Qwen/Qwen3-8B', model: 'vllm:Qwen/Qwen3-8B' });
    expect(parseConductorSpec('policy:ckpt-7')).toEqual({ kind: 'policy', spec: 'policy:ckpt-7', checkpoint: 'ckpt-7' });
    expect(parseConductorSpec('fixed:single:llama-8b')).toEqual({ kind: 'fixed', spec: 'fixed:single:llama-8b', topology: 'single', worker: 'llama-8b' });
    expect(parseConductorSpec('fixed:router:r1')).toEqual({ kind: 'fixed', spec: 'fixed:router:r1', topology: 'router', checkpoint: 'r1' });
    expect(parseConductorSpec('fixed:moa:3')).toEqual({ kind: 'fixed', spec: 'fixed:moa:3', topology: 'moa', n: 3 });
    expect(parseConductorSpec('  fixed:moa:03 ')).toEqual({ kind: 'fixed', spec: 'fixed:moa:3', topology: 'moa', n: 3 });
    expect(parseConductorSpec('fixed:chain')).toEqual({ kind: 'fixed', spec: 'fixed:chain', topology: 'chain' });
  });

  it('names the spec and what is wrong', () => {
    const cases: Array<[string, RegExp]> = [
      ['', /empty conductor spec/],
      ['gpt-4o', /conductor spec "gpt-4o": unknown kind "gpt-4o" \(known kinds: llm, policy, fixed/],
      ['oracle:x', /conductor spec "oracle:x": unknown kind "oracle"/],
      ['llm', /conductor spec "llm": missing worker or endpoint name/],
      ['llm:', /conductor spec "llm:": missing worker or endpoint name/],
      ['llm:a b', /conductor spec "llm:a b": worker or endpoint name .* "a b" must not contain whitespace/],
      ['policy:', /conductor spec "policy:": missing checkpoint id/],
      ['fixed', /conductor spec "fixed": missing topology .*known topologies: single, router, moa, chain/],
      ['fixed:star', /conductor spec "fixed:star": unknown topology "star" \(known topologies: single, router, moa, chain\)/],
      ['fixed:single', /conductor spec "fixed:single": missing worker name/],
      ['fixed:single:', /conductor spec "fixed:single:": missing worker name/],
      ['fixed:router', /conductor spec "fixed:router": missing router checkpoint id/],
      ['fixed:moa', /conductor spec "fixed:moa": missing number of proposers/],
      ['fixed:moa:x', /conductor spec "fixed:moa:x": number of proposers "x" is not a whole number/],
      ['fixed:moa:2.5', /number of proposers "2.5" is not a whole number/],
      ['fixed:moa:-1', /number of proposers "-1" is not a whole number/],
      ['fixed:moa:0', /conductor spec "fixed:moa:0": number of proposers 0 is out of range \(n >= 1\)/],
      ['fixed:chain:2', /conductor spec "fixed:chain:2": fixed:chain takes no argument, got "2"/],
      ['llm:a,llm:b', /one spec expected; parseConductorSpecs reads a comma list/],
    ];
    for (const [text, re] of cases) expect(inputError(() => parseConductorSpec(text)).message, text).toMatch(re);
  });
});

describe('parseConductorSpecs', () => {
  it('reads a comma list in order', () => {
    expect(parseConductorSpecs('llm:a, fixed:moa:2,fixed:chain').map((s) => s.spec)).toEqual(['llm:a', 'fixed:moa:2', 'fixed:chain']);
    expect(parseConductorSpecs('policy:p')).toEqual([{ kind: 'policy', spec: 'policy:p', checkpoint: 'p' }]);
  });
  it('rejects empty entries, duplicates and a bad entry, naming it', () => {
    expect(inputError(() => parseConductorSpecs('')).message).toMatch(/empty conductor spec list/);
    expect(inputError(() => parseConductorSpecs('llm:a,,fixed:chain')).message).toMatch(/entry 2 is empty/);
    expect(inputError(() => parseConductorSpecs('llm:a,')).message).toMatch(/entry 2 is empty/);
    expect(inputError(() => parseConductorSpecs('fixed:moa:2,fixed:moa:02')).message).toMatch(/fixed:moa:2 appears twice/);
    expect(inputError(() => parseConductorSpecs('llm:a,fixed:tree')).message).toMatch(/"fixed:tree": unknown topology "tree"/);
  });
});

describe('checkConductorSpec', () => {
  const workers = ['gpt-4o', 'llama-8b', 'qwen-7b'];
  const ok = (text: string, ctx: Parameters<typeof checkConductorSpec>[1] = { workers }): void => checkConductorSpec(parseConductorSpec(text), ctx);
  const fault = (text: string, ctx: Parameters<typeof checkConductorSpec>[1] = { workers }): string => inputError(() => ok(text, ctx)).message;

  it('accepts specs the pool can run', () => {
    for (const s of ['llm:gpt-4o', 'policy:p', 'fixed:single:qwen-7b', 'fixed:router:r', 'fixed:moa:1', 'fixed:moa:3', 'fixed:chain']) expect(() => ok(s)).not.toThrow();
    expect(() => ok('llm:vllm-qwen', { workers, endpoints: ['vllm-qwen'] })).not.toThrow();
    expect(() => ok('fixed:moa:3', { workers: [...workers, 'w4', 'w5'], maxSteps: 4 })).not.toThrow();
  });
  it('names an unknown worker and lists the pool', () => {
    expect(fault('fixed:single:claude')).toMatch(/conductor spec "fixed:single:claude": unknown worker "claude" \(the pool has gpt-4o, llama-8b, qwen-7b\)/);
    expect(fault('llm:claude')).toMatch(/unknown worker or endpoint "claude" \(the pool has gpt-4o, llama-8b, qwen-7b; no endpoints are configured\)/);
    expect(fault('llm:claude', { workers, endpoints: ['vllm-qwen'] })).toMatch(/endpoints: vllm-qwen/);
    expect(fault('fixed:single:x', { workers: [] })).toMatch(/the pool is empty/);
  });
  it('bounds moa by maxSteps - 1 and the pool size', () => {
    const big = { workers: ['a', 'b', 'c', 'd', 'e', 'f'] };
    expect(() => ok('fixed:moa:4', big)).not.toThrow();
    expect(fault('fixed:moa:5', big)).toMatch(/"fixed:moa:5": number of proposers 5 is out of range: at most maxSteps - 1 = 4/);
    expect(fault('fixed:moa:2', { ...big, maxSteps: 2 })).toMatch(/at most maxSteps - 1 = 1/);
    expect(fault('fixed:moa:4')).toMatch(/the pool has only 3 workers/);
  });
  it('needs two workers and two steps for a chain', () => {
    expect(fault('fixed:chain', { workers: ['a'] })).toMatch(/"fixed:chain": needs two workers \(a solver and a verifier\); the pool has a/);
    expect(fault('fixed:chain', { workers, maxSteps: 1 })).toMatch(/needs 2 steps, more than maxSteps = 1/);
  });
  it('rejects a bad maxSteps', () => {
    const spec: ConductorSpec = parseConductorSpec('fixed:chain');
    expect(() => checkConductorSpec(spec, { workers, maxSteps: 0 })).toThrow(/maxSteps must be an integer/);
  });
});
