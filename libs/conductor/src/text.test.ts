import { InputError } from '@fugu/core';
import { describe, expect, it } from 'vitest';
import { dropThinking, parseWorkflow, quoteString, renderWorkflow, type ParseResult } from './text.ts';
import type { Workflow } from './workflow.ts';

const opts = { poolSize: 3 };
const ok = (res: ParseResult): Workflow => {
  if (!res.ok) throw new Error(`expected a workflow, got: ${res.error.message}`);
  return res.workflow;
};
const err = (res: ParseResult) => {
  if (res.ok) throw new Error(`expected a failure, got ${JSON.stringify(res.workflow)}`);
  return res.error;
};

const threeSteps: Workflow = {
  steps: [
    { worker: 0, subtask: 'Solve the problem.', access: 'none' },
    { worker: 2, subtask: 'Solve it another way.', access: 'none' },
    { worker: 1, subtask: 'Compare both and answer.', access: 'all' },
  ],
};

describe('renderWorkflow', () => {
  it('writes the three lists exactly', () => {
    expect(renderWorkflow(threeSteps)).toBe(
      'model id = [0, 2, 1]\nsubtasks = ["Solve the problem.", "Solve it another way.", "Compare both and answer."]\naccess list = [[], [], "all"]',
    );
    expect(renderWorkflow({ steps: [{ worker: 0, subtask: 'a', access: 'none' }, { worker: 0, subtask: 'b', access: [0] }] })).toContain('access list = [[], [0]]');
  });

  it('escapes quotes, backslashes and control characters; keeps \\n before a letter from reading as LaTeX', () => {
    expect(quoteString('say "hi" \\ back')).toBe('"say \\"hi\\" \\\\ back"');
    expect(quoteString('a\nb')).toBe('"a\\u000ab"');
    expect(quoteString('a\n1')).toBe('"a\\n1"');
    expect(quoteString('x\ud800y')).toBe('"x\\ud800y"');
    expect(quoteString('\u{1f600}')).toBe('"\u{1f600}"');
  });

  it('round-trips subtasks with quotes, LaTeX, unicode and list-like text', () => {
    const wf: Workflow = {
      steps: [
        { worker: 1, subtask: 'Show x \\neq y and \\frac{1}{2} < \\times; "quoted", \u2018smart\u2019 \u201cones\u201d', access: 'none' },
        { worker: 0, subtask: 'model id = [2]\nsubtasks: ["x"] <think>no</think> access list = [[0]]', access: [0] },
        { worker: 2, subtask: '\u4f60\u597d \u{1f469}\u200d\u{1f52c} line\n\tend\\', access: 'all' },
      ],
    };
    expect(ok(parseWorkflow(renderWorkflow(wf), opts))).toEqual(wf);
  });
});

