// Prints the parser timings quoted in the README (a typical completion and the huge inputs of
// the fuzz test). A measurement, not a test: nothing asserts a duration.
//   node libs/conductor/scripts/parse-timing.ts
import { parseWorkflow, renderWorkflow, type Workflow } from '../src/index.ts';

const workflow: Workflow = {
  steps: [0, 1, 2, 1, 0].map((worker, i) => ({ worker, subtask: `Subtask ${i}: solve the problem carefully and explain.`, access: i === 4 ? 'all' : 'none' })),
};
const cases: Array<[string, string, number]> = [
  ['typical: 50 sentences of reasoning, 5 steps', 'Some reasoning first. '.repeat(50) + renderWorkflow(workflow), 5000],
  ['1.2 MB of junk, then the workflow', 'x [ " , = '.repeat(120_000) + '\n' + renderWorkflow(workflow), 5],
  ['40,000 unclosed `model id = ["`', 'model id = ["'.repeat(40_000), 5],
  ['a 600,000-character unclosed list', `model id = [${'0, '.repeat(200_000)}`, 5],
];
console.log('| input | characters | ms per parse |\n|---|---:|---:|');
for (const [name, text, n] of cases) {
  parseWorkflow(text, { poolSize: 3 });
  const start = performance.now();
  for (let i = 0; i < n; i++) parseWorkflow(text, { poolSize: 3 });
  console.log(`| ${name} | ${text.length.toLocaleString('en')} | ${((performance.now() - start) / n).toFixed(3)} |`);
}
