// k8s/: every kustomization renders with `kubectl kustomize` (kubectl must be on PATH), every
// rendered object validates against the Kubernetes and KEDA schemas, the deployment policy holds
// (test/k8s/policy.ts), the KEDA triggers name the real BullMQ keys of libs/queue, and the
// generated ScaledObjects are what k8s/scripts/generate.ts writes now.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROVIDERS } from '@fugu/core';
import { allQueueNames, conductQueue, esEvalQueue, grpoFaninQueue, providerCallQueues, queueKeys, routeQueue } from '@fugu/queue';
import { CLUSTER_CONFIG_FILE, generate, providerQueueShardsFromConfig, SCALED_OBJECTS_FILE, UNSCALED } from '../../k8s/scripts/generate.ts';
import {
  configMap,
  type Container,
  id,
  isFuguImage,
  type K8sObject,
  policyViolations,
  render,
  type ScaledObjectSpec,
  schemaViolations,
  selects,
  workloads,
} from './policy.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const k8s = (p: string) => path.join(root, 'k8s', p);
const TARGETS = ['base', 'overlays/local', 'overlays/production'] as const;

/** The queues each scaled Deployment consumes (what its process runs: README, apps/*). */
const EXPECTED_QUEUES: Record<string, string[]> = {
  'fugu-provider-worker': PROVIDERS.flatMap((p) => providerCallQueues(p, providerQueueShardsFromConfig())),
  'fugu-router-worker': [routeQueue],
  'fugu-evaluator': [esEvalQueue],
  'fugu-conductor': [conductQueue],
};

const rendered = new Map<string, K8sObject[]>();
beforeAll(() => {
  for (const t of TARGETS) rendered.set(t, render(k8s(t)));
});
const objectsOf = (t: string): K8sObject[] => rendered.get(t)!;
const find = (objects: K8sObject[], kind: string, name: string): K8sObject => {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`${kind}/${name} is not in the rendered output`);
  return o;
};
const podSpec = (o: K8sObject) => (o.spec as { template: { spec: { containers: Container[]; nodeSelector?: Record<string, string>; tolerations?: Array<{ key?: string; operator?: string; effect?: string }> } } }).template.spec;
const drainMs = (objects: K8sObject[]) => Number(configMap(objects).FUGU_WORKER_DRAIN_TIMEOUT_MS ?? 20_000);