describe('parseWorkflow: tolerance', () => {
  it('reads the lists after reasoning text, inside code fences, with bullets and bold labels', () => {
    const text = [
      'The question is arithmetic; two solvers and a judge will do.',
      '```python',
      '- **Model IDs**: [0, 2, 1]',
      '- **Subtasks**: ["Solve the problem.", "Solve it another way.", "Compare both and answer."]',
      '- **Access list**: [[], [], "all"]',
      '```',
    ].join('\n');
    expect(ok(parseWorkflow(text, opts))).toEqual(threeSteps);
  });

  it('accepts the label spellings model id / model_id / model ids / modelIds, sub_tasks, access_list', () => {
    for (const [m, s, a] of [
      ['model id', 'subtasks', 'access list'],
      ['model_id', 'sub_tasks', 'access_list'],
      ['model ids', 'subtask', 'access lists'],
      ['modelIds', 'Subtasks', 'ACCESS LIST'],
      ['"model_id"', '"subtasks"', '"access_list"'],
    ]) {
      const text = `${m}: [0, 2, 1]\n${s} = ["Solve the problem.", "Solve it another way.", "Compare both and answer."]\n${a} := [[], [], "all"]`;
      expect(ok(parseWorkflow(text, opts))).toEqual(threeSteps);
    }
  });

  it('reads a JSON object form', () => {
    const text = '{"model_id": [0, 2, 1], "subtasks": ["Solve the problem.", "Solve it another way.", "Compare both and answer."], "access_list": [[], [], ["all"]]}';
    expect(ok(parseWorkflow(text, opts))).toEqual(threeSteps);
  });

  it('ignores lists inside <think> blocks, and text before a stray </think>', () => {
    const inner = 'model id = [1]\nsubtasks = ["draft"]\naccess list = [[]]';
    const final = renderWorkflow(threeSteps);
    expect(ok(parseWorkflow(`<think>${inner}</think>\n${final}`, opts))).toEqual(threeSteps);
    expect(ok(parseWorkflow(`${inner}\n</think>\n${final}`, opts))).toEqual(threeSteps);
    expect(ok(parseWorkflow(`${final}<thinking>${inner}</thinking>`, opts))).toEqual(threeSteps);
    const e = err(parseWorkflow(`<think>${inner}</think>`, opts));
    expect(e).toMatchObject({ list: 'model id' });
    expect(e.message).toContain('outside <think> blocks');
    expect(err(parseWorkflow(`<think>${final}`, opts)).message).toContain('unclosed <think>');
    expect(dropThinking('a<think>b<think>c</think>d</think>e')).toEqual({ text: 'ae', dropped: true, unclosed: false });
  });

  it('reads single, double and smart quotes, apostrophes inside single quotes', () => {
    const text = "model id = [0, 1, 2]\nsubtasks = ['What's 2+2?', \u201cCheck \u201cit\u201d\u201d, \u2018the students\u2019 view\u2019]\naccess list = [[], 'all', [0, 1]]";
    expect(ok(parseWorkflow(text, opts)).steps.map((s) => s.subtask)).toEqual(["What's 2+2?", 'Check \u201cit\u201d', 'the students\u2019 view']);
  });

  it('reads escaped quotes inside subtasks and keeps unescaped LaTeX', () => {
    const text = 'model id = [0]\nsubtasks = ["Say \\"yes\\" if x \\neq 0 and \\frac{a}{b} \\times 2; line\\nbreak \\u00e9"]\naccess list = [[]]';
    expect(ok(parseWorkflow(text, opts)).steps[0]!.subtask).toBe('Say "yes" if x \\neq 0 and \\frac{a}{b} \\times 2; line\nbreak \u00e9');
  });

  it('reads access entries as "all", ["all"], [], "none", [0, 2], quoted indices, a bare index', () => {
    const text = 'model id = [0, 0, 0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d", "e", "f"]\naccess list = ["none", ["all"], [], "all", [0, "2", 2], 3]';
    const steps = ok(parseWorkflow(text, { poolSize: 1, maxSteps: 6 })).steps;
    expect(steps.map((s) => s.access)).toEqual(['none', 'all', 'none', 'all', [0, 2], [3]]);
  });

  it('reads ids written as strings or "agent 2"', () => {
    const text = 'model id = ["0", agent 2, #1]\nsubtasks = ["a", "b", "c"]\naccess list = [[], [], [0, 1]]';
    expect(ok(parseWorkflow(text, opts)).steps.map((s) => s.worker)).toEqual([0, 2, 1]);
  });

  it('reads entries without commas: ids separated by spaces, quoted subtasks one a line', () => {
    const text = 'model id = [0 2 1]\nsubtasks = [\n  "Solve the problem."\n  "Solve it another way."\n  "Compare both and answer."\n]\naccess list = [[], [], "all"]';
    expect(ok(parseWorkflow(text, opts))).toEqual(threeSteps);
  });

  it('reads bullet lists under the labels', () => {
    const text = 'model ids:\n- 0\n- 1\n\nsubtasks:\n1. Solve it, carefully\n2. "Check"\naccess list:\n- none\n- [0]';
    expect(ok(parseWorkflow(text, opts))).toEqual({
      steps: [
        { worker: 0, subtask: 'Solve it, carefully', access: 'none' },
        { worker: 1, subtask: 'Check', access: [0] },
      ],
    });
  });

  it('takes the last complete occurrence of each list when the model repeats itself', () => {
    const first = 'model id = [0]\nsubtasks = ["x"]\naccess list = [[]]';
    const text = `${first}\nOn second thought:\n${renderWorkflow(threeSteps)}\nmodel id = [2, 2`;
    expect(ok(parseWorkflow(text, opts))).toEqual(threeSteps);
  });

  it('ignores list labels that occur inside a subtask', () => {
    const text = 'model id = [1]\nsubtasks = ["Explain what model id = [0] and access list = [[]] mean"]\naccess list = [[]]';
    expect(ok(parseWorkflow(text, opts)).steps).toEqual([{ worker: 1, subtask: 'Explain what model id = [0] and access list = [[]] mean', access: 'none' }]);
  });
});

