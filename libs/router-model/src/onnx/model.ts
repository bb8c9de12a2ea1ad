// ONNX ModelProto encoding and decoding over the minimal protobuf writer/reader.
//
// Field numbers follow onnx/onnx.proto (checked against the upstream schema): a model written
// here is read by ONNX Runtime directly, and `decodeModel` reads back what we (or an exporter)
// wrote, enough to inspect a graph's structure and tensors.

import {
  ProtoWriter,
  asBytes,
  asFloat,
  asInt,
  asString,
  littleEndianBytes,
  readFields,
  readRepeatedFloats,
  readRepeatedInts,
  type ProtoField,
} from './protobuf.ts';

/** IR version 10 (ONNX 1.16+); ONNX Runtime 1.30 reads it. */
export const DEFAULT_IR_VERSION = 10;
/** Default-domain opset: 21 is the newest that every op we use has settled in, and ORT 1.30 runs it. */
export const DEFAULT_OPSET = 21;

// --- data types --------------------------------------------------------------------------------

export type DType = 'float32' | 'float64' | 'int32' | 'int64' | 'bool' | 'uint8';

/** TensorProto.DataType codes. */
export const DTYPE_CODE: Readonly<Record<DType, number>> = {
  float32: 1,
  uint8: 2,
  int32: 6,
  int64: 7,
  bool: 9,
  float64: 11,
};

export function dtypeFromCode(code: number): DType {
  for (const [k, v] of Object.entries(DTYPE_CODE)) if (v === code) return k as DType;
  throw new Error(`onnx: unsupported tensor data type code ${code}`);
}

export type TensorData = Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array;

/** The dtype a typed array holds by default (a Uint8Array is uint8; bool must be asked for). */
export function dtypeOf(data: TensorData): DType {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof BigInt64Array) return 'int64';
  return 'uint8';
}

/** A dense tensor; bool is one byte per element (0 or 1) in a Uint8Array. */
export interface TensorSpec {
  name?: string;
  dtype: DType;
  dims: number[];
  data: TensorData;
}

const ARRAY_FOR: Record<DType, { new (n: number): TensorData; BYTES_PER_ELEMENT: number }> = {
  float32: Float32Array,
  float64: Float64Array,
  int32: Int32Array,
  int64: BigInt64Array,
  bool: Uint8Array,
  uint8: Uint8Array,
};

/** Throws unless `data` is the array type of `dtype` and holds product(dims) elements. */
export function checkTensor(t: TensorSpec, what: string): void {
  const Ctor = ARRAY_FOR[t.dtype];
  if (!(t.data instanceof Ctor)) throw new Error(`${what}: ${t.dtype} data must be a ${Ctor.name}, got ${t.data.constructor.name}`);
  for (const d of t.dims) if (!Number.isInteger(d) || d < 0) throw new Error(`${what}: bad dimension ${d} in [${t.dims.join(', ')}]`);
  const n = t.dims.reduce((a, b) => a * b, 1);
  if (t.data.length !== n) throw new Error(`${what}: dims [${t.dims.join(', ')}] need ${n} elements, data has ${t.data.length}`);
}

// --- attributes, nodes, graphs -----------------------------------------------------------------

export type AttrValue =
  | { type: 'int'; value: number | bigint }
  | { type: 'float'; value: number }
  | { type: 'string'; value: string }
  | { type: 'tensor'; value: TensorSpec }
  | { type: 'ints'; value: (number | bigint)[] }
  | { type: 'floats'; value: number[] }
  | { type: 'strings'; value: string[] };

/** AttributeProto.AttributeType codes. */
const ATTR_CODE = { float: 1, int: 2, string: 3, tensor: 4, floats: 6, ints: 7, strings: 8 } as const;

export interface NodeSpec {
  opType: string;
  inputs: string[];
  outputs: string[];
  name?: string;
  domain?: string;
  attributes?: Record<string, AttrValue>;
}

/** A dimension is a size, a symbolic name ('N'), or null (unknown, neither set). */
export type Dim = number | string | null;

export interface ValueInfoSpec {
  name: string;
  dtype: DType;
  /** Undefined: rank unknown. */
  shape?: Dim[];
}