describe.each(TARGETS)('k8s/%s', (target) => {
  it('renders with kubectl kustomize, everything in the fugu namespace', () => {
    const objects = objectsOf(target);
    expect(objects.length).toBeGreaterThan(10);
    expect(objects.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).toEqual(['fugu']);
  });

  it('validates against the Kubernetes and KEDA schemas', async () => {
    expect(await schemaViolations(objectsOf(target))).toEqual([]);
  });

  it('holds the deployment policy (resources, probes, security, PDBs, network policies, secrets)', () => {
    const objects = objectsOf(target);
    expect(policyViolations(objects, { drainMs: drainMs(objects) })).toEqual([]);
  });

  it('runs each app with the command its container image documents (the file exists)', () => {
    for (const { object, template } of workloads(objectsOf(target))) {
      for (const c of template.spec.containers.filter((x) => isFuguImage(x.image))) {
        // args, after the image's ENTRYPOINT (tini)
        const cmd = c.args ?? [];
        const script = cmd[0] === 'node' ? cmd[1] : /\bnode (apps\/\S+\.ts)/.exec(cmd.join(' '))?.[1];
        expect(script, `${id(object)} container ${c.name}: args ${JSON.stringify(cmd)} should be node <app main>`).toBeDefined();
        expect(() => readFileSync(path.join(root, script!)), `${id(object)}: ${script} does not exist`).not.toThrow();
      }
    }
  });

  it('scales workers with KEDA on the real queue keys (wait + prioritized of every consumed queue)', () => {
    const objects = objectsOf(target);
    const prefix = configMap(objects).FUGU_QUEUE_PREFIX!;
    expect(prefix).toMatch(/^[A-Za-z0-9_-]+$/);
    const scaledObjects = objects.filter((o) => o.kind === 'ScaledObject');
    expect(scaledObjects.map((o) => o.metadata.name).sort()).toEqual(Object.keys(EXPECTED_QUEUES).sort());
    const auths = new Set(objects.filter((o) => o.kind === 'TriggerAuthentication').map((o) => o.metadata.name));
    for (const so of scaledObjects) {
      const spec = so.spec as unknown as ScaledObjectSpec;
      find(objects, 'Deployment', spec.scaleTargetRef.name);
      const expected = EXPECTED_QUEUES[so.metadata.name]!.flatMap((q) => [queueKeys(prefix, q).wait, queueKeys(prefix, q).prioritized]);
      expect(spec.triggers.map((t) => t.metadata.listName).sort(), `${id(so)} listName values`).toEqual(expected.sort());
      for (const t of spec.triggers) {
        expect(t.type, `${id(so)} trigger ${t.name}`).toBe('redis');
        expect(t.name, `${id(so)}: every trigger needs a name (scalingModifiers)`).toMatch(/^[A-Za-z_][A-Za-z0-9_]*$/);
        expect(auths.has(t.authenticationRef?.name ?? ''), `${id(so)} trigger ${t.name}: authenticationRef ${t.authenticationRef?.name} not rendered`).toBe(true);
      }
      // the formula sums every trigger, once each
      const m = spec.advanced?.scalingModifiers;
      expect(m?.formula?.split('+').map((s) => s.trim()).sort(), `${id(so)} scalingModifiers.formula`).toEqual(spec.triggers.map((t) => t.name).sort());
      expect(Number(m?.target)).toBeGreaterThan(0);
      expect(spec.minReplicaCount).toBeGreaterThanOrEqual(0);
      expect(spec.maxReplicaCount).toBeGreaterThan(Math.max(1, spec.minReplicaCount ?? 0) - 1);
      expect(spec.cooldownPeriod).toBeGreaterThan(0);
      expect(spec.pollingInterval).toBeGreaterThan(0);
    }
    // every queue is scaled or deliberately not
    const covered = [...Object.values(EXPECTED_QUEUES).flat(), ...Object.keys(UNSCALED)];
    expect(allQueueNames(providerQueueShardsFromConfig()).filter((q) => !covered.includes(q))).toEqual([]);
    // KEDA reaches Redis through the TriggerAuthentication's address, from its own namespace
    const auth = find(objects, 'TriggerAuthentication', 'fugu-redis').spec as { secretTargetRef: Array<{ parameter: string; name: string; key: string }> };
    expect(auth.secretTargetRef.map((r) => r.parameter)).toContain('address');
  });
});

