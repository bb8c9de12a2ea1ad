// A small ONNX graph builder: values are handles, ops are generic (any op_type by string),
// names are unique and generated unless given, and `toModel()` validates before encoding.
//
//   const g = new GraphBuilder('head');
//   const x = g.input('x', 'float32', ['N', 512]);
//   const w = g.constant('w', weights, [512, 8]);
//   const y = g.op('Softmax', [g.matmul(x, w)], { axis: -1 });
//   g.output(y, 'y', 'float32', ['N', 8]);
//   const bytes = g.toModel({ producer: 'fugu' });
//
// Attributes: a bare integer is INT, an array of integers INTS, a string STRING; floats must be
// wrapped (`float(1e-5)`, `floats([...])`) so an INT is never sent where a FLOAT is meant, and a
// tensor is `tensor(...)`. Bare numbers for attribute names that are FLOAT in every standard op
// (epsilon, alpha, ...) are refused with a message that names the node; `int(...)` states an
// INT explicitly (for a custom-domain op whose `scale` is an integer, say).

import {
  DEFAULT_IR_VERSION,
  DEFAULT_OPSET,
  DTYPE_CODE,
  checkTensor,
  dtypeOf,
  encodeModel,
  type AttrValue,
  type DType,
  type Dim,
  type GraphSpec,
  type ModelSpec,
  type NodeSpec,
  type OpsetId,
  type TensorData,
  type TensorSpec,
  type ValueInfoSpec,
} from './model.ts';

// --- attribute helpers -----------------------------------------------------------------------

export const int = (value: number | bigint): AttrValue => ({ type: 'int', value });
export const float = (value: number): AttrValue => ({ type: 'float', value });
export const str = (value: string): AttrValue => ({ type: 'string', value });
export const ints = (value: readonly (number | bigint)[]): AttrValue => ({ type: 'ints', value: [...value] });
export const floats = (value: readonly number[]): AttrValue => ({ type: 'floats', value: [...value] });
export const strs = (value: readonly string[]): AttrValue => ({ type: 'strings', value: [...value] });
export const tensor = (data: TensorData, dims: readonly number[], dtype?: DType): AttrValue => ({
  type: 'tensor',
  value: { dtype: dtype ?? dtypeOf(data), dims: [...dims], data },
});

/** What `op()` accepts as an attribute: a typed AttrValue, or an unambiguous plain value. */
export type AttrInput = AttrValue | number | bigint | string | readonly number[] | readonly string[];
export type Attrs = Record<string, AttrInput>;

/** Attribute names that are FLOAT in every standard ONNX op: a bare number for them is a mistake. */
const FLOAT_ATTRS = new Set(['alpha', 'beta', 'gamma', 'epsilon', 'momentum', 'lambd', 'bias', 'ratio', 'scale', 'mean', 'seed', 'value_float']);

// --- values ----------------------------------------------------------------------------------

/** A handle to a named tensor of one graph (an input, an initializer or a node output). */
export class Value {
  readonly name: string;
  /** The builder that defined it: mixing values of two graphs is refused. */
  readonly graph: GraphBuilder;
  constructor(graph: GraphBuilder, name: string) {
    this.graph = graph;
    this.name = name;
  }
  toString(): string {
    return this.name;
  }
}

/** A node input: a Value, a name defined elsewhere in this graph, or null for an omitted optional input. */
export type InputRef = Value | string | null;

export interface OpOptions {
  /** Node name (default: `<OpType>_<k>`). */
  name?: string;
  /** Output names (default: `<node>_out`, or `<node>_out<i>` when there are several). */
  outputs?: string[];
  /** Operator set domain; '' (the default ONNX domain) unless set. */
  domain?: string;
}

export interface ToModelOptions {
  producer?: string;
  producerVersion?: string;
  docString?: string;
  metadata?: Record<string, string>;
  irVersion?: number;
  /** Default-domain opset version (DEFAULT_OPSET unless set). */
  opset?: number;
  /** Other operator sets, e.g. { domain: 'com.microsoft', version: 1 }. */
  extraOpsets?: OpsetId[];
}

