import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderSessionReport, workerSwitches, workerTotals, type SessionReportData, type SessionTurn } from './session-report.ts';

const turn = (i: number, worker: string, cost: bigint, toolCalls: string[] = [], more: Partial<SessionTurn> = {}): SessionTurn => ({
  at: new Date(Date.parse('2026-12-06T10:00:00Z') + i * 4000).toISOString(), requestId: `req_${i}`, route: '/v1/messages', model: 'fugu', worker, prob: 0.97, fallbacks: [],
  tokensIn: 1000 + 300 * i, tokensOut: 40, cost, status: 200, errorCode: null, toolCalls, workflowId: null, ...more,
});

export const exampleSessionReportData: SessionReportData = {
  session: 'f6a1f33f-46c7-4dd3-a64d-594834ebca7c',
  turns: [
    turn(0, 'builder', 1_160_000_000n, ['Read']),
    turn(1, 'debugger', 4_500_000_000n, ['Grep', 'Read']),
    turn(2, 'builder', 1_900_000_000n, ['Edit']),
    turn(3, 'debugger', 7_200_000_000n, ['Bash']),
    turn(4, 'debugger', 7_900_000_000n, [], { fallbacks: ['builder'] }),
    turn(5, 'builder', 2_400_000_000n, [], { status: 502, errorCode: 'provider_error', prob: null }),
  ],
};

describe('the session report', () => {
  it('per turn the worker and its cost, in order; the strip; totals per worker; the same data, the same bytes', () => {
    const html = renderSessionReport(exampleSessionReportData);
    if (process.env.FUGU_REPORT_OUT) writeFileSync(process.env.FUGU_REPORT_OUT, html);
    const rows = [...html.matchAll(/<tr><td class="num">(\d+)<\/td>.*?<\/span>([a-z]+)(?:<span|<\/td>).*?<td class="num">(\$[0-9.]+)<\/td>/g)].map((m) => [Number(m[1]), m[2], m[3]]);
    expect(rows).toEqual([
      [1, 'builder', '$0.00116'], [2, 'debugger', '$0.0045'], [3, 'builder', '$0.0019'], [4, 'debugger', '$0.0072'], [5, 'debugger', '$0.0079'], [6, 'builder', '$0.0024'],
    ]);
    // the strip: one cell per turn, numbered, its worker in its tooltip
    expect(html.match(/<g class="turn">/g)).toHaveLength(6);
    expect(html).toContain('<title>turn 2: debugger · $0.0045 · 1,300 in / 40 out · tools Grep, Read</title>');
    expect(html).toContain('after builder failed');
    expect(html).toContain('provider_error');
    expect(html).toContain('4 of 5 turn changes');
    expect(renderSessionReport(exampleSessionReportData)).toBe(html);
  });

  it('totals per worker in order of first use, and the switches between turns', () => {
    expect(workerTotals(exampleSessionReportData.turns).map((w) => [w.worker, w.turns, w.cost])).toEqual([
      ['builder', 3, 5_460_000_000n],
      ['debugger', 3, 19_600_000_000n],
    ]);
    expect(workerSwitches(exampleSessionReportData.turns)).toBe(4);
    expect(renderSessionReport({ session: 's', turns: [] })).toContain('No request of this session is recorded.');
  });
});
