// ONNX Runtime sessions: load model bytes, run with typed feeds, check an I/O contract.

import { InferenceSession, Tensor } from 'onnxruntime-node';
import { InputError } from '@fugu/core';
import { dtypeOf, type DType, type Dim, type TensorData } from './model.ts';

export interface SessionOptions {
  /** Default ['cpu']; e.g. ['cuda', 'cpu'] where the CUDA build is present. */
  executionProviders?: InferenceSession.ExecutionProviderConfig[];
  /** Threads inside one op (ONNX Runtime's default: one per physical core). */
  intraOpNumThreads?: number;
  interOpNumThreads?: number;
  /** Default 'all'. */
  graphOptimizationLevel?: 'disabled' | 'basic' | 'extended' | 'layout' | 'all';
  /** 0 verbose .. 4 fatal; default 3 (errors only), so warnings do not flood the logs. */
  logSeverityLevel?: 0 | 1 | 2 | 3 | 4;
  /** Names this model in errors (a file path or a backbone id). */
  label?: string;
  /** false: ONNX Runtime's thread pools sleep when idle instead of spinning (serving: a router
   *  process idles most of the time and shares the cores). Default: ONNX Runtime's (spinning on). */
  allowSpinning?: boolean;
}

/** A tensor to feed: the dtype follows the array unless given (pass 'bool' for a Uint8Array of 0/1). */
export interface Feed {
  data: TensorData;
  dims: readonly number[];
  dtype?: DType;
}

export interface FloatOutput {
  data: Float32Array;
  dims: number[];
}

export interface OutputTensor {
  dtype: string;
  data: Tensor['data'];
  dims: number[];
}

/** One expected input or output: a name, or a name with dtype and shape to check too. */
export type ContractEntry = string | { name: string; dtype?: DType; shape?: readonly Dim[] };

export interface Contract {
  inputs?: readonly ContractEntry[];
  outputs?: readonly ContractEntry[];
}

/** A model whose inputs/outputs do not meet what the caller needs; the message names each gap. */
export class ContractError extends InputError {
  readonly missingInputs: string[];
  readonly missingOutputs: string[];
  readonly mismatches: string[];
  constructor(label: string, missingInputs: string[], missingOutputs: string[], mismatches: string[]) {
    const parts = [
      missingInputs.length > 0 ? `missing input${missingInputs.length > 1 ? 's' : ''} ${missingInputs.join(', ')}` : '',
      missingOutputs.length > 0 ? `missing output${missingOutputs.length > 1 ? 's' : ''} ${missingOutputs.join(', ')}` : '',
      ...mismatches,
    ].filter(Boolean);
    super(`ONNX model breaks the contract: ${parts.join('; ')}`, { file: label });
    this.name = 'ContractError';
    this.missingInputs = missingInputs;
    this.missingOutputs = missingOutputs;
    this.mismatches = mismatches;
  }
}

/** An ONNX Runtime session with typed run helpers and named errors. */
export class OnnxSession {
  readonly session: InferenceSession;
  readonly label: string;
  private readonly inputMeta: Map<string, InferenceSession.ValueMetadata>;
  private readonly outputMeta: Map<string, InferenceSession.ValueMetadata>;

  constructor(session: InferenceSession, label = 'onnx model') {
    this.session = session;
    this.label = label;
    this.inputMeta = new Map(session.inputMetadata.map((m) => [m.name, m]));
    this.outputMeta = new Map(session.outputMetadata.map((m) => [m.name, m]));
  }

  get inputNames(): readonly string[] {
    return this.session.inputNames;
  }
  get outputNames(): readonly string[] {
    return this.session.outputNames;
  }

  /** Runs and returns float32 outputs (all, or those named); a non-float32 output is an error. */
  async run(feeds: Record<string, Feed>, outputs?: readonly string[]): Promise<Record<string, FloatOutput>> {
    const raw = await this.runTensors(feeds, outputs);
    const out: Record<string, FloatOutput> = {};
    for (const [name, t] of Object.entries(raw)) {
      if (!(t.data instanceof Float32Array)) throw new Error(`${this.label}: output ${name} is ${t.dtype}, not float32 (use runTensors)`);
      out[name] = { data: t.data, dims: t.dims };
    }
    return out;
  }

  /** Runs and returns outputs of any dtype. */
  async runTensors(feeds: Record<string, Feed>, outputs?: readonly string[]): Promise<Record<string, OutputTensor>> {
    const tensors: Record<string, Tensor> = {};
    for (const [name, feed] of Object.entries(feeds)) tensors[name] = this.toTensor(name, feed);
    for (const name of this.session.inputNames) if (!(name in feeds)) throw new Error(`${this.label}: input ${name} is not fed (inputs: ${this.session.inputNames.join(', ')})`);
    for (const name of outputs ?? []) if (!this.outputMeta.has(name)) throw new Error(`${this.label}: no output ${name} (outputs: ${this.session.outputNames.join(', ')})`);
    const result = outputs ? await this.session.run(tensors, outputs) : await this.session.run(tensors);
    const out: Record<string, OutputTensor> = {};
    for (const [name, v] of Object.entries(result)) {
      const t = v as Tensor;
      out[name] = { dtype: t.type, data: t.data, dims: [...t.dims] };
    }
    return out;
  }

