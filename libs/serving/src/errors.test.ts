import { describe, expect, it } from 'vitest';
import { fromWireError, ServiceUnavailableError, toWireError } from '@fugu/core';
import { RouterUnavailableError } from './errors.ts';

describe('RouterUnavailableError on the wire', () => {
  it('has its own code and comes back as itself (a ServiceUnavailableError for the router)', () => {
    const w = toWireError(new RouterUnavailableError('no router worker is alive'));
    expect(w).toMatchObject({ code: 'router-unavailable', name: 'RouterUnavailableError', fields: { service: 'router' } });
    const back = fromWireError(JSON.parse(JSON.stringify(w)));
    expect(back).toBeInstanceOf(RouterUnavailableError);
    expect(back).toBeInstanceOf(ServiceUnavailableError);
    expect(back.message).toBe('no router worker is alive');
  });
});