export interface GraphSpec {
  name: string;
  nodes: NodeSpec[];
  initializers: TensorSpec[];
  inputs: ValueInfoSpec[];
  outputs: ValueInfoSpec[];
  valueInfo?: ValueInfoSpec[];
}

export interface OpsetId {
  domain: string;
  version: number;
}

export interface ModelSpec {
  irVersion?: number;
  opsets?: OpsetId[];
  producerName?: string;
  producerVersion?: string;
  docString?: string;
  metadata?: Record<string, string>;
  graph: GraphSpec;
}

// --- encoding ----------------------------------------------------------------------------------

export function encodeModel(model: ModelSpec): Uint8Array {
  const w = new ProtoWriter();
  w.int(1, model.irVersion ?? DEFAULT_IR_VERSION);
  if (model.producerName !== undefined) w.string(2, model.producerName);
  if (model.producerVersion !== undefined) w.string(3, model.producerVersion);
  if (model.docString !== undefined) w.string(6, model.docString);
  w.message(7, encodeGraph(model.graph));
  for (const o of model.opsets ?? [{ domain: '', version: DEFAULT_OPSET }]) {
    w.message(8, new ProtoWriter().string(1, o.domain).int(2, o.version));
  }
  for (const [key, value] of Object.entries(model.metadata ?? {})) {
    w.message(14, new ProtoWriter().string(1, key).string(2, value));
  }
  return w.finish();
}

function encodeGraph(g: GraphSpec): ProtoWriter {
  const w = new ProtoWriter();
  for (const n of g.nodes) w.message(1, encodeNode(n));
  w.string(2, g.name);
  for (const t of g.initializers) w.message(5, encodeTensor(t, `initializer ${t.name ?? '?'}`));
  for (const v of g.inputs) w.message(11, encodeValueInfo(v));
  for (const v of g.outputs) w.message(12, encodeValueInfo(v));
  for (const v of g.valueInfo ?? []) w.message(13, encodeValueInfo(v));
  return w;
}

function encodeNode(n: NodeSpec): ProtoWriter {
  const w = new ProtoWriter();
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  if (n.name !== undefined) w.string(3, n.name);
  w.string(4, n.opType);
  for (const [name, a] of Object.entries(n.attributes ?? {})) w.message(5, encodeAttribute(name, a, n));
  if (n.domain) w.string(7, n.domain);
  return w;
}

function encodeAttribute(name: string, a: AttrValue, node: NodeSpec): ProtoWriter {
  const w = new ProtoWriter().string(1, name);
  const where = `node ${node.name ?? node.opType}, attribute ${name}`;
  switch (a.type) {
    case 'float':
      w.float(2, a.value);
      break;
    case 'int':
      if (typeof a.value === 'number' && !Number.isSafeInteger(a.value)) throw new Error(`${where}: INT value ${a.value} is not an integer`);
      w.int(3, a.value);
      break;
    case 'string':
      w.string(4, a.value);
      break;
    case 'tensor':
      w.message(5, encodeTensor(a.value, where));
      break;
    case 'floats':
      w.packedFloats(7, a.value);
      break;
    case 'ints':
      for (const v of a.value) if (typeof v === 'number' && !Number.isSafeInteger(v)) throw new Error(`${where}: INTS value ${v} is not an integer`);
      w.packedInts(8, a.value);
      break;
    case 'strings':
      for (const s of a.value) w.string(9, s);
      break;
  }
  w.int(20, ATTR_CODE[a.type]);
  return w;
}

/** TensorProto with raw_data (fixed-width little-endian, bool one byte per element). */
export function encodeTensor(t: TensorSpec, what = 'tensor'): ProtoWriter {
  checkTensor(t, what);
  const w = new ProtoWriter();
  w.packedInts(1, t.dims);
  w.int(2, DTYPE_CODE[t.dtype]);
  if (t.name !== undefined) w.string(8, t.name);
  w.bytes(9, littleEndianBytes(t.data));
  return w;
}

function encodeValueInfo(v: ValueInfoSpec): ProtoWriter {
  const tensorType = new ProtoWriter().int(1, DTYPE_CODE[v.dtype]);
  if (v.shape) {
    const shape = new ProtoWriter();
    for (const d of v.shape) {
      const dim = new ProtoWriter();
      if (typeof d === 'number') dim.int(1, d);
      else if (typeof d === 'string') dim.string(2, d);
      shape.message(1, dim);
    }
    tensorType.message(2, shape);
  }
  const type = new ProtoWriter().message(1, tensorType);
  return new ProtoWriter().string(1, v.name).message(2, type);
}

