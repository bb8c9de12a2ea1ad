import { describe, expect, it } from 'vitest';
import type { ConductorReportData } from './conductor-report-data.ts';
import { exampleConductorReportData } from './conductor-report-example.ts';
import { REPLAY_NOTE, renderConductorReport } from './conductor-report.ts';
import { contentWidth, tableMinWidths } from './testing/table-width.ts';

const EVIL = '<script>&"x"';
const EVIL_ESCAPED = '&lt;script&gt;&amp;&quot;x&quot;';

const count = (s: string, sub: string) => s.split(sub).length - 1;
const escRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The HTML of the results table's row for a name (escaped). */
function resultRow(html: string, name: string): string {
  const m = new RegExp(`<tr class="(?:conductor|reference)"><th scope="row">${escRe(name)}(?: <span class="tag">reference</span>)?</th>.*?</tr>`).exec(html);
  expect(m, `row ${name}`).not.toBeNull();
  return m![0];
}

function fixture(): ConductorReportData {
  const d = exampleConductorReportData();
  d.run.id = `run-${EVIL}`;
  d.results[0]!.name = `fixed:single:${EVIL}`;
  d.examples[0]!.question = 'Is 3 < 5 && 5 > 4? Answer with <b>yes</b> or no.';
  d.examples[0]!.steps[0]!.answer = `${'long answer '.repeat(40)}END`;
  d.examples[0]!.steps[1]!.subtask = `check ${EVIL}`;
  return d;
}

