// How a coordinator process (ES, GRPO) ends: SIGTERM/SIGINT stop it between steps (whatever was
// committed stays; the rest is redone on resume) within 15 s, then its connections close. Exit
// status: 0 when the run completed, 3 when it ended otherwise (failed), 143 when stopped before it
// completed (so that a Kubernetes Job does not count the run as done and its next pod resumes it).
import { installShutdown } from '@fugu/queue';
import type { Logger } from '@fugu/telemetry';

export async function superviseCoordinator(o: {
  done: Promise<{ status: string }>;
  abort: AbortController;
  close: () => Promise<void>;
  log: Logger;
}): Promise<void> {
  const { done, abort, close, log } = o;
  let completed = false;
  void done.then((r) => { completed = r.status === 'completed'; }, () => {});
  installShutdown(
    [
      { name: 'coordinator', close: async () => { abort.abort(); await done.catch(() => {}); } },
      { name: 'connections', close },
    ],
    {
      timeoutMs: 15_000,
      log: (msg, extra) => log.info(extra ?? {}, msg),
      exit: (code) => process.exit(code !== 0 ? code : completed ? 0 : 143),
    },
  );
  const r = await done;
  log.info(r, 'coordinator finished');
  if (abort.signal.aborted) return; // installShutdown exits
  await close();
  process.exit(r.status === 'completed' ? 0 : 3);
}
