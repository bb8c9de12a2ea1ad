// A minimal protobuf wire-format writer and reader: just what ONNX models need.
//
// The writer keeps a list of byte chunks and only concatenates them once, in `finish()`, so a
// large tensor's bytes (the 16 MB embedding table) are referenced, not copied, while nested
// messages are assembled. Sub-messages are length-delimited, so a child is finished as a
// Writer first (its length is then known) and appended to the parent.
//
// Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 (3/4, groups, are not used).

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_BYTES = 2;
export const WIRE_FIXED32 = 5;

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true });

/** Appends protobuf fields; `finish()` returns the encoded message. */
export class ProtoWriter {
  private readonly chunks: Uint8Array[] = [];
  private scratch = new Uint8Array(256);
  private pos = 0;
  private total = 0;

  /** Encoded size so far, in bytes. */
  get length(): number {
    return this.total + this.pos;
  }

  // --- scalar fields ---------------------------------------------------------------------

  /** int32/int64/uint64/bool/enum field (varint). Negative numbers take 10 bytes, as int64 does. */
  int(field: number, value: number | bigint): this {
    this.tag(field, WIRE_VARINT);
    this.varint(value);
    return this;
  }

  /** float field (fixed32, IEEE 754 little-endian). */
  float(field: number, value: number): this {
    this.tag(field, WIRE_FIXED32);
    this.ensure(4);
    new DataView(this.scratch.buffer).setFloat32(this.pos, value, true);
    this.pos += 4;
    return this;
  }

  /** string field (UTF-8, length-delimited). */
  string(field: number, value: string): this {
    return this.bytes(field, utf8Encoder.encode(value));
  }

  /** bytes field; the array is referenced until `finish()`, not copied. */
  bytes(field: number, value: Uint8Array): this {
    this.tag(field, WIRE_BYTES);
    this.varint(value.length);
    this.push(value);
    return this;
  }

  /** Embedded message field: `sub` must not be written to afterwards. */
  message(field: number, sub: ProtoWriter): this {
    this.tag(field, WIRE_BYTES);
    this.varint(sub.length);
    sub.flush();
    for (const c of sub.chunks) this.push(c);
    return this;
  }

  // --- packed repeated fields ------------------------------------------------------------

  /** Packed repeated int32/int64 (one length-delimited run of varints). */
  packedInts(field: number, values: ArrayLike<number | bigint>): this {
    const body = new ProtoWriter();
    for (let i = 0; i < values.length; i++) body.varint(values[i]!);
    return this.message(field, body);
  }

  /** Packed repeated float (fixed32 little-endian). */
  packedFloats(field: number, values: ArrayLike<number>): this {
    const data = values instanceof Float32Array ? values : Float32Array.from(values as ArrayLike<number>);
    return this.bytes(field, littleEndianBytes(data));
  }

  // --- output ----------------------------------------------------------------------------

  finish(): Uint8Array {
    this.flush();
    if (this.chunks.length === 1) return this.chunks[0]!;
    const out = new Uint8Array(this.total);
    let off = 0;
    for (const c of this.chunks) {
      out.set(c, off);
      off += c.length;
    }
    return out;
  }

  // --- internals -------------------------------------------------------------------------

  private tag(field: number, wire: number): void {
    if (!Number.isInteger(field) || field < 1 || field > 536_870_911) throw new RangeError(`protobuf: bad field number ${field}`);
    this.varint(field * 8 + wire);
  }

  private varint(value: number | bigint): void {
    this.ensure(10);
    if (typeof value === 'number' && value >= 0 && value <= Number.MAX_SAFE_INTEGER) {
      if (!Number.isInteger(value)) throw new RangeError(`protobuf: varint must be an integer, got ${value}`);
      let v = value;
      while (v >= 0x80) {
        this.scratch[this.pos++] = (v % 0x80) | 0x80;
        v = Math.floor(v / 0x80);
      }
      this.scratch[this.pos++] = v;
      return;
    }
    if (typeof value === 'number' && !Number.isSafeInteger(value)) {
      throw new RangeError(`protobuf: varint must be a safe integer (use a bigint), got ${value}`);
    }
    // Negative or bigint: two's complement on 64 bits, as protobuf encodes int64.
    let v = BigInt.asUintN(64, BigInt(value));
    while (v >= 0x80n) {
      this.scratch[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.scratch[this.pos++] = Number(v);
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.scratch.length) return;
    this.flush();
    if (n > this.scratch.length) this.scratch = new Uint8Array(n);
  }

  /** Moves the scratch bytes into the chunk list. */
  private flush(): void {
    if (this.pos === 0) return;
    this.chunks.push(this.scratch.slice(0, this.pos));
    this.total += this.pos;
    this.pos = 0;
  }

  private push(bytes: Uint8Array): void {
    if (bytes.length <= 64) {
      // Small pieces go into scratch so short strings do not fragment the chunk list.
      this.ensure(bytes.length);
      this.scratch.set(bytes, this.pos);
      this.pos += bytes.length;
      return;
    }
    this.flush();
    this.chunks.push(bytes);
    this.total += bytes.length;
  }
}

/** The little-endian bytes of a typed array (a view when the platform is little-endian). */
export function littleEndianBytes(data: Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array): Uint8Array {
  if (LITTLE_ENDIAN || data.BYTES_PER_ELEMENT === 1) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const out = new Uint8Array(data.byteLength);
  const view = new DataView(out.buffer);
  const size = data.BYTES_PER_ELEMENT;
  for (let i = 0; i < data.length; i++) {
    if (data instanceof Float32Array) view.setFloat32(i * size, data[i]!, true);
    else if (data instanceof Float64Array) view.setFloat64(i * size, data[i]!, true);
    else if (data instanceof Int32Array) view.setInt32(i * size, data[i]!, true);
    else view.setBigInt64(i * size, (data as BigInt64Array)[i]!, true);
  }
  return out;
}

// --- reader ----------------------------------------------------------------------------------

/** One decoded field. `value` is a bigint for varints, a byte view for length-delimited fields,
 *  and a number (the raw bits as little-endian uint32) for fixed32; fixed64 is a bigint. */
export type ProtoField =
  | { field: number; wire: typeof WIRE_VARINT; value: bigint }
  | { field: number; wire: typeof WIRE_FIXED64; value: bigint }
  | { field: number; wire: typeof WIRE_BYTES; value: Uint8Array }
  | { field: number; wire: typeof WIRE_FIXED32; value: number };

/** Reads one varint at `at.pos`, advancing it. */
function readVarint(buf: Uint8Array, at: { pos: number }): bigint {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (at.pos >= buf.length) throw new Error(`protobuf: truncated varint at byte ${at.pos}`);
    const b = buf[at.pos++]!;
    result |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return result;
    shift += 7n;
    if (shift > 63n) throw new Error(`protobuf: varint too long at byte ${at.pos}`);
  }
}

