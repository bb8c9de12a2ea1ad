import { describe, expect, it } from 'vitest';
import { parseToolCallId, signToolCallId, verifyToolCallId } from './ids.ts';

const secret = Buffer.from('0123456789abcdef0123456789abcdef');
const ref = { workflowId: 4211, step: 2, seq: 7 };

describe('fugu-ultra tool-call ids', () => {
  it('round-trip: the id names its workflow, step and sequence, and verifies for its key and conversation only', () => {
    const id = signToolCallId(secret, 'key-a', 'conv_1', ref);
    expect(id).toMatch(/^call_fu_4211_2_7_[A-Za-z0-9_-]{22}$/);
    expect(id.length).toBeLessThanOrEqual(64);
    expect(parseToolCallId(id)).toMatchObject(ref);
    expect(verifyToolCallId(secret, 'key-a', 'conv_1', id)).toBe(true);
    expect(verifyToolCallId(secret, 'key-b', 'conv_1', id)).toBe(false);
    expect(verifyToolCallId(secret, null, 'conv_1', id)).toBe(false);
    expect(verifyToolCallId(secret, 'key-a', 'conv_2', id)).toBe(false);
    expect(verifyToolCallId(Buffer.from('another secret of the same size!'), 'key-a', 'conv_1', id)).toBe(false);
  });

  it('an altered id does not verify: another step, sequence or workflow under the same signature', () => {
    const id = signToolCallId(secret, 'key-a', 'conv_1', ref);
    const sig = id.slice(-22);
    for (const forged of [`call_fu_4211_1_7_${sig}`, `call_fu_4211_2_8_${sig}`, `call_fu_4212_2_7_${sig}`]) {
      expect(parseToolCallId(forged)).toBeDefined();
      expect(verifyToolCallId(secret, 'key-a', 'conv_1', forged)).toBe(false);
    }
  });

  it('ids that are not fugu-ultra ids parse to nothing', () => {
    for (const id of ['call_abc', 'call_fu_1_2_3', 'call_fu_x_2_3_AAAAAAAAAAAAAAAAAAAAAA', `call_fu_1_2_3_${'A'.repeat(23)}`]) expect(parseToolCallId(id)).toBeUndefined();
  });
});
