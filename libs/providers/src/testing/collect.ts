// Read a ChatModel stream to its end (tests and simple callers).

import type { ToolCall } from '@fugu/core';
import type { StreamEvent } from '@fugu/core';

export type CollectedStream = {
  events: StreamEvent[];
  text: string;
  deltas: string[];
  toolCalls: ToolCall[];
  finish: Extract<StreamEvent, { type: 'finish' }> | undefined;
};

export async function collectStream(stream: AsyncIterable<StreamEvent>): Promise<CollectedStream> {
  const events: StreamEvent[] = [];
  for await (const ev of stream) events.push(ev);
  const deltas = events.flatMap((e) => (e.type === 'text-delta' ? [e.text] : []));
  return {
    events,
    deltas,
    text: deltas.join(''),
    toolCalls: events.flatMap((e) => (e.type === 'tool-call' ? [e.toolCall] : [])),
    finish: events.find((e): e is Extract<StreamEvent, { type: 'finish' }> => e.type === 'finish'),
  };
}