  /** Throws a ContractError naming every missing or mismatched input/output. */
  checkContract(contract: Contract): void {
    checkContract(this.session, contract, this.label);
  }

  release(): Promise<void> {
    return this.session.release();
  }

  private toTensor(name: string, feed: Feed): Tensor {
    const where = `${this.label}: input ${name}`;
    const meta = this.inputMeta.get(name);
    if (!meta) throw new Error(`${where}: the model has no such input (inputs: ${this.session.inputNames.join(', ')})`);
    const dtype = feed.dtype ?? dtypeOf(feed.data);
    const n = feed.dims.reduce((a, b) => a * b, 1);
    if (feed.data.length !== n) throw new Error(`${where}: dims [${feed.dims.join(', ')}] need ${n} elements, data has ${feed.data.length}`);
    if (meta.isTensor) {
      if (meta.type !== dtype) throw new Error(`${where}: fed ${dtype}, the model expects ${meta.type}`);
      if (meta.shape.length > 0) {
        if (meta.shape.length !== feed.dims.length) throw new Error(`${where}: fed rank ${feed.dims.length} [${feed.dims.join(', ')}], the model expects [${meta.shape.join(', ')}]`);
        meta.shape.forEach((d, i) => {
          if (typeof d === 'number' && d >= 0 && d !== feed.dims[i]) throw new Error(`${where}: dim ${i} is ${feed.dims[i]}, the model expects [${meta.shape.join(', ')}]`);
        });
      }
    }
    return new Tensor(dtype, feed.data as Tensor.DataTypeMap[typeof dtype], feed.dims);
  }
}

/** Loads model bytes (or a file path) into a CPU session unless other providers are given. */
export async function createSession(model: Uint8Array | string, options: SessionOptions = {}): Promise<OnnxSession> {
  const opts: InferenceSession.SessionOptions = {
    executionProviders: options.executionProviders ?? ['cpu'],
    graphOptimizationLevel: options.graphOptimizationLevel ?? 'all',
    logSeverityLevel: options.logSeverityLevel ?? 3,
  };
  if (options.intraOpNumThreads !== undefined) opts.intraOpNumThreads = options.intraOpNumThreads;
  if (options.interOpNumThreads !== undefined) opts.interOpNumThreads = options.interOpNumThreads;
  if (options.allowSpinning !== undefined) {
    const spin = options.allowSpinning ? '1' : '0';
    opts.extra = { session: { intra_op: { allow_spinning: spin }, inter_op: { allow_spinning: spin } } };
  }
  const label = options.label ?? (typeof model === 'string' ? model : 'onnx model');
  try {
    const session = typeof model === 'string' ? await InferenceSession.create(model, opts) : await InferenceSession.create(model, opts);
    return new OnnxSession(session, label);
  } catch (err) {
    throw new Error(`${label}: ONNX Runtime could not load the model: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/** Checks a session's inputs/outputs against what the caller needs (names, and dtype/shape when
 *  given: a fixed expected dim must match; a symbolic expected dim must not be fixed in the model). */
export function checkContract(
  session: Pick<InferenceSession, 'inputMetadata' | 'outputMetadata'>,
  contract: Contract,
  label = 'onnx model',
): void {
  const mismatches: string[] = [];
  const check = (kind: 'input' | 'output', entries: readonly ContractEntry[], metas: readonly InferenceSession.ValueMetadata[]): string[] => {
    const byName = new Map(metas.map((m) => [m.name, m]));
    const missing: string[] = [];
    for (const e of entries) {
      const want = typeof e === 'string' ? { name: e } : e;
      const meta = byName.get(want.name);
      if (!meta) {
        missing.push(want.name);
        continue;
      }
      if (!meta.isTensor) {
        mismatches.push(`${kind} ${want.name} is not a tensor`);
        continue;
      }
      if (want.dtype && meta.type !== want.dtype) mismatches.push(`${kind} ${want.name} is ${meta.type}, expected ${want.dtype}`);
      if (want.shape && meta.shape.length > 0) {
        const got = `[${meta.shape.join(', ')}]`;
        const expected = `[${want.shape.map((d) => d ?? '?').join(', ')}]`;
        if (meta.shape.length !== want.shape.length) mismatches.push(`${kind} ${want.name} has shape ${got}, expected ${expected}`);
        else if (want.shape.some((d, i) => dimBreaks(d, meta.shape[i]!))) mismatches.push(`${kind} ${want.name} has shape ${got}, expected ${expected}`);
      }
    }
    return missing;
  };
  const missingInputs = check('input', contract.inputs ?? [], session.inputMetadata);
  const missingOutputs = check('output', contract.outputs ?? [], session.outputMetadata);
  if (missingInputs.length + missingOutputs.length + mismatches.length > 0) {
    throw new ContractError(label, missingInputs, missingOutputs, mismatches);
  }
}

function dimBreaks(expected: Dim, actual: number | string): boolean {
  if (expected === null) return false;
  const fixed = typeof actual === 'number' && actual >= 0;
  if (typeof expected === 'number') return fixed && actual !== expected;
  return fixed; // expected free (symbolic), but the model pins it
}