export class GraphBuilder {
  readonly name: string;
  private readonly nodes: NodeSpec[] = [];
  private readonly initializers: TensorSpec[] = [];
  private readonly inputs: ValueInfoSpec[] = [];
  private readonly outputs: ValueInfoSpec[] = [];
  private readonly valueInfo: ValueInfoSpec[] = [];
  /** Every value and node name in use (ONNX keeps them in separate namespaces; one set is simpler). */
  private readonly taken = new Set<string>();
  private readonly counters = new Map<string, number>();

  constructor(name: string) {
    this.name = name;
  }

  // --- definitions ---------------------------------------------------------------------------

  /** A graph input; dims are sizes or symbolic names ('N'). */
  input(name: string, dtype: DType, shape: readonly Dim[]): Value {
    this.claim(name, `input ${name}`);
    this.inputs.push({ name, dtype, shape: [...shape] });
    return new Value(this, name);
  }

  /** An initializer. The dtype follows the array (Float32Array -> float32, BigInt64Array ->
   *  int64, Int32Array -> int32, Uint8Array -> uint8); pass 'bool' for a Uint8Array of 0/1. */
  constant(name: string, data: TensorData, dims: readonly number[], dtype?: DType): Value {
    const t: TensorSpec = { name, dtype: dtype ?? dtypeOf(data), dims: [...dims], data };
    checkTensor(t, `constant ${name}`);
    if (t.dtype === 'bool' && !(data as Uint8Array).every((b) => b === 0 || b === 1)) throw new Error(`constant ${name}: bool data must be 0 or 1`);
    this.claim(name, `constant ${name}`);
    this.initializers.push(t);
    return new Value(this, name);
  }

  /** An int64 initializer (shapes for Reshape, axes, indices): a scalar for a number, 1-D for an
   *  array unless dims say otherwise. */
  constInt64(values: number | bigint | readonly (number | bigint)[], dims?: readonly number[], name?: string): Value {
    const list = Array.isArray(values) ? (values as readonly (number | bigint)[]) : [values as number | bigint];
    for (const v of list) if (typeof v === 'number' && !Number.isSafeInteger(v)) throw new Error(`constInt64: ${v} is not an integer`);
    const data = BigInt64Array.from(list, (v) => BigInt(v));
    return this.constant(name ?? this.fresh('const_i64'), data, dims ?? (Array.isArray(values) ? [list.length] : []));
  }

  /** A float32 initializer: a scalar for a number, 1-D for an array unless dims say otherwise. */
  constFloat(values: number | readonly number[], dims?: readonly number[], name?: string): Value {
    const list = typeof values === 'number' ? [values] : values;
    return this.constant(name ?? this.fresh('const_f32'), Float32Array.from(list), dims ?? (typeof values === 'number' ? [] : [list.length]));
  }

  /** A bool initializer. */
  constBool(values: boolean | readonly boolean[], dims?: readonly number[], name?: string): Value {
    const list = typeof values === 'boolean' ? [values] : values;
    return this.constant(name ?? this.fresh('const_bool'), Uint8Array.from(list, (b) => (b ? 1 : 0)), dims ?? (typeof values === 'boolean' ? [] : [list.length]), 'bool');
  }

  /** A node with one output. */
  op(opType: string, inputs: readonly InputRef[], attrs: Attrs = {}, options: OpOptions = {}): Value {
    const [out] = this.ops(opType, inputs, attrs, 1, options);
    return out!;
  }

