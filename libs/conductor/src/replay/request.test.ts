import { describe, expect, it } from 'vitest';
import { estimateTokens, InputError } from '@fugu/core';
import { REPLAY_PRESETS } from './params.ts';
import { answerReplayStep, REPLAY_STEP_OUTPUT_TOKENS, decodeReplayStepRequest, encodeReplayStepRequest, type ReplayStepRequest } from './request.ts';
import { ownOutcome, parseReplayAnswer, replayItemOf } from './model.ts';

const item = { id: 'test-000001', recorded: { a: { score: 1, tokensIn: 11, tokensOut: 22, answer: 'the recorded answer' }, b: { score: 0.4 }, c: { score: 0 } } };
const req = (sources: string[], seenTokens = 0): ReplayStepRequest => ({ seed: 5, sources, seenTokens, params: { ...REPLAY_PRESETS.large } });

describe('replay steps carried by a request', () => {
  it('round-trips through the metadata string; malformed values name the field', () => {
    const r = req(['a'], 300);
    expect(decodeReplayStepRequest(encodeReplayStepRequest(r))).toEqual(r);
    const field = (text: string) => {
      try {
        decodeReplayStepRequest(text);
      } catch (e) {
        expect(e).toBeInstanceOf(InputError);
        return (e as InputError).field;
      }
    };
    expect(field('{')).toBe('metadata.replayStep');
    expect(field(JSON.stringify({ ...r, seed: 1.5 }))).toBe('metadata.replayStep.seed');
    expect(field(JSON.stringify({ ...r, sources: ['a', 3] }))).toBe('metadata.replayStep.sources[1]');
    expect(field(JSON.stringify({ ...r, seenTokens: -1 }))).toBe('metadata.replayStep.seenTokens');
    expect(field(JSON.stringify({ ...r, params: { keep: 0.5 } }))).toMatch(/^metadata\.replayStep\.params/);
  });

  it('a step that sees nothing answers the worker\'s own outcome: the recorded one when 0 or 1, the per-(seed, item, worker) draw when fractional', () => {
    const a = answerReplayStep('a', item, req([]))!;
    expect(a.outcome).toEqual(item.recorded.a);
    expect(a.replay).toMatchObject({ rule: 'recorded', p: 1, correct: true });
    // a fractional score: the draw, the same one later steps see (reused per (seed, item, worker))
    const b = answerReplayStep('b', item, req([]))!;
    const drawn = ownOutcome(replayItemOf(item), 'b', 5);
    expect(b.replay.correct).toBe(drawn);
    expect(b.outcome.score).toBe(drawn ? 1 : 0);
    expect(b.outcome.answer).toMatch(/^\[replay:b\] recorded score 0\.4 \(rule recorded, outcome [01]\)$/);
    expect(answerReplayStep('nobody', item, req([]))).toBeUndefined();
  });

  it('a step that sees answers gets the simulated outcome (0 or 1), its marker text and the worker\'s recorded tokens; the same inputs give the same outcome', () => {
    const r = req(['a']);
    const x = answerReplayStep('c', item, r)!;
    expect([0, 1]).toContain(x.outcome.score);
    expect(x.replay.rule).toBe('adopt');
    expect(parseReplayAnswer(x.outcome.answer!)).toMatchObject({ worker: 'c', correct: x.outcome.score === 1, rule: 'adopt' });
    expect(answerReplayStep('c', item, r)).toEqual(x);
    const withTokens = answerReplayStep('a', item, req(['c']))!;
    expect(withTokens.outcome).toMatchObject({ tokensIn: 11, tokensOut: 22 });
    expect(withTokens.replay.rule).toBe('misled');
    // no recorded tokens or answer: the replay provider's default output length, not the marker's
    expect(x.outcome.tokensOut).toBe(REPLAY_STEP_OUTPUT_TOKENS);
    expect(answerReplayStep('b', item, req([]))!.outcome.tokensOut).toBe(REPLAY_STEP_OUTPUT_TOKENS);
  });

  it('a step that reads earlier answers counts them in its input tokens: recorded solo input (else the prompt\'s estimate) plus what it reads', () => {
    // a reads c's answer of 256 tokens: its recorded 11 input tokens plus 256
    expect(answerReplayStep('a', item, req(['c'], 256))!.outcome.tokensIn).toBe(11 + 256);
    // c recorded no tokens: the prompt's estimate plus the two answers it reads
    const prompt = 'x'.repeat(400);
    expect(answerReplayStep('c', item, req(['a', 'b'], 512), prompt)!.outcome.tokensIn).toBe(estimateTokens(prompt) + 512);
    // a re-reading its own answer has no source (its own outcome) but still reads that answer
    const self = answerReplayStep('a', item, req([], 22))!;
    expect(self.replay.rule).toBe('recorded');
    expect(self.outcome).toMatchObject({ score: 1, answer: 'the recorded answer', tokensIn: 11 + 22 });
    // a step that reads nothing keeps the recorded solo count (none recorded: left to the provider)
    expect(answerReplayStep('a', item, req([]))!.outcome.tokensIn).toBe(11);
    expect(answerReplayStep('c', item, req([]))!.outcome.tokensIn).toBeUndefined();
  });
});
