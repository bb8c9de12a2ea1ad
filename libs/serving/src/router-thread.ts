// One router worker thread (see thread-pool.ts): its own ONNX Runtime sessions and Router.
// ONNX Runtime's run() blocks the thread it runs on, so inference lives here, off the main
// thread's event loop (which keeps renewing job locks and answering health checks).
import { parentPort, workerData } from 'node:worker_threads';
import { type SvfLayer, loadRouterModel, type ResolvedExecution, type RouterModel } from '@fugu/router-model';
import { Router, type RouterCheckpoint } from './router.ts';
import { toWireError } from '@fugu/core';
import { RouterUnavailableError } from './errors.ts';
import type { ThreadRequest, ThreadResponse } from './thread-protocol.ts';

export type RouterThreadData = {
  home: string;
  execution: ResolvedExecution;
  intraOpNumThreads: number;
  svfLayer: SvfLayer;
};

const port = parentPort!;
const data = workerData as RouterThreadData;
const send = (m: ThreadResponse): void => port.postMessage(m);

const wire = toWireError;

let model: RouterModel;
let router: Router | undefined;

async function init(): Promise<void> {
  model = await loadRouterModel(data.home, 1, {
    executionProvider: data.execution,
    intraOpNumThreads: data.intraOpNumThreads,
    allowSpinning: false,
    svfLayer: data.svfLayer,
  });
  send({ type: 'ready', backboneId: model.backboneId });
}

port.on('message', (msg: ThreadRequest) => {
  switch (msg.type) {
    case 'checkpoint': {
      try {
        router = new Router(model, msg.checkpoint as RouterCheckpoint);
        send({ type: 'checkpoint', seq: msg.seq });
      } catch (e) {
        send({ type: 'checkpoint', seq: msg.seq, error: wire(e) });
      }
      return;
    }
    case 'batch': {
      // the router at the batch's start: a checkpoint swapped in meanwhile serves later batches
      const r = router;
      if (!r) {
        send({ type: 'result', id: msg.id, checkpointId: null, inferenceMs: 0, results: msg.items.map(() => ({ ok: false, error: wire(new RouterUnavailableError('no router checkpoint is loaded yet')) })) });
        return;
      }
      const t0 = performance.now();
      r.decideSettled(
        msg.items.map((i) => i.text),
        msg.items.map((i) => ({ ...(i.allowed && { allowed: i.allowed }), ...(i.lambda !== undefined && { lambda: i.lambda }) })),
      ).then(
        (settled) =>
          send({
            type: 'result',
            id: msg.id,
            checkpointId: r.checkpoint.id,
            inferenceMs: performance.now() - t0,
            results: settled.map((s) => (s.ok ? { ok: true, decision: s.decision } : { ok: false, error: wire(s.error) })),
          }),
        (e: unknown) => send({ type: 'result', id: msg.id, checkpointId: r.checkpoint.id, inferenceMs: performance.now() - t0, results: msg.items.map(() => ({ ok: false, error: wire(e) })) }),
      );
      return;
    }
    case 'close': {
      void model?.release().finally(() => port.close());
      return;
    }
  }
});

init().catch((e: unknown) => {
  send({ type: 'fatal', error: wire(e) });
});
