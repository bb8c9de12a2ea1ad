import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { exactMatch, extractChoice, extractNumber, multipleChoiceMatch, normalizeAnswer, numericMatch, tokenF1, verifierFor, verify } from './verifiers.ts';

describe('verifierFor', () => {
  it('maps source metrics to verifiers', () => {
    expect(verifierFor({ metric: 'em_mc' })).toBe('multiple-choice');
    expect(verifierFor({ metric: 'GSM8K' })).toBe('numeric');
    expect(verifierFor({ metric: 'MATH' })).toBe('numeric');
    expect(verifierFor({ metric: 'f1_score' })).toBe('f1');
    expect(verifierFor({ metric: 'code_eval' })).toBe('recorded');
    expect(verifierFor({ metric: 'commongen_coverage' })).toBe('recorded');
    expect(verifierFor({ metric: 'numeric' })).toBe('numeric');
    expect(verifierFor({ metric: 'bleu' })).toBe('exact-match');
    expect(verifierFor({})).toBe('exact-match');
  });

  it('uses the recorded score whenever the answer was replayed', () => {
    expect(verifierFor({ metric: 'em_mc' }, { replay: { score: 1 } })).toBe('recorded');
    const item = { id: 'x', metric: 'em_mc', groundTruth: 'A' };
    expect(verify(item, 'The answer is B', { replay: { score: 0.75 } })).toEqual({ score: 0.75, verifier: 'recorded' });
    expect(verify(item, 'The answer is A', { other: 1 })).toEqual({ score: 1, verifier: 'multiple-choice' });
  });

  it('refuses a replayed answer without a valid score, and a recorded metric without replay', () => {
    const item = { id: 'x', metric: 'code_eval', groundTruth: 'assert f() == 1' };
    expect(() => verify(item, 'def f(): return 1', { replay: { score: 3 } })).toThrow(InputError);
    expect(() => verify(item, 'def f(): return 1', { replay: {} })).toThrow(/recorded score/);
    expect(() => verify(item, 'def f(): return 1')).toThrow(/recorded outcome/);
  });

  it('needs a ground truth for answer-checking verifiers', () => {
    expect(() => verify({ id: 'x', metric: 'f1_score' }, 'text')).toThrow(/no ground truth/);
  });
});

describe('exact-match', () => {
  it('normalises case, punctuation, articles and whitespace', () => {
    expect(normalizeAnswer('  The  Eiffel-Tower!! ')).toBe('eiffel tower');
    expect(exactMatch('the Beatles.', 'Beatles')).toBe(1);
    expect(exactMatch('An apple', 'apple')).toBe(1);
    expect(exactMatch('Paris, France', 'Paris')).toBe(0);
  });

  it('finds the final answer in a verbose reply', () => {
    expect(exactMatch('Let me think about the capitals.\nThe answer is Paris.', 'paris')).toBe(1);
    expect(exactMatch('Reasoning...\n\\boxed{Paris}', 'Paris')).toBe(1);
    expect(exactMatch('Reasoning here\nParis', 'Paris')).toBe(1);
    expect(exactMatch('The answer is London.', 'Paris')).toBe(0);
  });
});

describe('f1', () => {
  it('computes SQuAD token F1', () => {
    expect(tokenF1('Sammy Davis Jr', 'Sammy Davis, Jr')).toBe(1);
    // 2 common of 3 predicted, 2 of 2 truth: P=2/3, R=1 -> 0.8
    expect(tokenF1('Davis Jr Sammy Smith'.split(' ').slice(0, 3).join(' ') + ' x', 'Davis Jr')).toBeCloseTo((2 * 0.5 * 1) / 1.5, 12);
    expect(tokenF1('the cat sat', 'cat sat')).toBe(1); // articles dropped
    expect(tokenF1('red red red', 'red')).toBeCloseTo((2 * (1 / 3) * 1) / (1 / 3 + 1), 12); // counted once
    expect(tokenF1('', '')).toBe(1);
    expect(tokenF1('a', 'something')).toBe(0); // "a" normalises to nothing
  });

  it('takes the best of the whole reply and its final answer', () => {
    const v = verify({ id: 'x', metric: 'f1_score', groundTruth: 'Ben Gibbard' }, 'I recall a long story about the band.\nFinal answer: Ben Gibbard');
    expect(v).toEqual({ score: 1, verifier: 'f1' });
  });
});

