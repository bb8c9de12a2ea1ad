// The execution-provider choice, without a GPU: the provider library's presence is injected.
import { describe, expect, it } from 'vitest';
import { CUDA_PROVIDER_LIBRARY, resolveExecutionProvider, threadsPerSession } from './execution.ts';

describe('execution providers', () => {
  it('auto picks CUDA only when its provider library lies next to the binding; cuda without it is an error', () => {
    const none = () => false;
    const all = () => true;
    expect(resolveExecutionProvider('auto', { bindingDir: '/b', exists: none })).toMatchObject({ provider: 'cpu', executionProviders: ['cpu'] });
    expect(resolveExecutionProvider('auto', { bindingDir: '/b', exists: all })).toMatchObject({ provider: 'cuda', executionProviders: ['cuda', 'cpu'] });
    expect(resolveExecutionProvider('auto', { bindingDir: '/b', exists: none }).reason).toContain(CUDA_PROVIDER_LIBRARY);
    expect(resolveExecutionProvider('cpu', { bindingDir: '/b', exists: all }).provider).toBe('cpu');
    expect(() => resolveExecutionProvider('cuda', { bindingDir: '/b', exists: none })).toThrow(/FUGU_ROUTER_EXECUTION_PROVIDER/);
    expect(threadsPerSession(3, 16)).toBe(5);
    expect(threadsPerSession(32, 16)).toBe(1);
  });
});
