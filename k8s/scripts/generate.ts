// `node k8s/scripts/generate.ts [--check]` (npm run k8s:generate): writes the KEDA ScaledObjects
// of k8s/base/generated/ from libs/queue's queue names, so no queue key is ever typed by hand.
// Each scaled Deployment gets two redis triggers per queue it consumes: BullMQ's `wait` list
// (LLEN) and its `prioritized` sorted set (KEDA's redis scaler counts a zset with ZCARD), summed
// by advanced.scalingModifiers.formula. The key prefix is FUGU_QUEUE_PREFIX of the base ConfigMap
// (k8s/base/config.yaml), and the provider queues' shards its FUGU_PROVIDER_QUEUE_SHARDS (every
// shard is a queue of its own, with its own triggers). --check: exit 1 when the committed files
// differ from what this writes. It also writes the Redis Cluster component's ScaledObject
// patches (k8s/components/redis-cluster/generated/: KEDA's redis-cluster scaler, the shards of
// that component's config.yaml).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { PROVIDERS } from '@fugu/core';
import { allQueueNames, conductQueue, esEvalQueue, esFaninQueue, grpoFaninQueue, providerCallQueues, queueKeys, routeQueue } from '@fugu/queue';

export const K8S_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CONFIG_FILE = path.join(K8S_DIR, 'base', 'config.yaml');
export const SCALED_OBJECTS_FILE = path.join(K8S_DIR, 'base', 'generated', 'scaledobjects.yaml');
/** The Redis Cluster component: its ConfigMap patch (FUGU_PROVIDER_QUEUE_SHARDS) and its generated ScaledObject patches. */
export const CLUSTER_DIR = path.join(K8S_DIR, 'components', 'redis-cluster');
export const CLUSTER_CONFIG_FILE = path.join(CLUSTER_DIR, 'config.yaml');
export const CLUSTER_SCALED_OBJECTS_FILE = path.join(CLUSTER_DIR, 'generated', 'scaledobjects.yaml');

export interface Scaler {
  /** the Deployment (and ScaledObject) name */
  deployment: string;
  queues: string[];
  minReplicaCount: number;
  maxReplicaCount: number;
  /** pending jobs (wait + prioritized, all queues) per replica the HPA aims at */
  targetPerReplica: number;
  /** at minReplicaCount 0: the pending jobs above which the first replica starts */
  activationTarget: number;
  why: string;
}

/** The ConfigMap fugu-config's data in `file` (a ConfigMap, or a kustomize patch of it). */
function configData(file = CONFIG_FILE): Record<string, string> {
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const o = doc.toJS() as { kind?: string; metadata?: { name?: string }; data?: Record<string, string> } | null;
    if (o?.kind === 'ConfigMap' && o.metadata?.name === 'fugu-config') return o.data ?? {};
  }
  throw new Error(`${file}: no ConfigMap named fugu-config`);
}

/** FUGU_QUEUE_PREFIX of the ConfigMap fugu-config in `file`. */
export function queuePrefixFromConfig(file = CONFIG_FILE): string {
  const prefix = configData(file).FUGU_QUEUE_PREFIX;
  if (!prefix) throw new Error(`${file}: ConfigMap fugu-config has no data.FUGU_QUEUE_PREFIX`);
  return prefix;
}