describe.each(TARGETS)('k8s/%s: the conductor', (target) => {
  type Rule = { from?: Array<{ podSelector?: Parameters<typeof selects>[0]; namespaceSelector?: unknown }>; ports?: Array<{ port?: number | string }> };
  const netpolRules = (objects: K8sObject[], podLabels: Record<string, string>): Rule[] =>
    objects
      .filter((o) => o.kind === 'NetworkPolicy' && selects((o.spec as { podSelector: Parameters<typeof selects>[0] }).podSelector, podLabels))
      .flatMap((o) => ((o.spec as { ingress?: Rule[] }).ingress ?? []));
  const template = (objects: K8sObject[]) =>
    (find(objects, 'Deployment', 'fugu-conductor').spec as { template: { metadata: { labels: Record<string, string> }; spec: ReturnType<typeof podSpec> & { terminationGracePeriodSeconds?: number } } }).template;

  it('runs node apps/conductor/src/main.ts with its ops server on FUGU_CONDUCTOR_PORT: startup, liveness and readiness probes', () => {
    const objects = objectsOf(target);
    const t = template(objects);
    const c = t.spec.containers.find((x) => x.name === 'conductor')!;
    expect(c.args).toEqual(['node', 'apps/conductor/src/main.ts']);
    const ops = c.ports?.find((p) => p.name === 'ops');
    expect(ops?.containerPort).toBe(Number(configMap(objects).FUGU_CONDUCTOR_PORT));
    const probes = c as typeof c & { startupProbe?: { httpGet?: { path?: string; port?: string } } };
    expect(probes.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'ops' });
    expect(c.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'ops' });
    expect(c.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'ops' });
    // graceful: above the drain + 5 s to close
    expect(t.spec.terminationGracePeriodSeconds).toBeGreaterThan(drainMs(objects) / 1000 + 5);
    // the API keys of an llm: conductor come from the Secret only, and optionally
    expect(c.envFrom).toContainEqual({ secretRef: { name: 'fugu-provider-keys', optional: true } });
    // CPU nodes
    expect(c.resources?.limits?.['nvidia.com/gpu']).toBeUndefined();
    expect(t.spec.tolerations ?? []).toEqual([]);
  });

  it('has a PodDisruptionBudget (maxUnavailable 1) and a KEDA ScaledObject on the conduct queue', () => {
    const objects = objectsOf(target);
    const labels = template(objects).metadata.labels;
    const pdbs = objects.filter((o) => o.kind === 'PodDisruptionBudget' && selects((o.spec as { selector: Parameters<typeof selects>[0] }).selector, labels));
    expect(pdbs.map(id)).toEqual(['PodDisruptionBudget/fugu-conductor']);
    expect((pdbs[0]!.spec as { maxUnavailable?: number }).maxUnavailable).toBe(1);
    const so = find(objects, 'ScaledObject', 'fugu-conductor').spec as unknown as ScaledObjectSpec;
    expect(so.scaleTargetRef.name).toBe('fugu-conductor');
    const keys = queueKeys(configMap(objects).FUGU_QUEUE_PREFIX!, conductQueue);
    expect(so.triggers.map((t) => t.metadata.listName).sort()).toEqual([keys.prioritized, keys.wait].sort());
    expect(so.advanced?.scalingModifiers?.formula).toBe('conduct_wait + conduct_prioritized');
    expect(so.minReplicaCount).toBeGreaterThanOrEqual(1); // a /v1/rewards request waits on its workflows
  });

  it('reaches Redis and Postgres (where they run in the cluster); nothing outside may reach it', () => {
    const objects = objectsOf(target);
    const labels = template(objects).metadata.labels;
    for (const store of ['redis', 'postgres']) {
      const pod = workloads(objects).find((w) => w.template.metadata?.labels?.['app.kubernetes.io/component'] === store);
      if (!pod) continue;
      const rules = netpolRules(objects, pod.template.metadata!.labels!);
      const admitted = rules.some((r) => (r.from ?? []).some((f) => f.podSelector && !f.namespaceSelector && selects(f.podSelector, labels)));
      expect(admitted, `${store}: a NetworkPolicy admits the conductor's pods`).toBe(true);
    }
    // ingress to the conductor: only the monitoring scrape of its ops port, where that component is in
    const rules = netpolRules(objects, labels);
    for (const r of rules) expect(r.from?.length, 'ingress to the conductor names its peers').toBeGreaterThan(0);
    if (rules.length) expect(rules.flatMap((r) => r.ports ?? []).map((p) => p.port)).toContain(Number(configMap(objects).FUGU_CONDUCTOR_PORT));
  });
});

