import { describe, expect, it } from 'vitest';
import { GraphBuilder, float, floats, int, ints, str, tensor } from './builder.ts';
import { decodeModel } from './model.ts';

describe('GraphBuilder', () => {
  it('writes the graph it was given: nodes, attributes, initializers, inputs, outputs', () => {
    const g = new GraphBuilder('demo');
    const x = g.input('x', 'float32', ['N', 4]);
    const w = g.constant('w', new Float32Array(8).fill(0.5), [4, 2]);
    const y = g.matmul(x, w);
    const [a, b] = g.ops('Split', [y], { axis: 1, num_outputs: 2 }, 2);
    const s = g.op('LayerNormalization', [a!, g.constFloat([2]), null], { axis: -1, epsilon: float(1e-5) });
    g.output(s, 's', 'float32', ['N', 1]);
    g.output(b!, 'b', 'float32');
    const m = decodeModel(g.toModel({ producer: 'fugu', metadata: { k: '2' } }));
    expect(m.producerName).toBe('fugu');
    expect(m.metadata).toEqual({ k: '2' });
    expect(m.graph.name).toBe('demo');
    expect(m.graph.nodes.map((n) => n.opType)).toEqual(['MatMul', 'Split', 'LayerNormalization', 'Identity', 'Identity']);
    expect(m.graph.nodes[1]!.outputs).toEqual(['Split_0_out0', 'Split_0_out1']);
    expect(m.graph.nodes[1]!.attributes).toEqual({ axis: { type: 'int', value: 1 }, num_outputs: { type: 'int', value: 2 } });
    expect(m.graph.nodes[2]!.inputs).toEqual(['Split_0_out0', 'const_f32_0', '']);
    expect(m.graph.nodes[2]!.attributes!.epsilon).toEqual({ type: 'float', value: Math.fround(1e-5) });
    expect(m.graph.initializers.map((t) => [t.name, t.dtype, t.dims])).toEqual([
      ['w', 'float32', [4, 2]],
      ['const_f32_0', 'float32', [1]],
    ]);
    expect(m.graph.inputs).toEqual([{ name: 'x', dtype: 'float32', shape: ['N', 4] }]);
    expect(m.graph.outputs).toEqual([
      { name: 's', dtype: 'float32', shape: ['N', 1] },
      { name: 'b', dtype: 'float32' },
    ]);
  });

  it('types attributes unambiguously', () => {
    const g = new GraphBuilder('attrs');
    const x = g.input('x', 'float32', [2]);
    g.output(
      g.op('Custom', [x], {
        i: 3,
        big: 2n ** 40n,
        is: [1, -2],
        s: 'mode',
        ss: ['a', 'b'],
        f: float(2),
        fs: floats([0.5]),
        ti: int(4),
        tis: ints([]),
        ts: str('x'),
        t: tensor(new Float32Array([1, 2]), [2]),
      }, { domain: 'test.domain' }),
      'y',
      'float32',
    );
    const attrs = decodeModel(g.toModel()).graph.nodes[0]!.attributes!;
    expect(Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, v.type]))).toEqual({
      i: 'int', big: 'int', is: 'ints', s: 'string', ss: 'strings', f: 'float', fs: 'floats', ti: 'int', tis: 'ints', ts: 'string', t: 'tensor',
    });
    expect(attrs.big).toEqual({ type: 'int', value: 2 ** 40 });
  });

  it('refuses a bare number where a FLOAT is meant, naming the node', () => {
    const g = new GraphBuilder('bad');
    const x = g.input('x', 'float32', [2]);
    expect(() => g.op('LayerNormalization', [x], { epsilon: 1e-5 }, { name: 'ln1' })).toThrow(/node ln1 \(LayerNormalization\), attribute epsilon: epsilon is a FLOAT attribute; write float\(0.00001\)/);
    expect(() => g.op('Gemm', [x, x], { alpha: 1 })).toThrow(/attribute alpha.*write float\(1\)/);
    expect(() => g.op('Foo', [x], { k: 0.5 }, { name: 'foo' })).toThrow(/node foo \(Foo\), attribute k: bare number 0.5 is read as INT/);
    expect(() => g.op('Foo', [x], { k: [] })).toThrow(/empty bare array/);
  });

  it('rejects an undefined input with a message naming the node', () => {
    const g = new GraphBuilder('broken');
    const x = g.input('x', 'float32', ['N', 2]);
    const y = g.op('Add', [x, 'nowhere'], {}, { name: 'add_bias' });
    g.output(y, 'y', 'float32', ['N', 2]);
    expect(() => g.toModel()).toThrow(/graph broken: node add_bias \(Add\) uses input 1 'nowhere', which is not defined before it/);
  });

  it('rejects a use before definition (node order is the execution order)', () => {
    const g = new GraphBuilder('order');
    const x = g.input('x', 'float32', [2]);
    const a = g.op('Relu', [x, 'later'], {}, { name: 'early' });
    g.op('Relu', [x], {}, { name: 'late', outputs: ['later'] });
    g.output(a, 'y', 'float32');
    expect(() => g.validate()).toThrow(/node early \(Relu\) uses input 1 'later'/);
  });

  it('keeps names unique: auto names skip taken ones, explicit duplicates throw', () => {
    const g = new GraphBuilder('names');
    const x = g.input('MatMul_0_out', 'float32', [2, 2]);
    const y = g.matmul(x, x);
    expect(y.name).toBe('MatMul_0_out_0');
    expect(g.matmul(y, y).name).toBe('MatMul_1_out');
    g.input('x2', 'float32', [1]);
    expect(() => g.constant('x2', new Float32Array(1), [1])).toThrow(/constant x2: the name x2 is already used/);
    expect(() => g.op('Relu', [x], {}, { name: 'MatMul_0' })).toThrow(/already used/);
    expect(() => g.op('Relu', [x], {}, { outputs: ['x2'] })).toThrow(/output x2: the name x2 is already used/);
    g.output(y, 'y', 'float32');
    expect(() => g.output(y, 'y', 'float32')).toThrow(/already an output/);
  });

  it('refuses values from another graph and constants whose data does not fit', () => {
    const g1 = new GraphBuilder('one');
    const g2 = new GraphBuilder('two');
    const x = g1.input('x', 'float32', [2]);
    expect(() => g2.op('Relu', [x], {}, { name: 'r' })).toThrow(/node r \(Relu\): input 0 \(x\) belongs to graph one, not two/);
    expect(() => g1.constant('c', new Float32Array(5), [2, 2])).toThrow(/constant c: dims \[2, 2\] need 4 elements, data has 5/);
    expect(() => g1.constant('m', new Uint8Array([0, 2]), [2], 'bool')).toThrow(/bool data must be 0 or 1/);
    expect(() => g1.constInt64([1.5])).toThrow(/not an integer/);
    expect(() => new GraphBuilder('empty').toModel()).toThrow(/no outputs/);
  });

  it('helpers build int64, float and bool constants of the right shape', () => {
    const g = new GraphBuilder('consts');
    const a = g.constInt64([2, -1]);
    const b = g.constInt64(5);
    const c = g.constFloat(0.5);
    const d = g.constBool([true, false, true, true], [2, 2]);
    g.output(g.op('Concat', [a, g.reshape(b, [1])], { axis: 0 }), 'y', 'int64');
    g.output(c, c.name, 'float32');
    g.output(d, d.name, 'bool');
    const inits = decodeModel(g.toModel()).graph.initializers;
    expect(inits.map((t) => [t.dtype, t.dims, Array.from(t.data as ArrayLike<number | bigint>)])).toEqual([
      ['int64', [2], [2n, -1n]],
      ['int64', [], [5n]],
      ['float32', [], [0.5]],
      ['bool', [2, 2], [1, 0, 1, 1]],
      ['int64', [1], [1n]],
    ]);
  });
});