/** FUGU_PROVIDER_QUEUE_SHARDS of the ConfigMap fugu-config in `file` (1 when it is not set). */
export function providerQueueShardsFromConfig(file = CONFIG_FILE): number {
  const v = configData(file).FUGU_PROVIDER_QUEUE_SHARDS ?? '1';
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${file}: FUGU_PROVIDER_QUEUE_SHARDS must be a positive integer, not ${JSON.stringify(v)}`);
  return n;
}

const SHARDS = providerQueueShardsFromConfig();

/** Which Deployment consumes which queues (provider queues in `shards` shards). Every queue of allQueueNames(shards) is here or in UNSCALED. */
export const scalers = (shards: number): Scaler[] => [
  {
    deployment: 'fugu-provider-worker',
    queues: PROVIDERS.flatMap((p) => providerCallQueues(p, shards)),
    minReplicaCount: 1,
    maxReplicaCount: 20,
    // one process takes up to FUGU_WORKER_CONCURRENCY (256) calls of each provider at once
    targetPerReplica: 1000,
    activationTarget: 0,
    why: 'evaluation batches: one job per (question, worker, repetition)',
  },
  {
    deployment: 'fugu-router-worker',
    queues: [routeQueue],
    minReplicaCount: 1,
    maxReplicaCount: 8,
    // decisions are milliseconds each, micro-batched (FUGU_ROUTER_MAX_BATCH)
    targetPerReplica: 64,
    activationTarget: 0,
    why: 'routing decisions of gateways in pool mode (production: GPUs, scale to zero)',
  },
  {
    deployment: 'fugu-evaluator',
    queues: [esEvalQueue],
    minReplicaCount: 0,
    maxReplicaCount: 20,
    // an evaluator holds FUGU_ES_EVAL_CONCURRENCY (8) jobs at once
    targetPerReplica: 8,
    activationTarget: 0,
    why: 'ES generations: one job per (candidate, replica); idle between runs',
  },
  {
    deployment: 'fugu-conductor',
    queues: [conductQueue],
    // one replica stays up: a POST /v1/rewards request waits on its workflows (`fugu ultra run` runs its own in process)
    minReplicaCount: 1,
    maxReplicaCount: 10,
    // a conductor holds FUGU_CONDUCTOR_CONCURRENCY (32) workflows at once, mostly waiting on their
    // steps' chat calls: two concurrency's worth pending per replica
    targetPerReplica: 64,
    activationTarget: 0,
    why: 'fugu-ultra workflows: one job per (item, conductor spec, repeat); the steps go to provider-call queues',
  },
];

/** The scalers of the base (FUGU_PROVIDER_QUEUE_SHARDS of k8s/base/config.yaml). */
export const SCALERS: Scaler[] = scalers(SHARDS);

/** Queues deliberately not scaled by KEDA, and why. */
export const UNSCALED: Record<string, string> = {
  [esFaninQueue]: "an ES generation's fan-in job, consumed by that run's coordinator Job (one pod per run)",
  [grpoFaninQueue]: "a GRPO iteration's fan-in job, consumed by that run's coordinator Job (one pod per run); its rollouts are conduct jobs",
};

export const HEADER = '# generated by k8s/scripts/generate.ts — do not edit (npm run k8s:generate)\n';

/** A KEDA trigger name usable in a scalingModifiers formula: route_wait, provider_call_openai_prioritized (the hash tag's braces dropped). */
export const triggerName = (queue: string, key: 'wait' | 'prioritized'): string => `${queue.replace(/[^A-Za-z0-9]+/g, '_').replace(/^_+|_+$/g, '')}_${key}`;

function checkCoverage(list: Scaler[], shards: number): void {
  const scaled = list.flatMap((s) => s.queues);
  const all = allQueueNames(shards);
  const missing = all.filter((q) => !scaled.includes(q) && !(q in UNSCALED));
  if (missing.length) throw new Error(`queues with no scaler and not listed in UNSCALED (k8s/scripts/generate.ts): ${missing.join(', ')}`);
  const unknown = [...scaled, ...Object.keys(UNSCALED)].filter((q) => !all.includes(q));
  if (unknown.length) throw new Error(`queues not in allQueueNames(): ${unknown.join(', ')}`);
  const twice = scaled.filter((q, i) => scaled.indexOf(q) !== i);
  if (twice.length) throw new Error(`queues scaled twice: ${twice.join(', ')}`);
}

/** The KEDA triggers of a scaler: KEDA's `redis` scaler, or on a Redis Cluster its `redis-cluster` scaler (same metadata, `addresses` for `address`). */
export function triggersOf(s: Scaler, prefix: string, type: 'redis' | 'redis-cluster' = 'redis'): Array<Record<string, unknown> & { name: string }> {
  return s.queues.flatMap((queue) => {
    const keys = queueKeys(prefix, queue);
    return (['wait', 'prioritized'] as const).map((kind) => ({
      type,
      name: triggerName(queue, kind),
      metadata: { listName: keys[kind], listLength: String(s.targetPerReplica), activationListLength: String(s.activationTarget) },
      authenticationRef: { name: 'fugu-redis' },
    }));
  });
}

export function scaledObject(s: Scaler, prefix: string): Record<string, unknown> {
  const triggers = s.queues.flatMap((queue) => {
    const keys = queueKeys(prefix, queue);
    return (['wait', 'prioritized'] as const).map((kind) => ({
      type: 'redis',
      name: triggerName(queue, kind),
      metadata: { listName: keys[kind], listLength: String(s.targetPerReplica), activationListLength: String(s.activationTarget) },
      authenticationRef: { name: 'fugu-redis' },
    }));
  });
  return {
    apiVersion: 'keda.sh/v1alpha1',
    kind: 'ScaledObject',
    metadata: {
      name: s.deployment,
      labels: { 'app.kubernetes.io/name': 'fugu', 'app.kubernetes.io/component': s.deployment.replace(/^fugu-/, ''), 'app.kubernetes.io/part-of': 'fugu' },
    },
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: s.deployment },
      pollingInterval: 15,
      // only for the last replica (to zero); the HPA's stabilization window below paces the rest
      cooldownPeriod: 300,
      minReplicaCount: s.minReplicaCount,
      maxReplicaCount: s.maxReplicaCount,
      advanced: {
        horizontalPodAutoscalerConfig: {
          behavior: {
            scaleDown: { stabilizationWindowSeconds: 300, policies: [{ type: 'Percent', value: 50, periodSeconds: 60 }] },
            scaleUp: { stabilizationWindowSeconds: 0, policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }] },
          },
        },
        scalingModifiers: {
          formula: triggers.map((t) => t.name).join(' + '),
          target: String(s.targetPerReplica),
          activationTarget: String(s.activationTarget),
          metricType: 'AverageValue',
        },
      },
      triggers,
    },
  };
}

/**
 * The Redis Cluster component's ScaledObject patches: every trigger of type `redis-cluster`, for
 * the provider queues in the component's shards (FUGU_PROVIDER_QUEUE_SHARDS of its config.yaml),
 * and the formula over them. A patch replaces a ScaledObject's triggers list as a whole.
 */
function clusterPatches(prefix: string, shards: number): string {
  const list = scalers(shards);
  checkCoverage(list, shards);
  const docs = list.map((s) => {
    const triggers = triggersOf(s, prefix, 'redis-cluster');
    const patch = {
      apiVersion: 'keda.sh/v1alpha1',
      kind: 'ScaledObject',
      metadata: { name: s.deployment },
      spec: { advanced: { scalingModifiers: { formula: triggers.map((t) => t.name).join(' + ') } }, triggers },
    };
    return `# ${s.deployment}: ${s.queues.length} queue(s)\n${stringify(patch, { lineWidth: 0 })}`;
  });
  return `${HEADER}# KEDA's redis-cluster scaler on the queues of FUGU_PROVIDER_QUEUE_SHARDS=${shards} (k8s/components/redis-cluster/config.yaml), prefix ${prefix}\n${docs.join('---\n')}`;
}

