// Messages between RouterThreadPool (main thread) and router-thread.ts.
// Errors cross as @fugu/core's WireError (toWireError in the thread, fromWireError here).
import type { WireError } from '@fugu/core';
import type { RouterCheckpoint, RouterDecision } from './router.ts';

export type ThreadItem = { text: string; allowed?: readonly string[]; lambda?: number };

export type ThreadRequest =
  | { type: 'checkpoint'; seq: number; checkpoint: RouterCheckpoint }
  | { type: 'batch'; id: number; items: ThreadItem[] }
  | { type: 'close' };

export type ThreadResponse =
  | { type: 'ready'; backboneId: string }
  | { type: 'fatal'; error: WireError }
  | { type: 'checkpoint'; seq: number; error?: WireError }
  | {
      type: 'result';
      id: number;
      checkpointId: string | null;
      inferenceMs: number;
      results: Array<{ ok: true; decision: RouterDecision } | { ok: false; error: WireError }>;
    };