  /** A node with `nOutputs` outputs (Split, TopK, ...). */
  ops(opType: string, inputs: readonly InputRef[], attrs: Attrs = {}, nOutputs = 1, options: OpOptions = {}): Value[] {
    if (!opType) throw new Error('op: op_type must not be empty');
    const name = options.name ?? this.fresh(opType);
    const where = `node ${name} (${opType})`;
    if (!Number.isInteger(nOutputs) || nOutputs < 1) throw new Error(`${where}: nOutputs must be a positive integer, got ${nOutputs}`);
    if (options.outputs && options.outputs.length !== nOutputs) {
      throw new Error(`${where}: ${options.outputs.length} output names given for ${nOutputs} outputs`);
    }
    const inputNames = inputs.map((v, i) => {
      if (v === null) return '';
      if (v instanceof Value) {
        if (v.graph !== this) throw new Error(`${where}: input ${i} (${v.name}) belongs to graph ${v.graph.name}, not ${this.name}`);
        return v.name;
      }
      return v;
    });
    const attributes = Object.entries(attrs).map(([k, v]) => [k, toAttr(v, `${where}, attribute ${k}`, k)] as const);
    // Names are claimed only once the node is known to be well-formed.
    for (const o of options.outputs ?? []) {
      if (this.taken.has(o) || o === name || options.outputs!.indexOf(o) !== options.outputs!.lastIndexOf(o)) {
        throw new Error(`graph ${this.name}: ${where}: output ${o}: the name ${o} is already used`);
      }
    }
    this.claim(name, where);
    const outputNames: string[] = [];
    for (let i = 0; i < nOutputs; i++) {
      const o = options.outputs?.[i] ?? this.unique(nOutputs === 1 ? `${name}_out` : `${name}_out${i}`);
      this.claim(o, `${where}: output ${o}`);
      outputNames.push(o);
    }
    const node: NodeSpec = { opType, inputs: inputNames, outputs: outputNames, name };
    if (options.domain) node.domain = options.domain;
    if (attributes.length > 0) node.attributes = Object.fromEntries(attributes);
    this.nodes.push(node);
    return outputNames.map((o) => new Value(this, o));
  }

  /** Marks `value` as a graph output named `name` (an Identity is inserted if the names differ). */
  output(value: Value, name: string, dtype: DType, shape?: readonly Dim[]): Value {
    if (value.graph !== this) throw new Error(`output ${name}: value ${value.name} belongs to graph ${value.graph.name}`);
    if (this.outputs.some((o) => o.name === name)) throw new Error(`output ${name}: already an output of graph ${this.name}`);
    let out = value;
    if (value.name !== name) out = this.op('Identity', [value], {}, { outputs: [name] });
    const info: ValueInfoSpec = { name, dtype };
    if (shape) info.shape = [...shape];
    this.outputs.push(info);
    return out;
  }

  /** Records an intermediate value's type and shape (optional; helps tools that read the graph). */
  annotate(value: Value, dtype: DType, shape: readonly Dim[]): void {
    this.valueInfo.push({ name: value.name, dtype, shape: [...shape] });
  }

  // --- convenience for ops used everywhere ---------------------------------------------------

  matmul(a: InputRef, b: InputRef): Value {
    return this.op('MatMul', [a, b]);
  }
  add(a: InputRef, b: InputRef): Value {
    return this.op('Add', [a, b]);
  }
  sub(a: InputRef, b: InputRef): Value {
    return this.op('Sub', [a, b]);
  }
  mul(a: InputRef, b: InputRef): Value {
    return this.op('Mul', [a, b]);
  }
  div(a: InputRef, b: InputRef): Value {
    return this.op('Div', [a, b]);
  }
  /** Reshape to fixed dims (0 copies the input dim, -1 is inferred) or to a shape tensor. */
  reshape(x: InputRef, shape: readonly number[] | Value): Value {
    return this.op('Reshape', [x, shape instanceof Value ? shape : this.constInt64(shape)]);
  }
  transpose(x: InputRef, perm: readonly number[]): Value {
    return this.op('Transpose', [x], { perm: ints(perm) });
  }
  softmax(x: InputRef, axis = -1): Value {
    return this.op('Softmax', [x], { axis: int(axis) });
  }
  cast(x: InputRef, to: DType): Value {
    return this.op('Cast', [x], { to: int(DTYPE_CODE[to]) });
  }

  // --- output --------------------------------------------------------------------------------

