// The stubs' own behaviour that other tests rely on: the rate limit (sliding 1 s window), the
// request counter, and close() ending hanging requests.

import { afterEach, describe, expect, it } from 'vitest';
import { OpenAIChatModel } from '../openai.ts';
import { RateLimitError } from '../errors.ts';
import { startOpenAIStub, type OpenAIStub } from './index.ts';

describe('OpenAI stub rate limit', () => {
  let stub: OpenAIStub | undefined;
  afterEach(async () => {
    await stub?.close();
    stub = undefined;
  });

  it('answers 429 with retry-after above R requests in a sliding 1 s window', async () => {
    let now = 10_000;
    stub = await startOpenAIStub({ rateLimit: { requestsPerSecond: 3 }, now: () => now });
    const model = new OpenAIChatModel({ model: 'gpt-test', apiKey: 'sk-test-0000000000', baseURL: stub.baseURL });
    const call = () => model.generate({ messages: [{ role: 'user', content: 'hi' }] }).then(() => 'ok', (e: unknown) => e);

    expect(await call()).toBe('ok'); // t = 10.0 s
    now += 400;
    expect(await call()).toBe('ok'); // t = 10.4 s
    expect(await call()).toBe('ok'); // t = 10.4 s: 3 in the window
    const limited = await call(); // t = 10.4 s: the 4th within 1 s
    expect(limited).toBeInstanceOf(RateLimitError);
    // the oldest accepted request (t = 10.0) leaves the window at t = 11.0: 600 ms from now
    expect((limited as RateLimitError).retryAfterMs).toBe(600);
    now += 601; // t = 11.001: the first request left the window
    expect(await call()).toBe('ok');
    expect(await call()).toBeInstanceOf(RateLimitError);
    expect(stub.requestCount).toBe(6);
    expect(stub.rateLimited).toBe(2);
  });

  it('lets all requests through with the real clock when under the limit', async () => {
    stub = await startOpenAIStub({ rateLimit: { requestsPerSecond: 1000 } });
    const model = new OpenAIChatModel({ model: 'gpt-test', apiKey: 'sk-test-0000000000', baseURL: stub.baseURL });
    const results = await Promise.all(Array.from({ length: 10 }, () => model.generate({ messages: [{ role: 'user', content: 'hi' }] })));
    expect(results.map((r) => r.text)).toEqual(Array(10).fill('stub answer'));
    expect(stub.requestCount).toBe(10);
    expect(stub.rateLimited).toBe(0);
  });

  it('close() ends requests that hang', async () => {
    stub = await startOpenAIStub({ defaultReply: { type: 'hang' } });
    const model = new OpenAIChatModel({ model: 'gpt-test', apiKey: 'sk-test-0000000000', baseURL: stub.baseURL });
    const pending = model.generate({ messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    while (stub.requestCount === 0) await new Promise((r) => setTimeout(r, 5));
    await stub.close();
    stub = undefined;
    const err = await pending;
    expect((err as Error).name).toBe('ConnectionError');
  });
});
