// The deployed router checkpoint: `publishRouter` points a deployment at a checkpoint in Postgres
// and announces it on Redis pub/sub (`<prefix>:router:published`); a DeploymentWatcher in each
// serving process loads the deployment at start, reloads at once on the message, and re-reads
// Postgres every pollMs as a backstop (a missed message, a Redis outage).
import { getCheckpoint, getDeployment, publishDeployment, type CheckpointRecord, type Db, type RouterDeployment } from '@fugu/db';
import { createRedis, type RedisClient } from '@fugu/queue';

export const routerPublishedChannel = (prefix: string): string => `${prefix}:router:published`;

export type PublishMessage = { deployment: string; checkpointId: string };

/**
 * Sets the deployment's checkpoint in Postgres (the truth serving processes poll), then, when
 * Redis is given, tells serving processes to swap at once. `told` is false when that message could
 * not be sent: they then pick the checkpoint up within router.pollMs.
 */
export async function publishRouter(
  db: Db,
  redis: RedisClient | undefined,
  opts: { queuePrefix: string; deployment: string; checkpointId: string },
): Promise<RouterDeployment & { told: boolean }> {
  const d = await publishDeployment(db, opts.deployment, opts.checkpointId);
  const message = JSON.stringify({ deployment: d.name, checkpointId: d.checkpointId } satisfies PublishMessage);
  const told = redis ? await redis.publish(routerPublishedChannel(opts.queuePrefix), message).then(() => true, () => false) : false;
  return { ...d, told };
}

export type DeploymentWatcherOptions = {
  db: Db;
  deployment: string;
  pollMs: number;
  /** with Redis: swap at once on a publish message */
  redisUrl?: string;
  queuePrefix: string;
  /** called with each newly deployed checkpoint (in order, one at a time); a throw keeps the old one */
  onCheckpoint: (ckpt: CheckpointRecord) => Promise<void>;
  log?: (level: 'info' | 'warn' | 'error', msg: string, extra?: Record<string, unknown>) => void;
};

export class DeploymentWatcher {
  private readonly opts: DeploymentWatcherOptions;
  private sub: RedisClient | undefined;
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<void> = Promise.resolve();
  private loaded: string | undefined;
  private failed: string | undefined;
  private closed = false;

  constructor(opts: DeploymentWatcherOptions) {
    this.opts = opts;
  }

  /** the checkpoint last handed to onCheckpoint */
  get checkpointId(): string | undefined {
    return this.loaded;
  }

  /** Loads the deployment (if there is one), subscribes and starts polling. */
  async start(): Promise<void> {
    if (this.opts.redisUrl) {
      const sub = createRedis(this.opts.redisUrl, 'worker');
      this.sub = sub;
      const channel = routerPublishedChannel(this.opts.queuePrefix);
      sub.on('message', (ch: string, text: string) => {
        if (ch !== channel) return;
        try {
          const m = JSON.parse(text) as PublishMessage;
          if (m.deployment === this.opts.deployment) void this.refresh();
        } catch {
          // not ours
        }
      });
      await sub.subscribe(channel);
    }
    await this.refresh();
    const poll = () => {
      this.timer = setTimeout(() => void this.refresh().finally(() => !this.closed && poll()), this.opts.pollMs);
      this.timer.unref();
    };
    poll();
  }

  /** Re-reads the deployment now; resolves when any new checkpoint is loaded. */
  refresh(): Promise<void> {
    this.chain = this.chain.then(() => this.check()).catch(() => {});
    return this.chain;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.sub?.disconnect();
    await this.chain;
  }

  private async check(): Promise<void> {
    if (this.closed) return;
    let d: RouterDeployment | undefined;
    try {
      d = await getDeployment(this.opts.db, this.opts.deployment);
    } catch (e) {
      this.opts.log?.('warn', `could not read router deployment ${this.opts.deployment}: ${(e as Error).message}`);
      return;
    }
    if (!d || d.checkpointId === this.loaded) return;
    // a checkpoint that failed to load is not retried until another one is published
    if (d.checkpointId === this.failed) return;
    try {
      const ckpt = await getCheckpoint(this.opts.db, d.checkpointId);
      if (!ckpt) throw new Error(`checkpoint ${d.checkpointId} does not exist`);
      await this.opts.onCheckpoint(ckpt);
      this.loaded = ckpt.id;
      this.failed = undefined;
      this.opts.log?.('info', `router deployment ${d.name}: serving checkpoint ${ckpt.id}`, { deployment: d.name, checkpoint: ckpt.id });
    } catch (e) {
      this.failed = d.checkpointId;
      this.opts.log?.('error', `router deployment ${d.name}: cannot load checkpoint ${d.checkpointId}, keeping ${this.loaded ?? 'none'}: ${(e as Error).message}`, { deployment: d.name });
    }
  }
}