describe.each(TARGETS)('k8s/%s: the GRPO coordinator', (target) => {
  type JobSpec = {
    backoffLimit?: number;
    podFailurePolicy?: { rules: Array<{ action: string; onExitCodes?: { containerName?: string; operator: string; values: number[] }; onPodConditions?: Array<{ type: string }> }> };
    template: { spec: ReturnType<typeof podSpec> & { restartPolicy?: string } };
  };

  it('is a Job template (CronJob fugu-grpo-coordinator, suspended) whose pods are replaced until the run completes: each new pod resumes it from Postgres', () => {
    const objects = objectsOf(target);
    const cj = find(objects, 'CronJob', 'fugu-grpo-coordinator').spec as { suspend?: boolean; jobTemplate: { spec: JobSpec } };
    expect(cj.suspend).toBe(true);
    const job = cj.jobTemplate.spec;
    const c = job.template.spec.containers.find((x) => x.name === 'coordinator')!;
    expect(c.args).toEqual(['node', 'apps/trainer/src/grpo-main.ts']);
    expect(c.env?.map((e) => e.name)).toContain('FUGU_GRPO_RUN');
    expect(c.ports?.find((p) => p.name === 'ops')?.containerPort).toBe(9473);
    // a failed or evicted pod is replaced by a new one (never restarted in place); a configuration
    // error (exit 2) or a failed run (exit 3) ends the Job; a disruption does not count
    expect(job.template.spec.restartPolicy).toBe('Never');
    expect(job.backoffLimit).toBeGreaterThanOrEqual(1);
    expect(job.podFailurePolicy?.rules).toContainEqual({ action: 'FailJob', onExitCodes: { containerName: 'coordinator', operator: 'In', values: [2, 3] } });
    expect(job.podFailurePolicy?.rules).toContainEqual({ action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget' }] });
    // its rollouts are conduct jobs (the conductors KEDA scales, above); its fan-in queue is its own, not scaled
    expect(Object.keys(UNSCALED)).toContain(grpoFaninQueue);
  });
});

describe('every app', () => {
  it("is admitted to Redis and Postgres, and its ops port is in the monitoring component's scrape policy", () => {
    const objects = objectsOf('overlays/local');
    const prod = objectsOf('overlays/production');
    const scrape = prod.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'fugu-metrics-from-monitoring')!;
    const scraped = ((scrape.spec as { ingress: Array<{ ports: Array<{ port: number }> }> }).ingress).flatMap((r) => r.ports.map((p) => p.port));
    const stores = ['redis', 'postgres'].map((s) => workloads(objects).find((w) => w.template.metadata?.labels?.['app.kubernetes.io/component'] === s)!);
    for (const { object, template } of workloads(objects)) {
      const fugu = template.spec.containers.filter((c) => isFuguImage(c.image));
      if (!fugu.length) continue;
      const labels = template.metadata?.labels ?? {};
      for (const store of stores) {
        const admitted = objects
          .filter((o) => o.kind === 'NetworkPolicy' && selects((o.spec as { podSelector: Parameters<typeof selects>[0] }).podSelector, store.template.metadata!.labels))
          .flatMap((o) => ((o.spec as { ingress?: Array<{ from?: Array<{ podSelector?: Parameters<typeof selects>[0] }> }> }).ingress ?? []))
          .some((r) => (r.from ?? []).some((f) => f.podSelector && selects(f.podSelector, labels)));
        expect(admitted, `${id(object)} -> ${id(store.object)}`).toBe(true);
      }
      for (const c of fugu) {
        const ops = c.ports?.find((p) => p.name === 'ops');
        if (ops) expect(scraped, `${id(object)}: ops port ${ops.containerPort} scraped`).toContain(ops.containerPort);
      }
    }
  });
});

describe('overlays', () => {
  it('local: CPU only, in-cluster Redis (noeviction) and Postgres with volumes, development Secrets generated', () => {
    const objects = objectsOf('overlays/local');
    for (const { object, template } of workloads(objects)) {
      for (const c of template.spec.containers) expect(c.resources?.limits?.['nvidia.com/gpu'], `${id(object)}: no GPU in the local overlay`).toBeUndefined();
    }
    const redis = podSpec(find(objects, 'StatefulSet', 'redis')).containers[0]!;
    expect(redis.args?.join(' ')).toContain('--maxmemory-policy noeviction');
    const pg = find(objects, 'StatefulSet', 'postgres');
    expect(podSpec(pg).containers[0]!.image).toMatch(/^postgres:17/);
    expect((pg.spec as { volumeClaimTemplates?: unknown[] }).volumeClaimTemplates).toHaveLength(1);
    const secrets = objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name).sort();
    expect(secrets).toEqual(['fugu-admin', 'fugu-database', 'fugu-postgres', 'fugu-redis', 'fugu-ultra']);
    // KEDA runs in its own namespace: the address must be a cluster-wide name
    const redisSecret = find(objects, 'Secret', 'fugu-redis');
    const address = Buffer.from(redisSecret.data!.address!, 'base64').toString();
    expect(address).toMatch(/^redis\.fugu\.svc\.cluster\.local:6379$/);
  });

  it('production: router workers on GPUs (limit, toleration, GFD node label, CUDA image and provider), scale to zero', () => {
    const objects = objectsOf('overlays/production');
    const router = podSpec(find(objects, 'Deployment', 'fugu-router-worker'));
    const c = router.containers.find((x) => x.name === 'router-worker')!;
    expect(Number(c.resources?.limits?.['nvidia.com/gpu'])).toBeGreaterThanOrEqual(1);
    expect(router.tolerations).toContainEqual({ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' });
    expect(router.nodeSelector?.['nvidia.com/gpu.present']).toBe('true');
    expect(c.image).toMatch(/fugu-router-cuda/);
    expect(c.env?.find((e) => e.name === 'FUGU_ROUTER_EXECUTION_PROVIDER')?.value).toBe('cuda');
    const so = find(objects, 'ScaledObject', 'fugu-router-worker').spec as unknown as ScaledObjectSpec;
    expect(so.minReplicaCount).toBe(0);
    expect(so.advanced?.scalingModifiers?.activationTarget).toBeDefined();
    // only the router workers hold GPUs
    for (const { object, template } of workloads(objects)) {
      if (object.metadata.name === 'fugu-router-worker') continue;
      for (const x of template.spec.containers) expect(x.resources?.limits?.['nvidia.com/gpu'], id(object)).toBeUndefined();
    }
  });

  it('production: Redis with AOF, noeviction, a password and a volume; no Postgres and no Secret values', () => {
    const objects = objectsOf('overlays/production');
    const sts = find(objects, 'StatefulSet', 'redis');
    const args = podSpec(sts).containers[0]!.args!.join(' ');
    expect(args).toContain('--maxmemory-policy noeviction');
    expect(args).toContain('--appendonly yes');
    expect(args).toContain('--requirepass $(REDIS_PASSWORD)');
    expect((sts.spec as { volumeClaimTemplates?: unknown[] }).volumeClaimTemplates).toHaveLength(1);
    expect(objects.filter((o) => o.kind === 'StatefulSet' && o.metadata.name !== 'redis').map(id)).toEqual([]);
    expect(objects.filter((o) => o.kind === 'Secret').map(id)).toEqual([]);
    const auth = find(objects, 'TriggerAuthentication', 'fugu-redis').spec as { secretTargetRef: Array<{ parameter: string }> };
    expect(auth.secretTargetRef.map((r) => r.parameter).sort()).toEqual(['address', 'password']);
    expect(configMap(objects).FUGU_GATEWAY_MODE).toBe('pool');
    expect(find(objects, 'HorizontalPodAutoscaler', 'fugu-gateway')).toBeDefined();
  });
});

describe('k8s/components/redis-cluster: the queues on a Redis Cluster you run', () => {
  // base + the component, rendered from a kustomization beside (kustomize takes relative paths only)
  let objects: K8sObject[];
  beforeAll(() => {
    const dir = mkdtempSync(path.join(tmpdir(), 'fugu-k8s-cluster-'));
    try {
      const rel = path.relative(dir, k8s(''));
      writeFileSync(path.join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: fugu\nresources:\n  - ${rel}/base\ncomponents:\n  - ${rel}/components/redis-cluster\n`);
      objects = render(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('validates against the Kubernetes and KEDA schemas', async () => {
    expect(await schemaViolations(objects)).toEqual([]);
  });

  it("splits the provider queues into the component's shards and scales on every shard's keys with KEDA's redis-cluster scaler", () => {
    const shards = providerQueueShardsFromConfig(CLUSTER_CONFIG_FILE);
    expect(shards).toBeGreaterThan(1);
    expect(configMap(objects).FUGU_PROVIDER_QUEUE_SHARDS).toBe(String(shards));
    const prefix = configMap(objects).FUGU_QUEUE_PREFIX!;
    const expected: Record<string, string[]> = { ...EXPECTED_QUEUES, 'fugu-provider-worker': PROVIDERS.flatMap((p) => providerCallQueues(p, shards)) };
    for (const so of objects.filter((o) => o.kind === 'ScaledObject')) {
      const spec = so.spec as unknown as ScaledObjectSpec;
      for (const t of spec.triggers) {
        expect(t.type, `${id(so)} trigger ${t.name}`).toBe('redis-cluster');
        expect(t.authenticationRef?.name).toBe('fugu-redis');
      }
      const lists = spec.triggers.map((t) => t.metadata.listName).sort();
      expect(lists).toEqual(expected[so.metadata.name]!.flatMap((q) => [queueKeys(prefix, q).wait, queueKeys(prefix, q).prioritized]).sort());
      // the formula names every trigger once
      expect(spec.advanced!.scalingModifiers!.formula!.split(' + ').sort()).toEqual(spec.triggers.map((t) => t.name!).sort());
    }
    const auth = find(objects, 'TriggerAuthentication', 'fugu-redis').spec as { secretTargetRef: Array<{ parameter: string; key: string }> };
    expect(auth.secretTargetRef).toEqual([{ parameter: 'addresses', name: 'fugu-redis', key: 'addresses' }]);
  });
});

describe('k8s/scripts/generate.ts', () => {
  it('the committed generated files are what the script writes now (run npm run k8s:generate)', () => {
    for (const [file, content] of generate()) {
      expect(readFileSync(file, 'utf8'), `${path.relative(root, file)} is stale: run npm run k8s:generate`).toBe(content);
    }
  });

  it('writes the header, and keys from the prefix it is given', () => {
    const text = generate('other-prefix').get(SCALED_OBJECTS_FILE)!;
    expect(text.startsWith('# generated by k8s/scripts/generate.ts — do not edit')).toBe(true);
    expect(text).toContain(`listName: ${queueKeys('other-prefix', routeQueue).prioritized}`);
    expect(text).not.toContain('listName: fugu:');
  });
});

describe('the policy checks catch what they are for', () => {
  // a copy of the production render with one rule broken at a time
  const broken = (mutate: (objects: K8sObject[]) => void): string[] => {
    const objects = structuredClone(objectsOf('overlays/production'));
    mutate(objects);
    return policyViolations(objects, { drainMs: drainMs(objects) });
  };
  const gateway = (objects: K8sObject[]) => podSpec(find(objects, 'Deployment', 'fugu-gateway')) as ReturnType<typeof podSpec> & { terminationGracePeriodSeconds?: number };

  it('a field of the wrong type fails the schemas (Kubernetes and KEDA)', async () => {
    const objects = structuredClone(objectsOf('overlays/production'));
    (gateway(objects).containers[0]!.ports![0] as { containerPort: unknown }).containerPort = 'http';
    ((find(objects, 'ScaledObject', 'fugu-evaluator').spec as { minReplicaCount: unknown }).minReplicaCount = 'zero');
    const v = (await schemaViolations(objects)).join('\n');
    expect(v).toMatch(/Deployment\/fugu-gateway .*containerPort must be integer/);
    expect(v).toMatch(/ScaledObject\/fugu-evaluator .*minReplicaCount must be integer/);
  });

  it('a writable root filesystem, a missing limit, a missing probe', () => {
    expect(broken((o) => { gateway(o).containers[0]!.securityContext!.readOnlyRootFilesystem = false; })).toContain('Deployment/fugu-gateway: container gateway: securityContext.readOnlyRootFilesystem must be true');
    expect(broken((o) => { delete gateway(o).containers[0]!.resources!.limits!.memory; })).toContain('Deployment/fugu-gateway: container gateway: resources.limits.memory missing');
    expect(broken((o) => { delete gateway(o).containers[0]!.readinessProbe; })).toContain('Deployment/fugu-gateway: container gateway: readinessProbe missing');
  });

  it('a grace period under the drain, a literal API key, open ingress to a worker, a missing PDB', () => {
    expect(broken((o) => { gateway(o).terminationGracePeriodSeconds = 20; }).join('\n')).toMatch(/fugu-gateway: terminationGracePeriodSeconds 20 must exceed/);
    expect(broken((o) => { gateway(o).containers[0]!.env!.push({ name: 'OPENAI_API_KEY', value: 'sk-live' }); })).toContain(
      'Deployment/fugu-gateway: container gateway: env OPENAI_API_KEY is a literal; credentials come from a Secret (valueFrom.secretKeyRef)',
    );
    const openWorker = broken((o) => {
      ((find(o, 'NetworkPolicy', 'fugu-gateway-ingress').spec as { podSelector: { matchLabels: Record<string, string> } }).podSelector.matchLabels = { 'app.kubernetes.io/name': 'fugu' });
    });
    expect(openWorker).toContain('NetworkPolicy/fugu-gateway-ingress: admits ingress from anywhere to Deployment/fugu-provider-worker; only the gateway may take outside traffic');
    expect(broken((o) => o.splice(o.findIndex((x) => x.kind === 'PodDisruptionBudget' && x.metadata.name === 'fugu-evaluator'), 1))).toContain('Deployment/fugu-evaluator: no PodDisruptionBudget selects its pods');
    expect(broken((o) => o.splice(o.findIndex((x) => x.kind === 'PodDisruptionBudget' && x.metadata.name === 'fugu-conductor'), 1))).toContain('Deployment/fugu-conductor: no PodDisruptionBudget selects its pods');
    expect(broken((o) => o.splice(o.findIndex((x) => x.kind === 'Deployment' && x.metadata.name === 'fugu-conductor'), 1))).toContain('Deployment/fugu-conductor: missing');
  });
});