// --- decoding ----------------------------------------------------------------------------------

const fieldsOf = (fs: ProtoField[], n: number): ProtoField[] => fs.filter((f) => f.field === n);
const lastOf = (fs: ProtoField[], n: number): ProtoField | undefined => fieldsOf(fs, n).at(-1);

/** Reads a ModelProto: graph structure, value infos, initializers (with data) and attributes.
 *  Tensors stored as external data, sparse initializers and subgraph attributes are not read. */
export function decodeModel(bytes: Uint8Array): ModelSpec {
  const fs = readFields(bytes);
  const graphField = lastOf(fs, 7);
  if (!graphField) throw new Error('onnx: the model has no graph (ModelProto field 7)');
  const model: ModelSpec = { graph: decodeGraph(asBytes(graphField)) };
  const ir = lastOf(fs, 1);
  if (ir) model.irVersion = asInt(ir);
  const producer = lastOf(fs, 2);
  if (producer) model.producerName = asString(producer);
  const producerVersion = lastOf(fs, 3);
  if (producerVersion) model.producerVersion = asString(producerVersion);
  const doc = lastOf(fs, 6);
  if (doc) model.docString = asString(doc);
  model.opsets = fieldsOf(fs, 8).map((f) => {
    const o = readFields(asBytes(f));
    const d = lastOf(o, 1);
    const v = lastOf(o, 2);
    return { domain: d ? asString(d) : '', version: v ? asInt(v) : 0 };
  });
  const meta = fieldsOf(fs, 14);
  if (meta.length > 0) {
    model.metadata = {};
    for (const f of meta) {
      const e = readFields(asBytes(f));
      const k = lastOf(e, 1);
      const v = lastOf(e, 2);
      model.metadata[k ? asString(k) : ''] = v ? asString(v) : '';
    }
  }
  return model;
}

function decodeGraph(bytes: Uint8Array): GraphSpec {
  const fs = readFields(bytes);
  const name = lastOf(fs, 2);
  const g: GraphSpec = {
    name: name ? asString(name) : '',
    nodes: fieldsOf(fs, 1).map((f) => decodeNode(asBytes(f))),
    initializers: fieldsOf(fs, 5).map((f) => decodeTensor(asBytes(f))),
    inputs: fieldsOf(fs, 11).map((f) => decodeValueInfo(asBytes(f))),
    outputs: fieldsOf(fs, 12).map((f) => decodeValueInfo(asBytes(f))),
  };
  const vi = fieldsOf(fs, 13);
  if (vi.length > 0) g.valueInfo = vi.map((f) => decodeValueInfo(asBytes(f)));
  return g;
}

function decodeNode(bytes: Uint8Array): NodeSpec {
  const fs = readFields(bytes);
  const n: NodeSpec = {
    opType: asString(lastOf(fs, 4) ?? fail('node without op_type')),
    inputs: fieldsOf(fs, 1).map(asString),
    outputs: fieldsOf(fs, 2).map(asString),
  };
  const name = lastOf(fs, 3);
  if (name) n.name = asString(name);
  const domain = lastOf(fs, 7);
  if (domain && asString(domain) !== '') n.domain = asString(domain);
  const attrs = fieldsOf(fs, 5);
  if (attrs.length > 0) {
    n.attributes = {};
    for (const f of attrs) {
      const [k, v] = decodeAttribute(asBytes(f), n);
      n.attributes[k] = v;
    }
  }
  return n;
}

