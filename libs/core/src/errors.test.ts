// The wire format of errors that cross a thread or queue boundary (through JSON, as they travel).
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  decodeWireError,
  encodeWireError,
  FuguError,
  fromWireError,
  InputError,
  registerWireError,
  ServiceUnavailableError,
  toWireError,
  WireFailure,
  type WireError,
} from './errors.ts';

/** toWireError, through JSON (as postMessage or a queue would carry it), fromWireError */
const roundTrip = (e: unknown): Error => fromWireError(JSON.parse(JSON.stringify(toWireError(e))) as WireError);

describe('the error wire format', () => {
  it('rebuilds an InputError with its file, line and field, without prefixing the message twice', () => {
    const e = new InputError('must be a number', { file: 'pool.yaml', line: 3, field: 'workers[0].price' });
    expect(toWireError(e)).toEqual({ code: 'bad-input', name: 'InputError', message: 'pool.yaml:3, field workers[0].price: must be a number', fields: { file: 'pool.yaml', line: 3, field: 'workers[0].price' } });
    const back = roundTrip(e);
    expect(back).toBeInstanceOf(InputError);
    expect(back.message).toBe(e.message);
    expect(back).toMatchObject({ file: 'pool.yaml', line: 3, field: 'workers[0].price', code: 'bad-input' });
    const plain = roundTrip(new InputError('empty text'));
    expect(plain).toBeInstanceOf(InputError);
    expect(plain.message).toBe('empty text');
    expect((plain as InputError).field).toBeUndefined();
    // twice across keeps it
    expect(roundTrip(back).message).toBe(e.message);
  });

  it('rebuilds ConfigError with its variable and ServiceUnavailableError with its service', () => {
    const c = roundTrip(new ConfigError('set it', 'FUGU_X'));
    expect(c).toBeInstanceOf(ConfigError);
    expect(c).toMatchObject({ message: 'set it', variable: 'FUGU_X', code: 'config', name: 'ConfigError' });
    expect((roundTrip(new ConfigError('no variable')) as ConfigError).variable).toBeUndefined();
    const s = roundTrip(new ServiceUnavailableError('redis', 'Redis is away'));
    expect(s).toBeInstanceOf(ServiceUnavailableError);
    expect(s).toMatchObject({ service: 'redis', message: 'Redis is away', code: 'service-unavailable' });
  });

  it('revives an unknown code as a FuguError with that code and name; a registered one by its reviver', () => {
    const u = roundTrip(new FuguError('widget-jammed', 'the widget jammed'));
    expect(u).toBeInstanceOf(FuguError);
    expect(u).toMatchObject({ code: 'widget-jammed', message: 'the widget jammed', name: 'FuguError' });
    const named = fromWireError({ code: 'no-such-code', name: 'SomeLibError', message: 'm' });
    expect(named).toBeInstanceOf(FuguError);
    expect(named).toMatchObject({ code: 'no-such-code', name: 'SomeLibError' });

    class GadgetError extends FuguError {
      readonly part: string;
      constructor(message: string, part: string) {
        super('gadget-broken', message);
        this.part = part;
        this.name = 'GadgetError';
      }
      override wireFields() {
        return { part: this.part };
      }
    }
    registerWireError('gadget-', (w) => new GadgetError(w.message, String(w.fields?.part)));
    const g = roundTrip(new GadgetError('it broke', 'spring'));
    expect(g).toBeInstanceOf(GadgetError);
    expect((g as GadgetError).part).toBe('spring');
  });

  it('carries any other Error as code "error" with its name, and a non-Error value as its text', () => {
    const t = roundTrip(new TypeError('x is not a function'));
    expect(t).not.toBeInstanceOf(FuguError);
    expect(t).toMatchObject({ name: 'TypeError', message: 'x is not a function' });
    expect(toWireError('just a string')).toEqual({ code: 'error', message: 'just a string' });
    expect(toWireError(42)).toEqual({ code: 'error', message: '42' });
    expect(toWireError({ a: 1 })).toEqual({ code: 'error', message: '{"a":1}' });
    expect(toWireError(undefined)).toEqual({ code: 'error', message: 'undefined' });
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(toWireError(circular).code).toBe('error');
    // an already-wire error passes through
    expect(toWireError({ code: 'config', message: 'm', fields: { variable: 'V' } })).toEqual({ code: 'config', message: 'm', fields: { variable: 'V' } });
  });

  it('lets no secret cross: no cause, stack or extra property; secret shapes in messages and fields are scrubbed', () => {
    const sdk = Object.assign(new Error('401 Incorrect API key provided: sk-proj-abcdefghijklmnop1234'), { headers: { authorization: 'Bearer sk-live-secret-123456789' } });
    const e = new ServiceUnavailableError('postgres', 'cannot reach postgres://fugu:hunter2@db:5432/fugu', { cause: sdk });
    const w = toWireError(e);
    const text = JSON.stringify(w);
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('sk-');
    expect(text).not.toContain('stack');
    expect(w.message).toContain('postgres://fugu:***@db:5432/fugu');
    const direct = JSON.stringify(toWireError(sdk));
    expect(direct).not.toContain('abcdefghijklmnop');
    expect(direct).not.toContain('headers');
    expect(JSON.stringify(toWireError(new InputError('bad', { field: 'Bearer abcdefghijklmnopqrstu' })))).not.toContain('abcdefghijklmnopqrstu');
  });

  it('encodes into one string for a queue failure and decodes it; other text decodes as code "error"', () => {
    const f = new WireFailure(new ConfigError('no key', 'OPENAI_API_KEY'));
    expect(f.name).toBe('ConfigError');
    const back = fromWireError(decodeWireError(f.message));
    expect(back).toBeInstanceOf(ConfigError);
    expect((back as ConfigError).variable).toBe('OPENAI_API_KEY');
    expect(decodeWireError(encodeWireError(new InputError('x', { field: 'f' })))).toMatchObject({ code: 'bad-input', fields: { field: 'f' } });
    expect(decodeWireError('job stalled more than allowable limit')).toEqual({ code: 'error', message: 'job stalled more than allowable limit' });
    expect(decodeWireError('{not json')).toEqual({ code: 'error', message: '{not json' });
  });
});
