// Which ONNX Runtime execution provider the router model runs on ('cpu' | 'cuda' | 'auto'), and
// how many ONNX Runtime threads a session gets when several run at once.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { ConfigError } from '@fugu/core';

export type ExecutionProviderSetting = 'cpu' | 'cuda' | 'auto';

export type ResolvedExecution = {
  provider: 'cpu' | 'cuda';
  /** what ONNX Runtime gets (CUDA falls back to CPU for ops it lacks) */
  executionProviders: Array<'cpu' | 'cuda'>;
  /** one line for the log: which provider and why */
  reason: string;
};

/** onnxruntime-node's native binding folder (bin/napi-v6/<platform>/<arch>), where the CUDA provider library must lie. */
export function onnxBindingDir(): string {
  const pkgJson = createRequire(import.meta.url).resolve('onnxruntime-node/package.json');
  return path.join(path.dirname(pkgJson), 'bin', 'napi-v6', process.platform, process.arch);
}

export const CUDA_PROVIDER_LIBRARY = 'libonnxruntime_providers_cuda.so';

/**
 * cpu: always CPU. cuda: CUDA, an error when the provider library is missing. auto: CUDA when
 * `libonnxruntime_providers_cuda.so` lies next to onnxruntime-node's binding, else CPU.
 */
export function resolveExecutionProvider(setting: ExecutionProviderSetting = 'auto', opts: { bindingDir?: string; exists?: (file: string) => boolean } = {}): ResolvedExecution {
  const dir = opts.bindingDir ?? onnxBindingDir();
  const exists = opts.exists ?? existsSync;
  const lib = path.join(dir, CUDA_PROVIDER_LIBRARY);
  const cpu = (reason: string): ResolvedExecution => ({ provider: 'cpu', executionProviders: ['cpu'], reason });
  const cuda = (reason: string): ResolvedExecution => ({ provider: 'cuda', executionProviders: ['cuda', 'cpu'], reason });
  switch (setting) {
    case 'cpu':
      return cpu('CPU execution provider (configured: executionProvider cpu)');
    case 'cuda':
      if (!exists(lib)) {
        throw new ConfigError(
          `invalid configuration: FUGU_ROUTER_EXECUTION_PROVIDER: cuda, but ${lib} is missing (install it with \`ONNXRUNTIME_NODE_INSTALL=cuda12 npm rebuild onnxruntime-node\`, or use auto/cpu)`,
          'FUGU_ROUTER_EXECUTION_PROVIDER',
        );
      }
      return cuda(`CUDA execution provider (configured: executionProvider cuda; ${lib})`);
    case 'auto':
      return exists(lib)
        ? cuda(`CUDA execution provider (auto: found ${lib})`)
        : cpu(`CPU execution provider (auto: no ${CUDA_PROVIDER_LIBRARY} in ${dir}; see docs/architecture.md "9 Serving" for a GPU image)`);
    default:
      throw new ConfigError(`invalid configuration: FUGU_ROUTER_EXECUTION_PROVIDER: expected cpu, cuda or auto, got ${String(setting)}`, 'FUGU_ROUTER_EXECUTION_PROVIDER');
  }
}

/** ONNX Runtime threads per session when `sessions` run at once: max(1, floor(cores / sessions)). */
export function threadsPerSession(sessions: number, cores: number = availableParallelism()): number {
  return Math.max(1, Math.floor(cores / Math.max(1, sessions)));
}

