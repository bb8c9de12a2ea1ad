import { describe, expect, it } from 'vitest';
import {
  ProtoWriter,
  WIRE_BYTES,
  WIRE_FIXED32,
  WIRE_VARINT,
  asFloat,
  asInt,
  asString,
  readFields,
  readRepeatedFloats,
  readRepeatedInts,
} from './protobuf.ts';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

describe('ProtoWriter', () => {
  it('encodes varints as the protobuf spec examples do', () => {
    // 150 in field 1 is the canonical example: 08 96 01
    expect(hex(new ProtoWriter().int(1, 150).finish())).toBe('089601');
    expect(hex(new ProtoWriter().int(1, 0).finish())).toBe('0800');
    expect(hex(new ProtoWriter().int(2, 300).finish())).toBe('10ac02');
    // int64 -1 takes ten bytes of two's complement
    expect(hex(new ProtoWriter().int(1, -1).finish())).toBe('08ffffffffffffffffff01');
  });

  it('encodes strings, floats and nested messages', () => {
    expect(hex(new ProtoWriter().string(2, 'testing').finish())).toBe('120774657374696e67');
    expect(hex(new ProtoWriter().float(2, 1).finish())).toBe('150000803f');
    const inner = new ProtoWriter().int(1, 150);
    expect(hex(new ProtoWriter().message(3, inner).finish())).toBe('1a03089601');
  });

  it('refuses non-integer and unsafe varints', () => {
    expect(() => new ProtoWriter().int(1, 1.5)).toThrow(/integer/);
    expect(() => new ProtoWriter().int(1, 2 ** 60)).toThrow(/safe integer/);
    expect(() => new ProtoWriter().int(0, 1)).toThrow(/field number/);
  });
});

describe('reader', () => {
  it('round-trips scalar, string, bytes and nested fields', () => {
    const big = new Uint8Array(1000).map((_, i) => i % 251);
    const w = new ProtoWriter()
      .int(1, 0)
      .int(2, 2 ** 40 + 3)
      .int(3, -7)
      .int(4, 2n ** 62n)
      .float(5, -2.5)
      .string(6, 'héllo ✓')
      .bytes(7, big)
      .message(8, new ProtoWriter().string(1, 'inner').int(2, 42));
    const fs = readFields(w.finish());
    expect(fs.map((f) => [f.field, f.wire])).toEqual([
      [1, WIRE_VARINT],
      [2, WIRE_VARINT],
      [3, WIRE_VARINT],
      [4, WIRE_VARINT],
      [5, WIRE_FIXED32],
      [6, WIRE_BYTES],
      [7, WIRE_BYTES],
      [8, WIRE_BYTES],
    ]);
    expect(asInt(fs[0]!)).toBe(0);
    expect(asInt(fs[1]!)).toBe(2 ** 40 + 3);
    expect(asInt(fs[2]!)).toBe(-7);
    expect(fs[3]!.value).toBe(2n ** 62n);
    expect(asFloat(fs[4]!)).toBe(-2.5);
    expect(asString(fs[5]!)).toBe('héllo ✓');
    expect(Array.from(fs[6]!.value as Uint8Array)).toEqual(Array.from(big));
    const inner = readFields(fs[7]!.value as Uint8Array);
    expect(asString(inner[0]!)).toBe('inner');
    expect(asInt(inner[1]!)).toBe(42);
  });

  it('reads packed and unpacked repeated ints and floats', () => {
    const ints = [0, 1, -1, 127, 128, 2 ** 31, -(2 ** 33), 512];
    const floats = [0, 1.5, -3.25, 1e-5, 3.4e38];
    const w = new ProtoWriter().packedInts(1, ints).packedFloats(2, floats);
    for (const v of [9, -2]) w.int(1, v); // unpacked entries after a packed run are appended
    w.float(2, 7.5);
    const fs = readFields(w.finish());
    expect(readRepeatedInts(fs, 1)).toEqual([...ints, 9, -2]);
    expect(readRepeatedFloats(fs, 2)).toEqual([...Array.from(Float32Array.from(floats)), 7.5]);
  });

  it('names the problem in truncated input', () => {
    const bytes = new ProtoWriter().string(1, 'a longer string').finish();
    expect(() => readFields(bytes.subarray(0, 5))).toThrow(/field 1 runs past the end/);
    expect(() => readFields(new Uint8Array([0x08, 0x96]))).toThrow(/truncated varint/);
    expect(() => readFields(new Uint8Array([0x0b]))).toThrow(/unsupported wire type 3/);
  });

  it('assembles many chunks of mixed sizes in order', () => {
    const w = new ProtoWriter();
    const expected: Array<[number, string]> = [];
    for (let i = 0; i < 300; i++) {
      const s = 'x'.repeat(i % 130) + String(i);
      w.string(1 + (i % 5), s);
      expected.push([1 + (i % 5), s]);
    }
    expect(readFields(w.finish()).map((f) => [f.field, asString(f)])).toEqual(expected);
  });
});