describe('parseWorkflow: faults name the list and the step', () => {
  const cases: Array<[string, string, { list: string; step?: number }, string]> = [
    ['no lists', 'I cannot decide.', { list: 'model id' }, 'no `model id = [...]` list found'],
    ['no subtasks', 'model id = [0]\naccess list = [[]]', { list: 'subtasks' }, 'no `subtasks = [...]` list found'],
    ['empty', 'model id = []\nsubtasks = []\naccess list = []', { list: 'model id' }, 'the list is empty'],
    ['too many', `model id = [0, 0, 0, 0, 0, 0]\nsubtasks = ["a", "b", "c", "d", "e", "f"]\naccess list = [[], [], [], [], [], []]`, { list: 'model id', step: 6 }, 'more than the maximum of 5'],
    ['short subtasks', 'model id = [0, 1]\nsubtasks = ["a"]\naccess list = [[], []]', { list: 'subtasks', step: 2 }, '1 entries but model id has 2'],
    ['long access', 'model id = [0]\nsubtasks = ["a"]\naccess list = [[], []]', { list: 'access list', step: 2 }, '2 entries but model id has 1'],
    ['id out of range', 'model id = [0, 3]\nsubtasks = ["a", "b"]\naccess list = [[], []]', { list: 'model id', step: 2 }, 'worker 3 is not in the pool (ids 0 to 2)'],
    ['id not a number', 'model id = [0, gpt-4]\nsubtasks = ["a", "b"]\naccess list = [[], []]', { list: 'model id', step: 2 }, 'expected a worker id'],
    ['negative id', 'model id = [-1]\nsubtasks = ["a"]\naccess list = [[]]', { list: 'model id', step: 1 }, 'expected a worker id'],
    ['empty subtask', 'model id = [0, 1]\nsubtasks = ["a", "  "]\naccess list = [[], []]', { list: 'subtasks', step: 2 }, 'the subtask is empty'],
    ['forward access', 'model id = [0, 1]\nsubtasks = ["a", "b"]\naccess list = [[1], []]', { list: 'access list', step: 1 }, 'index 1 is not an earlier step'],
    ['self access', 'model id = [0, 1]\nsubtasks = ["a", "b"]\naccess list = [[], [1]]', { list: 'access list', step: 2 }, 'index 1 is not an earlier step (it may see indices 0 to 0)'],
    ['bad access', 'model id = [0, 1]\nsubtasks = ["a", "b"]\naccess list = [[], "some"]', { list: 'access list', step: 2 }, 'expected "all", [] (none)'],
    ['mixed access', 'model id = [0, 1]\nsubtasks = ["a", "b"]\naccess list = [[], [0, "all"]]', { list: 'access list', step: 2 }, 'mixed with step indices'],
    ['unclosed list', 'model id = [0, 1\nsubtasks = ["a", "b"]\naccess list = [[], []]', { list: 'model id', step: 3 }, 'not closed before the next list'],
    ['unclosed string', 'model id = [0, 1]\nsubtasks = ["a", "b\naccess list = [[], []]', { list: 'subtasks', step: 2 }, 'a quoted entry is not closed'],
    ['truncated', 'model id = [0, 1]\nsubtasks = ["a", "b"]\naccess list = [[], [0', { list: 'access list', step: 2 }, 'not closed'],
  ];
  for (const [name, text, where, message] of cases) {
    it(name, () => {
      const e = err(parseWorkflow(text, opts));
      expect({ list: e.list, step: e.step }).toEqual({ list: where.list, step: where.step });
      expect(e.message).toContain(message);
      expect(e.message.startsWith(where.step ? `${where.list}, step ${where.step} (1-based; index ${where.step - 1} in the lists)` : where.list)).toBe(true);
    });
  }

  it('never throws on odd input; bad options are an InputError naming them', () => {
    for (const x of ['', '[', '"', '\ud800', 'model id = ' + '['.repeat(50), null, undefined, 42]) {
      expect(() => parseWorkflow(x as string, opts)).not.toThrow();
    }
    expect(() => parseWorkflow('', { poolSize: 3, maxSteps: 0 })).toThrow(InputError);
    expect(() => parseWorkflow('', { poolSize: 3, maxSteps: 11 })).toThrow(/maxSteps/);
    expect(() => parseWorkflow('', { poolSize: 0 })).toThrow(/poolSize/);
  });

  it('honours a configured maximum number of steps', () => {
    const text = 'model id = [0, 1]\nsubtasks = ["a", "b"]\naccess list = [[], "all"]';
    expect(err(parseWorkflow(text, { poolSize: 2, maxSteps: 1 }))).toMatchObject({ list: 'model id', step: 2 });
    expect(parseWorkflow(text, { poolSize: 2, maxSteps: 2 }).ok).toBe(true);
  });
});