function decodeAttribute(bytes: Uint8Array, node: NodeSpec): [string, AttrValue] {
  const fs = readFields(bytes);
  const name = asString(lastOf(fs, 1) ?? fail(`attribute without a name in node ${node.name ?? node.opType}`));
  const typeField = lastOf(fs, 20);
  const code = typeField ? asInt(typeField) : 0;
  const need = (n: number): ProtoField => lastOf(fs, n) ?? fail(`attribute ${name}: value field ${n} missing`);
  switch (code) {
    case ATTR_CODE.float:
      return [name, { type: 'float', value: asFloat(need(2)) }];
    case ATTR_CODE.int:
      return [name, { type: 'int', value: asInt(need(3)) }];
    case ATTR_CODE.string:
      return [name, { type: 'string', value: asString(need(4)) }];
    case ATTR_CODE.tensor:
      return [name, { type: 'tensor', value: decodeTensor(asBytes(need(5))) }];
    case ATTR_CODE.floats:
      return [name, { type: 'floats', value: readRepeatedFloats(fs, 7) }];
    case ATTR_CODE.ints:
      return [name, { type: 'ints', value: readRepeatedInts(fs, 8) }];
    case ATTR_CODE.strings:
      return [name, { type: 'strings', value: fieldsOf(fs, 9).map(asString) }];
    default:
      throw new Error(`onnx: attribute ${name} of node ${node.name ?? node.opType} has unsupported type ${code}`);
  }
}

/** TensorProto from raw_data or the typed fields (float_data, int32_data, int64_data, double_data). */
export function decodeTensor(bytes: Uint8Array): TensorSpec {
  const fs = readFields(bytes);
  const dims = readRepeatedInts(fs, 1);
  const code = lastOf(fs, 2);
  const dtype = dtypeFromCode(code ? asInt(code) : 0);
  const n = dims.reduce((a, b) => a * b, 1);
  const Ctor = ARRAY_FOR[dtype];
  const data = new Ctor(n);
  const raw = lastOf(fs, 9);
  if (raw) {
    const b = asBytes(raw);
    if (b.length !== n * Ctor.BYTES_PER_ELEMENT) throw new Error(`onnx: tensor raw_data has ${b.length} bytes, dims [${dims.join(', ')}] need ${n * Ctor.BYTES_PER_ELEMENT}`);
    // Copy into a fresh (aligned) buffer: the view into the model bytes may be misaligned.
    new Uint8Array(data.buffer).set(b);
    if (!isLittleEndianPlatform()) swapInPlace(data);
  } else {
    const values =
      dtype === 'float32' ? readRepeatedFloats(fs, 4)
      : dtype === 'int64' ? readRepeatedInts(fs, 7)
      : dtype === 'float64' ? fieldsOf(fs, 10).flatMap((f) => float64s(asBytes(f)))
      : readRepeatedInts(fs, 5);
    if (values.length !== n) throw new Error(`onnx: tensor holds ${values.length} values, dims [${dims.join(', ')}] need ${n}`);
    if (data instanceof BigInt64Array) values.forEach((v, i) => (data[i] = BigInt(v)));
    else (data as Exclude<TensorData, BigInt64Array>).set(values);
  }
  const t: TensorSpec = { dtype, dims, data };
  const name = lastOf(fs, 8);
  if (name) t.name = asString(name);
  return t;
}

function float64s(b: Uint8Array): number[] {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out: number[] = [];
  for (let i = 0; i + 8 <= b.length; i += 8) out.push(v.getFloat64(i, true));
  return out;
}

function decodeValueInfo(bytes: Uint8Array): ValueInfoSpec {
  const fs = readFields(bytes);
  const name = asString(lastOf(fs, 1) ?? fail('value info without a name'));
  const type = lastOf(fs, 2);
  const tensorType = type && lastOf(readFields(asBytes(type)), 1);
  if (!tensorType) throw new Error(`onnx: value ${name} is not a tensor (only tensor types are read)`);
  const tt = readFields(asBytes(tensorType));
  const elem = lastOf(tt, 1);
  const v: ValueInfoSpec = { name, dtype: dtypeFromCode(elem ? asInt(elem) : 0) };
  const shape = lastOf(tt, 2);
  if (shape) {
    v.shape = fieldsOf(readFields(asBytes(shape)), 1).map((d): Dim => {
      const df = readFields(asBytes(d));
      const value = lastOf(df, 1);
      const param = lastOf(df, 2);
      return value ? asInt(value) : param ? asString(param) : null;
    });
  }
  return v;
}

function fail(message: string): never {
  throw new Error(`onnx: ${message}`);
}

function isLittleEndianPlatform(): boolean {
  return new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
}

function swapInPlace(data: TensorData): void {
  const b = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const size = data.BYTES_PER_ELEMENT;
  for (let i = 0; i < b.length; i += size) b.subarray(i, i + size).reverse();
}
