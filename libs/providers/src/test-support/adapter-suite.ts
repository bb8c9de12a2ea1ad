// What the adapters' tests (anthropic, google, openai) share: one stub server per describe block,
// and the failure cases every adapter must map the same way. It registers vitest hooks and
// tests, so only test files import it (directly: it is not exported from index.ts).

import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import type { ChatModel, ChatModelOptions, ChatRequest } from '@fugu/core';
import { AuthError, ConnectionError, TimeoutError } from '../errors.ts';
import { collectStream } from '../testing/collect.ts';
import type { StubServer, StubServerOptions } from '../testing/stub-server.ts';

export type AdapterUnderTest = {
  /** starts a stub speaking the adapter's wire format */
  start: (opts?: StubServerOptions) => Promise<StubServer>;
  /** the adapter with the test key, pointed at a stub */
  make: (stub: StubServer, o?: Partial<ChatModelOptions>) => ChatModel;
  /** the key `make` gives: it must stay out of every error */
  key: string;
  /** another key, the only one a strict stub accepts */
  otherKey: string;
};

/**
 * One stub for the describe block that calls this: started before its tests (and handed to
 * `use`), reset before each, closed after them.
 */
export function stubPerSuite<S extends StubServer>(start: () => Promise<S>, use: (stub: S) => void): void {
  let stub: S;
  beforeAll(async () => {
    stub = await start();
    use(stub);
  });
  afterAll(() => stub.close());
  beforeEach(() => stub.reset());
}

/** The failures every adapter maps alike: a wrong key, a server that never answers, one that is gone. */
export function sharedFailureTests(adapter: AdapterUnderTest, stub: () => StubServer): void {
  const ask = (): ChatRequest => ({ messages: [{ role: 'user', content: 'x' }] });

  it('maps 401 to AuthError and keeps the key out of the message', async () => {
    const strict = await adapter.start({ apiKey: adapter.otherKey });
    try {
      const err = await adapter.make(strict).generate(ask()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuthError);
      expect(err).toMatchObject({ status: 401, transient: false });
      // a provider may echo the key it got (OpenAI does, and so does its stub)
      expect(String((err as Error).message)).not.toContain(adapter.key);
      expect(JSON.stringify(err)).not.toContain(adapter.key);
      expect(String((err as Error).stack)).not.toContain(adapter.key);
    } finally {
      await strict.close();
    }
  });

  it('times out on a server that never answers (generate, stream, stalled stream)', async () => {
    stub().enqueue({ type: 'hang' }, { type: 'hang' }, { type: 'stall-mid-stream', text: 'partial answer' });
    const m = adapter.make(stub(), { timeoutMs: 300 });
    await expect(m.generate(ask())).rejects.toBeInstanceOf(TimeoutError);
    await expect(collectStream(m.stream(ask()))).rejects.toBeInstanceOf(TimeoutError);
    // headers and a first delta arrive, then nothing: the deadline covers the whole stream
    await expect(collectStream(m.stream(ask()))).rejects.toBeInstanceOf(TimeoutError);
  });

  it('maps an unreachable server to ConnectionError', async () => {
    const gone = await adapter.start();
    await gone.close();
    const err = await adapter.make(gone).generate(ask()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    expect(err).toMatchObject({ transient: true });
  });
}