describe('numeric', () => {
  it('extracts the last number with commas, $, %, and signs', () => {
    expect(extractNumber('She pays $1,234.50 in total.')).toBe(1234.5);
    expect(extractNumber('It grew by 45%')).toBe(45);
    expect(extractNumber('From 3 to 5 we get -7')).toBe(-7);
    expect(extractNumber('3-5')).toBe(5); // a subtraction, not -5
    expect(extractNumber('x = 1,2')).toBe(2); // not a thousands group
    expect(extractNumber('no digits here')).toBeUndefined();
    expect(extractNumber('−12 degrees')).toBe(-12); // Unicode minus
  });

  it('prefers \\boxed{}, "####" and "the answer is" over later numbers', () => {
    expect(extractNumber('So \\boxed{42}. Check: 6*7=42, 43 is wrong')).toBe(42);
    expect(extractNumber('work...\n#### 20,000')).toBe(20000);
    expect(extractNumber('The answer is 7. (I considered 8 and 9.)')).toBe(7);
  });

  it('reads fractions', () => {
    expect(extractNumber('\\boxed{\\frac{3}{4}}')).toBe(0.75);
    expect(extractNumber('\\boxed{-\\dfrac{25}{4}}')).toBe(-6.25);
    expect(extractNumber('\\boxed{-\\frac32}')).toBe(-1.5);
    expect(extractNumber('the ratio is 3/4')).toBe(0.75);
    expect(numericMatch('\\boxed{5 \\text{ cm}}', 'so $\\boxed{5\\text{ cm}}$')).toBe(1);
    expect(numericMatch('about 5', 'so $\\boxed{5\\text{ cm}}$')).toBe(1);
  });

  it('compares with relative tolerance 1e-6', () => {
    expect(numericMatch('0.3333333', '\\boxed{\\frac{1}{3}}')).toBe(1);
    expect(numericMatch('0.333', '\\boxed{\\frac{1}{3}}')).toBe(0);
    expect(numericMatch('1000000.5', '#### 1000000')).toBe(1); // within 1e-6 relative
    expect(numericMatch('1000002', '#### 1000000')).toBe(0);
    expect(numericMatch('The answer is 60%', 'so 60% of students are girls\n#### 60')).toBe(1);
    expect(numericMatch('The answer is $18.00.', 'Janet makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18')).toBe(1);
  });

  it('uses GSM8K and MATH ground truths as the source writes them', () => {
    const gsm = { id: 'g', metric: 'GSM8K', groundTruth: 'Blake, was $60,000/3 = $<<60000/3=20000>>20,000.\n#### 20,000' };
    expect(verify(gsm, 'Each gets $20,000.')).toEqual({ score: 1, verifier: 'numeric' });
    expect(verify(gsm, 'Each gets $20,001.').score).toBe(0);
    const math = { id: 'm', metric: 'MATH', groundTruth: 'We have $a+b=80$ ... so the answer is $\\boxed{56}$.' };
    expect(verify(math, 'Frank answered \\boxed{56} correctly').score).toBe(1);
    expect(verify({ id: 'mgsm', metric: 'MATH', groundTruth: '1596' }, 'The total is 1,596 pets.').score).toBe(1);
  });

  it('compares non-numeric final answers as normalised LaTeX', () => {
    const gt = 'Therefore $\\boxed{\\frac{25\\pi}{2}}$.';
    expect(numericMatch('The area is \\boxed{\\dfrac{25 \\pi}{2}}', gt)).toBe(1);
    expect(numericMatch('The area is \\boxed{\\frac{25\\pi}{3}}', gt)).toBe(0);
    expect(numericMatch('so \\boxed{(-\\infty, 5) \\cup (5, \\infty)}', '\\boxed{(-\\infty,5)\\cup (5,\\infty)}')).toBe(1);
    expect(numericMatch('\\boxed{y = -2x+1}', '\\boxed{y=-2x+1}')).toBe(1);
  });
});

describe('multiple-choice', () => {
  const choices = { labels: ['A', 'B', 'C', 'D'], texts: ['turning off lights', 'using public transportation', 'throwing away aluminum cans', 'opening windows'] };

  it('extracts labels from the usual phrasings', () => {
    expect(extractChoice('(B)')).toBe('B');
    expect(extractChoice('Answer: B')).toBe('B');
    expect(extractChoice('the answer is b')).toBe('B');
    expect(extractChoice('The correct answer is: (C) because ...')).toBe('C');
    expect(extractChoice('**Answer: D**')).toBe('D');
    expect(extractChoice('B. using public transportation')).toBe('B');
    expect(extractChoice('C')).toBe('C');
    expect(extractChoice('I first thought (A), but on reflection (D).')).toBe('D');
    expect(extractChoice('\\boxed{C}')).toBe('C');
    expect(extractChoice('Option A is wrong. The answer is C, since ...')).toBe('C');
  });

  it('does not mistake an article for a label', () => {
    expect(extractChoice('the answer is a cat')).toBeUndefined();
    expect(extractChoice('I think the answer is b.')).toBe('B');
  });

  it('matches the option text when no label is given', () => {
    expect(extractChoice('You should be using public transportation.', choices)).toBe('B');
    expect(extractChoice('Either turning off lights or opening windows', choices)).toBeUndefined(); // two options named
  });

  it('uses the item labels (numeric labels too)', () => {
    const numeric = { labels: ['1', '2', '3', '4'], texts: ['red', 'blue', 'green', 'dark green'] };
    expect(extractChoice('The answer is 3', numeric)).toBe('3');
    expect(extractChoice('(2)', numeric)).toBe('2');
    expect(extractChoice('It is dark green', numeric)).toBe('4'); // nested option texts: the longer one
  });

  it('scores against a label or an option-text ground truth', () => {
    expect(multipleChoiceMatch('The answer is B', 'B', choices)).toBe(1);
    expect(multipleChoiceMatch('The answer is b', 'B')).toBe(1);
    expect(multipleChoiceMatch('The answer is C', 'B', choices)).toBe(0);
    expect(multipleChoiceMatch('(B)', 'using public transportation', choices)).toBe(1);
    expect(multipleChoiceMatch('I cannot tell', 'B', choices)).toBe(0);
    expect(verify({ id: 'x', metric: 'em_mc', groundTruth: 'D', choices }, 'Answer: (D)')).toEqual({ score: 1, verifier: 'multiple-choice' });
  });
});