  /** Checks the graph; throws an Error naming the first offending node or value. */
  validate(): void {
    const defined = new Set<string>();
    const define = (n: string, what: string): void => {
      if (!n) throw new Error(`graph ${this.name}: ${what} has an empty name`);
      if (defined.has(n)) throw new Error(`graph ${this.name}: ${what} redefines ${n}`);
      defined.add(n);
    };
    for (const i of this.inputs) define(i.name, `input ${i.name}`);
    for (const t of this.initializers) define(t.name!, `initializer ${t.name}`);
    const nodeNames = new Set<string>();
    for (const n of this.nodes) {
      const where = `node ${n.name} (${n.opType})`;
      if (!n.name) throw new Error(`graph ${this.name}: a ${n.opType} node has no name`);
      if (nodeNames.has(n.name)) throw new Error(`graph ${this.name}: duplicate node name ${n.name}`);
      nodeNames.add(n.name);
      n.inputs.forEach((i, k) => {
        if (i !== '' && !defined.has(i)) throw new Error(`graph ${this.name}: ${where} uses input ${k} '${i}', which is not defined before it`);
      });
      if (n.outputs.length === 0) throw new Error(`graph ${this.name}: ${where} has no outputs`);
      for (const o of n.outputs) define(o, `${where} output`);
    }
    if (this.outputs.length === 0) throw new Error(`graph ${this.name}: no outputs`);
    for (const o of this.outputs) if (!defined.has(o.name)) throw new Error(`graph ${this.name}: output ${o.name} is not produced by any node, input or initializer`);
  }

  /** The graph as a plain spec (validated). */
  toGraph(): GraphSpec {
    this.validate();
    const g: GraphSpec = {
      name: this.name,
      nodes: this.nodes,
      initializers: this.initializers,
      inputs: this.inputs,
      outputs: this.outputs,
    };
    if (this.valueInfo.length > 0) g.valueInfo = this.valueInfo;
    return g;
  }

  /** The encoded ModelProto bytes (validated). */
  toModel(options: ToModelOptions = {}): Uint8Array {
    return encodeModel(this.toModelSpec(options));
  }

  toModelSpec(options: ToModelOptions = {}): ModelSpec {
    const spec: ModelSpec = {
      irVersion: options.irVersion ?? DEFAULT_IR_VERSION,
      opsets: [{ domain: '', version: options.opset ?? DEFAULT_OPSET }, ...(options.extraOpsets ?? [])],
      graph: this.toGraph(),
    };
    if (options.producer !== undefined) spec.producerName = options.producer;
    if (options.producerVersion !== undefined) spec.producerVersion = options.producerVersion;
    if (options.docString !== undefined) spec.docString = options.docString;
    if (options.metadata !== undefined) spec.metadata = options.metadata;
    return spec;
  }

  // --- names ---------------------------------------------------------------------------------

  private claim(name: string, what: string): void {
    if (!name) throw new Error(`graph ${this.name}: ${what} needs a non-empty name`);
    if (this.taken.has(name)) throw new Error(`graph ${this.name}: ${what}: the name ${name} is already used`);
    this.taken.add(name);
  }

  /** `base` itself when free, else a fresh `<base>_<k>` (not claimed: the caller claims it). */
  private unique(base: string): string {
    return this.taken.has(base) ? this.fresh(base) : base;
  }

  /** A free name `<prefix>_<k>` (k counts per prefix, skipping names already taken; not claimed). */
  private fresh(prefix: string): string {
    let k = this.counters.get(prefix) ?? 0;
    while (this.taken.has(`${prefix}_${k}`)) k++;
    this.counters.set(prefix, k + 1);
    return `${prefix}_${k}`;
  }
}

function toAttr(v: AttrInput, where: string, name: string): AttrValue {
  if (typeof v === 'string') return str(v);
  if (typeof v === 'bigint') return int(v);
  if (typeof v === 'number') {
    if (FLOAT_ATTRS.has(name)) throw new Error(`${where}: ${name} is a FLOAT attribute; write float(${v})`);
    if (!Number.isSafeInteger(v)) throw new Error(`${where}: bare number ${v} is read as INT but is not an integer; write float(${v}) for a FLOAT`);
    return int(v);
  }
  if (Array.isArray(v)) {
    if (v.length === 0) throw new Error(`${where}: an empty bare array has no element type; write ints([]), floats([]) or strs([])`);
    if (v.every((x) => typeof x === 'string')) return strs(v as string[]);
    if (FLOAT_ATTRS.has(name)) throw new Error(`${where}: ${name} holds FLOATs; write floats([...])`);
    for (const x of v) if (typeof x !== 'number' || !Number.isSafeInteger(x)) throw new Error(`${where}: bare array is read as INTS but holds ${String(x)}; write floats([...]) for FLOATS`);
    return ints(v as number[]);
  }
  return v as AttrValue;
}
