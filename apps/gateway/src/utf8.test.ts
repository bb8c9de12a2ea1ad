import { describe, expect, it } from 'vitest';
import { firstInvalidUtf8, invalidUtf8Error } from './utf8.ts';

const bytes = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));

describe('UTF-8 of a JSON body', () => {
  it('finds the first bad sequence: its offset and the bytes that start it', () => {
    expect(firstInvalidUtf8(bytes('café 😀 €'))).toBeUndefined();
    expect(firstInvalidUtf8(bytes('ab', [0xff]))).toEqual({ at: 2, length: 1 });
    // overlong forms, a surrogate, past U+10FFFF, a stray continuation byte
    expect(firstInvalidUtf8(bytes('é', [0xc0, 0x80]))).toEqual({ at: 2, length: 1 });
    expect(firstInvalidUtf8(bytes([0xe0, 0x80, 0x80]))).toEqual({ at: 0, length: 1 });
    expect(firstInvalidUtf8(bytes('x', [0xed, 0xa0, 0x80]))).toEqual({ at: 1, length: 1 });
    expect(firstInvalidUtf8(bytes([0xf4, 0x90, 0x80, 0x80]))).toEqual({ at: 0, length: 1 });
    expect(firstInvalidUtf8(bytes('a', [0x80]))).toEqual({ at: 1, length: 1 });
    // a sequence cut short: its valid start, by the next byte or the end
    expect(firstInvalidUtf8(bytes([0xf0, 0x9f, 0x98], 'x'))).toEqual({ at: 0, length: 3 });
    expect(firstInvalidUtf8(bytes('ok', [0xe2, 0x82]))).toEqual({ at: 2, length: 2 });
  });

  it('names the field (an array element, a key) when the rest is JSON', () => {
    const e = invalidUtf8Error(bytes('{"a":[{"b":"x', [0xff], '"}]}'))!;
    expect([e.status, e.param, e.errorCode, e.message]).toEqual([400, 'a[0].b', 'invalid_encoding', 'a[0].b: the request body is not valid UTF-8 at byte 13 (0xff); send text as UTF-8']);
    expect(invalidUtf8Error(bytes('{"k', [0xff], '":1}'))!.message).toBe('the request body is not valid UTF-8 at byte 3 (0xff), in a key; send text as UTF-8');
    expect(invalidUtf8Error(bytes('{"a":', [0xff], '}'))!.param).toBeNull();
    expect(invalidUtf8Error(bytes('{"a":"é"}'))).toBeUndefined();
  });
});
