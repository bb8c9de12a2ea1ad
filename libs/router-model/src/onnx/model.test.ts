import { describe, expect, it } from 'vitest';
import { DEFAULT_IR_VERSION, DEFAULT_OPSET, decodeModel, encodeModel, type ModelSpec } from './model.ts';
import { ProtoWriter } from './protobuf.ts';

const spec: ModelSpec = {
  irVersion: 10,
  opsets: [
    { domain: '', version: 21 },
    { domain: 'com.microsoft', version: 1 },
  ],
  producerName: 'fugu',
  producerVersion: '0.1.0',
  docString: 'a test model',
  metadata: { backbone: 'use-lite', k: '8' },
  graph: {
    name: 'g',
    nodes: [
      {
        opType: 'Gemm',
        inputs: ['x', 'w', 'b'],
        outputs: ['y'],
        name: 'gemm',
        attributes: {
          alpha: { type: 'float', value: 0.5 },
          transB: { type: 'int', value: 1 },
          axis: { type: 'int', value: -1 },
          mode: { type: 'string', value: 'constant' },
          perm: { type: 'ints', value: [0, 2, -1] },
          scales: { type: 'floats', value: [1.5, -2] },
          names: { type: 'strings', value: ['a', 'b'] },
          value: { type: 'tensor', value: { dtype: 'int64', dims: [2], data: new BigInt64Array([3n, -4n]) } },
        },
      },
      { opType: 'Custom', inputs: ['y', ''], outputs: ['z'], name: 'custom', domain: 'com.microsoft' },
    ],
    initializers: [
      { name: 'w', dtype: 'float32', dims: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
      { name: 'b', dtype: 'float32', dims: [2], data: new Float32Array([0.25, -0.5]) },
      { name: 'i32', dtype: 'int32', dims: [3], data: new Int32Array([-1, 0, 7]) },
      { name: 'i64', dtype: 'int64', dims: [], data: new BigInt64Array([-(2n ** 40n)]) },
      { name: 'mask', dtype: 'bool', dims: [2, 2], data: new Uint8Array([1, 0, 0, 1]) },
      { name: 'f64', dtype: 'float64', dims: [1], data: new Float64Array([Math.PI]) },
    ],
    inputs: [{ name: 'x', dtype: 'float32', shape: ['N', 3] }],
    outputs: [
      { name: 'y', dtype: 'float32', shape: ['N', 2] },
      { name: 'z', dtype: 'float32' },
    ],
    valueInfo: [{ name: 'v', dtype: 'int64', shape: [null, 4, 'K'] }],
  },
};

describe('encodeModel / decodeModel', () => {
  it('round-trips every field we write', () => {
    const bytes = encodeModel(spec);
    const back = decodeModel(bytes);
    expect(back).toEqual(spec);
    // and re-encoding the decoded model gives the same bytes
    expect(Buffer.from(encodeModel(back)).equals(Buffer.from(bytes))).toBe(true);
  });

  it('defaults to IR 10 / opset 21 in the default domain', () => {
    const back = decodeModel(encodeModel({ graph: { ...spec.graph, valueInfo: [] } }));
    expect(back.irVersion).toBe(DEFAULT_IR_VERSION);
    expect(back.opsets).toEqual([{ domain: '', version: DEFAULT_OPSET }]);
  });

  it('reads tensors stored in the typed fields, not raw_data', () => {
    // TensorProto{dims:[3], data_type:FLOAT, float_data:[...], name:'t'} and an int64_data one
    const f = new ProtoWriter().packedInts(1, [3]).int(2, 1).packedFloats(4, [1, 2, 3]).string(8, 't');
    const i = new ProtoWriter().packedInts(1, [2]).int(2, 7).packedInts(7, [5, -6]).string(8, 'u');
    const graph = new ProtoWriter().string(2, 'g').message(5, f).message(5, i);
    const model = new ProtoWriter().int(1, 9).message(7, graph).finish();
    const back = decodeModel(model);
    expect(back.graph.initializers).toEqual([
      { name: 't', dtype: 'float32', dims: [3], data: new Float32Array([1, 2, 3]) },
      { name: 'u', dtype: 'int64', dims: [2], data: new BigInt64Array([5n, -6n]) },
    ]);
  });

  it('refuses tensors whose data does not match dims or dtype', () => {
    const bad = (t: ModelSpec['graph']['initializers'][number]): Uint8Array =>
      encodeModel({ graph: { ...spec.graph, initializers: [t] } });
    expect(() => bad({ name: 'w', dtype: 'float32', dims: [2, 2], data: new Float32Array(3) })).toThrow(/initializer w: dims \[2, 2\] need 4 elements, data has 3/);
    expect(() => bad({ name: 'w', dtype: 'int64', dims: [2], data: new Float32Array(2) })).toThrow(/int64 data must be a BigInt64Array/);
  });

  it('says what is missing in a model without a graph', () => {
    expect(() => decodeModel(new ProtoWriter().int(1, 9).finish())).toThrow(/no graph/);
  });
});