describe('renderConductorReport', () => {
  const data = fixture();
  const html = renderConductorReport(data);

  it('is one self-contained HTML document without scripts', () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    expect(count(html, '<html')).toBe(1);
    expect(count(html, '</html>')).toBe(1);
    expect(html).not.toMatch(/<script|<link|<img|@import|url\(|https?:\/\/(?!www\.w3\.org\/2000\/svg)/i);
    expect(html).not.toMatch(/NaN|undefined|Infinity|\[object/);
  });

  it('shows the run facts in the header', () => {
    const head = html.slice(html.indexOf('<header>'), html.indexOf('</header>'));
    expect(head).toContain(`run-${EVIL_ESCAPED}`);
    for (const text of ['llmrouter-replay', 'test', '600 items', 'seed 7 · 1 repeat', '>5<', 'replay (simulated)', '2025-06-10 09:12:44 UTC', '2025-06-10 09:31:02 UTC']) {
      expect(head).toContain(text);
    }
    expect(head).toContain('<span class="status ok">done</span>');
  });

  it('has one results row per result, references marked, figures formatted with their sd', () => {
    expect(count(html, '<tr class="conductor">')).toBe(data.results.filter((r) => r.kind === 'conductor').length);
    expect(count(html, '<tr class="reference">')).toBe(data.results.filter((r) => r.kind === 'reference').length);
    for (const r of data.results) resultRow(html, r.name.replace(EVIL, EVIL_ESCAPED));
    const moa = resultRow(html, 'fixed:moa:3');
    expect(moa).toContain('0.851<span class="sd">± 0.006</span>');
    expect(moa).toContain('70.2%<span class="sd">± 1.2%</span>');
    expect(moa).toContain('$0.00137'); // workers
    expect(moa).toContain('3,620'); // tokens per item, workers
    expect(moa).toContain('not measured'); // a replayed run: see below
    expect(moa).toContain('>4.00<'); // steps per workflow
    const llm = resultRow(html, 'llm:llama3-70b-instruct');
    expect(llm).toContain('class="num warn">8.5%'); // parse failures
    expect(llm).toContain('$0.000340'); // conductor dollars
    expect(llm).toContain('$0.00103<span class="sd">± $0.000040</span>'); // total ± sd (2 significant digits)
    const oracle = resultRow(html, 'oracle');
    expect(oracle).toContain('<span class="tag">reference</span>');
    expect(oracle).toMatch(/<td class="num">—<\/td><td class="num">—<\/td><td class="num">1\.00<\/td><\/tr>$/); // no latency
    // the best conductor (not a reference) is marked
    expect(resultRow(html, 'fixed:router:ckpt-2025-06-03-sft-7c1e')).toContain('class="num best"');
    expect(oracle).not.toContain('best');
  });

  it('says latency is not measured in the replay environment instead of showing a number; live runs show it (issue 28)', () => {
    for (const r of data.results.filter((x) => x.kind === 'conductor')) {
      const row = resultRow(html, r.name.replace(EVIL, EVIL_ESCAPED));
      expect(row).toContain('<td class="num unmeasured" colspan="2"');
      expect(row).toContain('not measured<sup>*</sup>');
      expect(row).not.toMatch(/\d ms</);
    }
    expect(html).toContain('<sup>*</sup> Latency not measured: replay workers answer at once from recorded outcomes');
    const live = fixture();
    live.run.environment = 'live';
    live.results[1]!.latencyMs = { mean: 0, p95: 0 }; // recorded no time: not a measurement either
    const l = renderConductorReport(live);
    const moa = resultRow(l, 'fixed:moa:3');
    expect(moa).toContain('not measured');
    expect(moa).not.toContain('0 ms');
    const chain = resultRow(l, 'fixed:chain');
    expect(chain).toContain('3,720 ms');
    expect(chain).toContain('7,990 ms');
  });

  it('keeps the results table (USD, tokens, latency, steps) within the page at 1400 px (issue 28)', () => {
    const page = contentWidth(html, 1400);
    for (const w of tableMinWidths(html)) expect(w.width, w.table).toBeLessThanOrEqual(page);
    expect(tableMinWidths(html).map((w) => w.table)).toContain('results');
  });

  it('says in the caption whether the Pareto frontier is a line or a single row', () => {
    const cap = (h: string) => /<title>Accuracy vs USD per item<\/title>[\s\S]*?<figcaption>([\s\S]*?)<\/figcaption>/.exec(h)![1]!;
    // the example's oracle is the cheapest and the most accurate row
    expect(cap(html)).toContain('no dashed line: one row, oracle, is at least as cheap and as accurate as every other');
    const d = fixture();
    d.results = d.results.filter((r) => r.name !== 'oracle' && !r.name.startsWith('fixed:router')); // the two cheapest and best
    expect(cap(renderConductorReport(d))).toContain('the dashed line joins the rows no other row beats on both');
  });

  it('draws the charts: reward with sd whiskers, accuracy vs cost, topologies, one worker chart per spec', () => {
    expect(count(html, '<svg ')).toBe(3 + Object.keys(data.workerDistribution).length);
    for (const title of ['Mean reward per conductor', 'Accuracy vs USD per item', 'Topologies per conductor', 'Workers per task: fixed:moa:3', 'Workers per task: policy:ckpt-init-3f2a']) {
      expect(html).toContain(`aria-label="${title}`);
    }
    expect(count(html, '<path class="whisker"')).toBe(data.results.length); // every row has seeds
    expect(html).toContain('>oracle 0.947<');
    // topologies: the llm conductor's bar has 5 segments, one of them unparsed
    expect(html).toMatch(/llm:llama3-70b-instruct \/ unparsed: 51/);
    // worker distribution: all tasks + 5 tasks per spec
    expect(html).toContain('>gsm8k (150)<');
    expect(html).toMatch(/All tasks \/ llama-3\.3-nemotron-super-49b-v1: 50%/); // moa: 0.5 on every task
  });

  it('lists the finish reasons per conductor', () => {
    const t = /<table class="finish">.*?<\/table>/s.exec(html)![0];
    for (const k of ['done', 'max-usd', 'max-steps', 'unparsed']) expect(t).toContain(`>${k}<`);
    expect(t).toMatch(/fixed:moa:3<\/th><td class="num">597<span class="note">99\.5%<\/span><\/td>/);
  });

  it('shows workflows step by step, escaping question and answers and shortening long answers', () => {
    expect(count(html, '<article class="workflow"')).toBe(data.examples.length);
    expect(html).toContain('Is 3 &lt; 5 &amp;&amp; 5 &gt; 4? Answer with &lt;b&gt;yes&lt;/b&gt; or no.');
    expect(html).not.toContain('<b>yes</b>');
    expect(html).toContain(`check ${EVIL_ESCAPED}`);
    expect(html).not.toContain('END'); // shortened
    expect(html).toContain('(483 characters; shortened)');
    expect(html).toContain('<td>0, 1, 2</td>'); // the aggregator sees the three proposers
    expect(html).toContain('<b>Final answer:</b> 11');
    // the unparsed one: its parse error, no steps, no final answer
    expect(html).toContain('<b>Parse error:</b> access list, step 3: may only see earlier steps (0, 1), not 3');
    expect(html).toContain('No steps ran.');
  });

  it('says the figures are simulated iff replay workers answered, with the parameters table', () => {
    expect(html).toContain('class="replay-note"');
    expect(html).toContain(REPLAY_NOTE);
    const replay = /<table class="replay">.*?<\/table>/s.exec(html)![0];
    expect(count(replay, '<tr><th scope="row">')).toBe(6);
    expect(replay).toMatch(/qwen2\.5-7b-instruct<\/th><td>small<\/td><td class="num">0\.800<\/td><td class="num">0\.500<\/td>/);
    expect(html).toContain('under the documented step model. A step that sees'); // one full stop
    expect(html).not.toContain('model..');

    // the documented presets name no source; a measured step model says where it comes from, in the note and above the table
    expect(html).not.toContain('Parameters from:');
    const measured = fixture();
    measured.run.replaySource = 'dylan-math-cot, point: measured on recorded runs of same-model gpt-3.5 agents, not this pool\'s workers';
    const ms = renderConductorReport(measured);
    expect(ms).toMatch(/class="replay-note".*Step model: dylan-math-cot, point: .*not this pool&#39;s workers\./s);
    expect(ms).toContain('<b>Parameters from:</b> dylan-math-cot, point');
    // parameters by the number of sources: shown beside the one-source table, only when the config has them
    expect(html).not.toContain('class="replay-sources"');
    measured.run.replayBySources = { '3': { adopt: 0.992, misled: 0.541 }, '2': { adopt: 0.782 } };
    const bys = renderConductorReport(measured);
    const rows = /<table class="replay-sources">.*?<\/table>/s.exec(bys)![0];
    expect(rows.indexOf('2 or more')).toBeLessThan(rows.indexOf('3 or more'));
    expect(rows).toMatch(/3 or more other answers<\/th><td class="num">as above<\/td><td class="num">0\.541<\/td><td class="num">0\.992<\/td>/);

    const mixed = fixture();
    mixed.run.environment = 'mixed';
    const m = renderConductorReport(mixed);
    expect(m).toContain(REPLAY_NOTE);
    expect(m).toContain('some are live');

    const live = fixture();
    live.run.environment = 'live';
    delete live.run.replay;
    const l = renderConductorReport(live);
    expect(l).not.toContain('class="replay-note"');
    expect(l).not.toContain(REPLAY_NOTE);
    expect(l).not.toContain('id="replay"');
    expect(l).not.toContain('simulation');
  });

  it('handles a run with no results, no distribution and no examples', () => {
    const d = fixture();
    d.results = [];
    d.workerDistribution = {};
    d.taskCounts = {};
    d.examples = [];
    d.run.sample = null;
    d.run.dataset = null;
    d.run.split = null;
    d.run.finishedAt = null;
    d.run.status = 'running';
    const h = renderConductorReport(d);
    expect(h).not.toMatch(/NaN|undefined|Infinity|<script/);
    expect(h).toContain('No results: the run has no finished workflows yet.');
    expect(h).toContain('No finish reasons recorded.');
    expect(h).toContain('No steps ran.');
    expect(h).toContain('No workflows to show.');
    expect(h).toContain('No data'); // empty charts
    expect(h).toContain('<span class="status warn">running</span>');
    expect(h).toContain('free questions');
  });

  it('is deterministic; the time shows only when given', () => {
    expect(renderConductorReport(fixture())).toBe(html);
    expect(html).not.toContain('Generated by fugu on');
    expect(renderConductorReport(data, { generatedAt: '2025-06-11T00:00:00Z' })).toContain('Generated by fugu on 2025-06-11 00:00:00 UTC');
  });

  it('renders NaN figures and rows without seeds', () => {
    const d = fixture();
    for (const r of d.results) delete r.seeds;
    d.results[1]!.meanReward = Number.NaN;
    d.results[1]!.usdPerItem = { conductor: Number.NaN, workers: Number.NaN };
    const h = renderConductorReport(d);
    expect(h).not.toMatch(/NaN|undefined|Infinity/);
    expect(h).not.toContain('± sd');
    expect(count(h, '<path class="whisker"')).toBe(0);
  });
});

describe('the bundled example', () => {
  it('renders', () => {
    const h = renderConductorReport(exampleConductorReportData());
    expect(h).not.toMatch(/NaN|undefined|Infinity/);
    expect(count(h, '<svg ')).toBe(6);
  });
});