/** Splits one message into its fields, in order. Sub-message bytes are views, not copies. */
export function readFields(buf: Uint8Array): ProtoField[] {
  const out: ProtoField[] = [];
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const at = { pos: 0 };
  while (at.pos < buf.length) {
    const key = Number(readVarint(buf, at));
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (field === 0) throw new Error(`protobuf: field number 0 at byte ${at.pos}`);
    if (wire === WIRE_VARINT) out.push({ field, wire, value: readVarint(buf, at) });
    else if (wire === WIRE_FIXED64) {
      if (at.pos + 8 > buf.length) throw new Error(`protobuf: truncated fixed64 in field ${field}`);
      out.push({ field, wire, value: view.getBigUint64(at.pos, true) });
      at.pos += 8;
    } else if (wire === WIRE_BYTES) {
      const len = Number(readVarint(buf, at));
      if (at.pos + len > buf.length) throw new Error(`protobuf: field ${field} runs past the end (${len} bytes at ${at.pos})`);
      out.push({ field, wire, value: buf.subarray(at.pos, at.pos + len) });
      at.pos += len;
    } else if (wire === WIRE_FIXED32) {
      if (at.pos + 4 > buf.length) throw new Error(`protobuf: truncated fixed32 in field ${field}`);
      out.push({ field, wire, value: view.getUint32(at.pos, true) });
      at.pos += 4;
    } else {
      throw new Error(`protobuf: unsupported wire type ${wire} in field ${field} at byte ${at.pos}`);
    }
  }
  return out;
}

/** A varint field as a signed 64-bit integer, in a JS number (exact below 2^53). */
export function asInt(f: ProtoField): number {
  if (f.wire !== WIRE_VARINT) throw new Error(`protobuf: field ${f.field} is not a varint`);
  return Number(BigInt.asIntN(64, f.value));
}

export function asFloat(f: ProtoField): number {
  if (f.wire !== WIRE_FIXED32) throw new Error(`protobuf: field ${f.field} is not a fixed32`);
  const v = new DataView(new ArrayBuffer(4));
  v.setUint32(0, f.value, true);
  return v.getFloat32(0, true);
}

export function asBytes(f: ProtoField): Uint8Array {
  if (f.wire !== WIRE_BYTES) throw new Error(`protobuf: field ${f.field} is not length-delimited`);
  return f.value;
}

export function asString(f: ProtoField): string {
  return utf8Decoder.decode(asBytes(f));
}

/** A repeated int field, accepting both packed and unpacked encodings (as protobuf parsers must). */
export function readRepeatedInts(fields: ProtoField[], field: number): number[] {
  const out: number[] = [];
  for (const f of fields) {
    if (f.field !== field) continue;
    if (f.wire === WIRE_VARINT) out.push(asInt(f));
    else if (f.wire === WIRE_BYTES) {
      // A packed run is a plain concatenation of varints.
      const at = { pos: 0 };
      while (at.pos < f.value.length) out.push(Number(BigInt.asIntN(64, readVarint(f.value, at))));
    } else throw new Error(`protobuf: field ${field} has wire type ${f.wire}, expected ints`);
  }
  return out;
}

/** A repeated float field, packed or not. */
export function readRepeatedFloats(fields: ProtoField[], field: number): number[] {
  const out: number[] = [];
  for (const f of fields) {
    if (f.field !== field) continue;
    if (f.wire === WIRE_FIXED32) out.push(asFloat(f));
    else if (f.wire === WIRE_BYTES) {
      if (f.value.length % 4 !== 0) throw new Error(`protobuf: packed floats in field ${field} are not a multiple of 4 bytes`);
      const v = new DataView(f.value.buffer, f.value.byteOffset, f.value.byteLength);
      for (let i = 0; i < f.value.length; i += 4) out.push(v.getFloat32(i, true));
    } else throw new Error(`protobuf: field ${field} has wire type ${f.wire}, expected floats`);
  }
  return out;
}