/** The generated files: path -> content. */
export function generate(prefix = queuePrefixFromConfig()): Map<string, string> {
  checkCoverage(SCALERS, SHARDS);
  const docs = SCALERS.map((s) => `# ${s.deployment}: ${s.why}\n${stringify(scaledObject(s, prefix), { lineWidth: 0 })}`);
  const unscaled = Object.entries(UNSCALED).map(([q, why]) => `#   ${q}: ${why}`).join('\n');
  const text = `${HEADER}# Queue keys: queueKeys(FUGU_QUEUE_PREFIX=${prefix}, queue) of libs/queue. Not scaled:\n${unscaled}\n${docs.join('---\n')}`;
  return new Map([
    [SCALED_OBJECTS_FILE, text],
    [CLUSTER_SCALED_OBJECTS_FILE, clusterPatches(prefix, providerQueueShardsFromConfig(CLUSTER_CONFIG_FILE))],
  ]);
}

function main(argv: string[]): number {
  const check = argv.includes('--check');
  let stale = 0;
  for (const [file, content] of generate()) {
    const rel = path.relative(process.cwd(), file);
    let current: string | undefined;
    try {
      current = readFileSync(file, 'utf8');
    } catch {
      current = undefined;
    }
    if (current === content) {
      process.stdout.write(`${rel}: up to date\n`);
    } else if (check) {
      process.stderr.write(`${rel}: differs from what k8s/scripts/generate.ts writes: run npm run k8s:generate\n`);
      stale++;
    } else {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, content);
      process.stdout.write(`${rel}: written\n`);
    }
  }
  return stale ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) process.exit(main(process.argv.slice(2)));
