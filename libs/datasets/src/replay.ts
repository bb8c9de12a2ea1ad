// Recorded outcomes of one worker, looked up by item id or by prompt text: what the replay
// provider answers with. The interface matches libs/providers' ReplayStore structurally
// (datasets depends only on core, so it is declared here too).

import { InputError, type DatasetItem, type RecordedOutcome } from '@fugu/core';
import type { Dataset } from './format.ts';
import { promptIndex } from './normalize.ts';

export type ReplayHit = { itemId: string; outcome: RecordedOutcome; replay?: Record<string, unknown> };

export type ReplayStore = {
  /** by item id when given and known, else by exact prompt text, else by its replayKey (`metadata`: the request's, unused here) */
  lookup(prompt: string, itemId?: string, metadata?: Readonly<Record<string, string>>): ReplayHit | undefined;
};

/**
 * A ReplayStore over the recorded outcomes of `worker`. A prompt finds its item as
 * `promptIndex` finds it: the exact text, else its replayKey (case, whitespace and trailing
 * punctuation forgiven). When several items share a prompt or a key (LLMRouter has questions in
 * both train and test), a prompt lookup returns the first in order; pass the item id to get a
 * specific one. Throws an InputError if no item has a
 * recorded outcome for the worker.
 */
export function replayStoreFor(source: Dataset | readonly DatasetItem[], worker: string): ReplayStore {
  const items: readonly DatasetItem[] = Array.isArray(source) ? source : (source as Dataset).items;
  const byId = new Map<string, ReplayHit>();
  const recorded: Array<{ prompt: string; hit: ReplayHit }> = [];
  const others = new Set<string>();
  for (const item of items) {
    const outcome = item.recorded?.[worker];
    if (!outcome) {
      for (const w of Object.keys(item.recorded ?? {})) others.add(w);
      continue;
    }
    const hit = { itemId: item.id, outcome };
    byId.set(item.id, hit);
    recorded.push({ prompt: item.prompt, hit });
  }
  if (byId.size === 0) {
    const known = [...others];
    throw new InputError(`no recorded outcomes for worker "${worker}"${known.length ? ` (recorded workers: ${known.join(', ')})` : ''}`, {
      field: 'worker',
    });
  }
  const byPrompt = promptIndex(recorded);
  return {
    lookup(prompt: string, itemId?: string): ReplayHit | undefined {
      if (itemId !== undefined) {
        const hit = byId.get(itemId);
        if (hit) return hit;
      }
      return byPrompt(prompt)?.hit;
    },
  };
}
