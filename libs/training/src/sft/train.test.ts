import { describe, expect, it } from 'vitest';
import { sftOutcomeText } from './train.ts';

// the demo's run: val reward best at epoch 2, val KL still falling to epoch 7, where patience 5 stopped it
const history = [0.59, 0.5615, 0.556, 0.551, 0.547, 0.544, 0.541].map((valLoss, i) => ({ epoch: i + 1, trainLoss: 0.6, valLoss, valReward: i === 1 ? 0.7412 : 0.73 - i * 0.001 }));

describe('sftOutcomeText', () => {
  it('says what the kept epoch was chosen by, where the lowest val KL was, and why training stopped', () => {
    const text = sftOutcomeText({ history, bestEpoch: 2, bestValLoss: 0.5615 }, { epochs: 40, patience: 5, selectBy: 'reward' });
    expect(text).toBe(
      'best epoch 2 by val reward 0.7412 (its val KL 0.56150; the lowest val KL, 0.54100, at epoch 7); ' +
        'stopped at epoch 7 of 40: early stopping, no better val reward in the 5 epochs after epoch 2 (patience 5)',
    );
  });

  it('selected by KL, and every epoch run', () => {
    const text = sftOutcomeText({ history, bestEpoch: 7, bestValLoss: 0.541 }, { epochs: 7, patience: 5, selectBy: 'loss' });
    expect(text).toBe('best epoch 7 by val KL 0.54100 (its val reward 0.7240); ran all 7 epochs');
  });
});
