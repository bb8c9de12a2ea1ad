import { describe, expect, it } from 'vitest';
import { GatewayError } from './errors.ts';
import { SESSION_MAX, sessionOf } from './sessions.ts';

const CLAUDE_USER_ID = JSON.stringify({ device_id: 'd'.repeat(64), account_uuid: '', session_id: 'f6a1f33f-46c7-4dd3-a64d-594834ebca7c' });

describe('sessionOf: the session each client sends', () => {
  it('Claude Code: its x-claude-code-session-id header, else the session_id in metadata.user_id', () => {
    expect(sessionOf({ 'x-claude-code-session-id': 'f6a1f33f-46c7-4dd3-a64d-594834ebca7c' }, { metadata: { user_id: CLAUDE_USER_ID } }, '/v1/messages')).toBe('f6a1f33f-46c7-4dd3-a64d-594834ebca7c');
    expect(sessionOf({}, { metadata: { user_id: CLAUDE_USER_ID } }, '/v1/messages')).toBe('f6a1f33f-46c7-4dd3-a64d-594834ebca7c');
    // a plain end user id is no session
    expect(sessionOf({}, { metadata: { user_id: 'user-42' } }, '/v1/messages')).toBeUndefined();
  });

  it('Codex: its session-id header, else client_metadata.session_id; prompt_cache_key alone is no session', () => {
    expect(sessionOf({ 'session-id': '01a248fa-d39c-7c01-9246-c702e5d79d75' }, {}, '/v1/responses')).toBe('01a248fa-d39c-7c01-9246-c702e5d79d75');
    expect(sessionOf({}, { client_metadata: { session_id: 'abc', thread_id: 'abc' } }, '/v1/responses')).toBe('abc');
    expect(sessionOf({}, { prompt_cache_key: 'shared-prefix' }, '/v1/responses')).toBeUndefined();
  });

  it('OpenCode: its x-session-id header', () => {
    expect(sessionOf({ 'x-session-id': 'ses_db7050878ffeAJLvJTJO1nN57h', 'x-session-affinity': 'ses_db7050878ffeAJLvJTJO1nN57h' }, {}, '/v1/chat/completions')).toBe('ses_db7050878ffeAJLvJTJO1nN57h');
  });

  it('any client: x-fugu-session or fugu.session first; nothing: no session', () => {
    expect(sessionOf({ 'x-fugu-session': 'mine', 'x-session-id': 'theirs' }, {}, '/v1/chat/completions')).toBe('mine');
    expect(sessionOf({ 'x-session-id': 'theirs' }, { fugu: { session: 'mine' } }, '/v1/chat/completions')).toBe('mine');
    expect(sessionOf({}, { messages: [] }, '/v1/chat/completions')).toBeUndefined();
  });

  it("a client's value that is no session id is ignored; an explicit one is a 400 naming it", () => {
    expect(sessionOf({ 'x-session-id': 'x'.repeat(SESSION_MAX + 1) }, {}, '/v1/chat/completions')).toBeUndefined();
    expect(sessionOf({ 'x-session-id': 'fugu-sk-abc' }, {}, '/v1/chat/completions')).toBeUndefined();
    const refusal = (h: Record<string, string>, b: unknown): GatewayError => {
      try {
        sessionOf(h, b, '/v1/chat/completions');
      } catch (e) {
        return e as GatewayError;
      }
      throw new Error('no refusal');
    };
    expect(refusal({ 'x-fugu-session': 'x'.repeat(SESSION_MAX + 1) }, {}).body().error).toMatchObject({ param: 'x-fugu-session' });
    expect(refusal({}, { fugu: { session: 'sk-ant-secret' } }).body().error).toMatchObject({ param: 'fugu.session', message: expect.stringMatching(/never a secret/) });
    expect(refusal({}, { fugu: { session: 'two words' } }).status).toBe(400);
  });
});
