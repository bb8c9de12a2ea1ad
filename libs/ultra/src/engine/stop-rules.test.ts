import { describe, expect, it } from 'vitest';
import { budgetPico, cutAtTokenBound, finishReasonOf, overBudget } from './stop-rules.ts';

describe('stop rules', () => {
  it('the budget stops new steps once it is spent, not before', () => {
    const b = budgetPico({ maxUsd: '0.000002' });
    expect(b).toBe(2_000_000n);
    expect(overBudget(b, 1_999_999n)).toBe(false);
    expect(overBudget(b, 2_000_000n)).toBe(true);
    expect(overBudget(budgetPico({}), 10n ** 20n)).toBe(false);
  });

  it('a cut answer ends the workflow only under the per-step token bound', () => {
    expect(cutAtTokenBound({ maxTokensPerStep: 5 }, 'length')).toBe(true);
    expect(cutAtTokenBound({ maxTokensPerStep: 5 }, 'stop')).toBe(false);
    expect(cutAtTokenBound({}, 'length')).toBe(false);
  });

  it('the finish reason is what ended the workflow, else answered or the tool-turn bound', () => {
    expect(finishReasonOf('budget-tokens', true)).toBe('budget-tokens');
    expect(finishReasonOf(undefined, true)).toBe('budget-tool-turns');
    expect(finishReasonOf(undefined)).toBe('answered');
  });
});
