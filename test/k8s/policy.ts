// Rendering (kubectl kustomize), schema validation (kubernetes-models, @kubernetes-models/keda) and
// the deployment policy of k8s/ as functions that return violations, one clear line each naming
// the object and the field; test/k8s/manifests.test.ts asserts there are none.
import { spawnSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';

// ---- the shapes read here (only the fields the checks look at) ------------------------------
export interface Meta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
}
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: Meta;
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}
interface Probe {
  httpGet?: { path?: string; port?: string | number };
  exec?: { command?: string[] };
  tcpSocket?: unknown;
}
export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }>;
  envFrom?: Array<{ configMapRef?: { name: string }; secretRef?: { name: string; optional?: boolean } }>;
  resources?: { requests?: Record<string, string | number>; limits?: Record<string, string | number> };
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command?: string[] }; sleep?: { seconds: number } } };
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    seccompProfile?: { type?: string };
  };
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type?: string } };
  nodeSelector?: Record<string, string>;
  affinity?: { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: Array<{ matchExpressions?: Array<{ key: string }> }> } } };
  tolerations?: Array<{ key?: string; operator?: string; effect?: string }>;
  volumes?: Array<{ name: string; emptyDir?: unknown }>;
}
export interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: PodSpec;
}
interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}
interface NetworkPolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string };
}
interface NetworkPolicySpec {
  podSelector: LabelSelector;
  policyTypes?: string[];
  ingress?: Array<{ from?: NetworkPolicyPeer[]; ports?: Array<{ port?: number | string }> }>;
}
export interface Trigger {
  type: string;
  name?: string;
  metadata: Record<string, string>;
  authenticationRef?: { name: string };
}
export interface ScaledObjectSpec {
  scaleTargetRef: { name: string; kind?: string };
  minReplicaCount?: number;
  maxReplicaCount?: number;
  cooldownPeriod?: number;
  pollingInterval?: number;
  triggers: Trigger[];
  advanced?: { scalingModifiers?: { formula?: string; target?: string; activationTarget?: string; metricType?: string } };
}

// ---- rendering --------------------------------------------------------------------------------

/** `kubectl kustomize dir`, parsed. Throws a clear error when kubectl is missing or fails. */
export function render(dir: string): K8sObject[] {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error('kubectl is not on PATH: test/k8s renders k8s/ with `kubectl kustomize` (kubectl >= 1.27, kustomize v5); install kubectl');
  }
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed (exit ${r.status}):\n${r.stderr}`);
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(r.stdout)) {
    if (doc.errors.length) throw new Error(`kubectl kustomize ${dir}: output is not valid YAML: ${doc.errors[0]!.message}`);
    const o = doc.toJS() as K8sObject | null;
    if (o) objects.push(o);
  }
  return objects;
}

export const id = (o: K8sObject): string => `${o.kind}/${o.metadata?.name ?? '?'}`;

// ---- schema validation --------------------------------------------------------------------------

type ModelClass = (new (data: unknown) => { validate(): void }) & { apiVersion: string; kind: string };
const MODEL_MODULES: Record<string, () => Promise<Record<string, unknown>>> = {
  v1: () => import('kubernetes-models/v1'),
  'apps/v1': () => import('kubernetes-models/apps/v1'),
  'batch/v1': () => import('kubernetes-models/batch/v1'),
  'policy/v1': () => import('kubernetes-models/policy/v1'),
  'networking.k8s.io/v1': () => import('kubernetes-models/networking.k8s.io/v1'),
  'autoscaling/v2': () => import('kubernetes-models/autoscaling/v2'),
  'keda.sh/v1alpha1': () => import('@kubernetes-models/keda/keda.sh/v1alpha1'),
};

/** Schema violations of every object (an unknown apiVersion/kind is one). */
export async function schemaViolations(objects: K8sObject[]): Promise<string[]> {
  const out: string[] = [];
  for (const o of objects) {
    const load = MODEL_MODULES[o.apiVersion];
    const Model = load ? ((await load())[o.kind] as ModelClass | undefined) : undefined;
    if (!Model || Model.apiVersion !== o.apiVersion || Model.kind !== o.kind) {
      out.push(`${id(o)}: no schema for ${o.apiVersion} ${o.kind} (add its model to MODEL_MODULES in test/k8s/policy.ts)`);
      continue;
    }
    // kustomize wraps long base64 values in lines; the API server's decoder skips the newlines
    const data = o.kind === 'Secret' && o.data ? { ...o, data: Object.fromEntries(Object.entries(o.data).map(([k, val]) => [k, val.replace(/\s+/g, '')])) } : o;
    try {
      new Model(data).validate();
    } catch (e) {
      out.push(`${id(o)} (${o.apiVersion}): ${(e as Error).message}`);
    }
  }
  return out;
}

// ---- helpers ----------------------------------------------------------------------------------

export interface Workload {
  object: K8sObject;
  template: PodTemplate;
  /** Deployments, StatefulSets and the coordinator's Job run until stopped: they need probes */
  longRunning: boolean;
}

/** The pod templates of Deployments, StatefulSets, Jobs and CronJobs. */
export function workloads(objects: K8sObject[]): Workload[] {
  const out: Workload[] = [];
  for (const o of objects) {
    const spec = o.spec as { template?: PodTemplate; jobTemplate?: { spec: { template: PodTemplate } } } | undefined;
    const template = o.kind === 'CronJob' ? spec?.jobTemplate?.spec.template : ['Deployment', 'StatefulSet', 'Job'].includes(o.kind) ? spec?.template : undefined;
    if (!template) continue;
    const component = template.metadata?.labels?.['app.kubernetes.io/component'];
    const longRunning = o.kind === 'Deployment' || o.kind === 'StatefulSet' || component === 'es-coordinator' || component === 'grpo-coordinator';
    out.push({ object: o, template, longRunning });
  }
  return out;
}

export const isFuguImage = (image: string | undefined): boolean => /(^|\/)fugu(-router-cuda)?(:|$)/.test(image ?? '');

export function configMap(objects: K8sObject[], name = 'fugu-config'): Record<string, string> {
  const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name);
  if (!cm) throw new Error(`no ConfigMap ${name} in the rendered output`);
  return cm.data ?? {};
}

export function selects(selector: LabelSelector, labels: Record<string, string> = {}): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = e.key in labels;
    if (e.operator === 'In' && !(has && e.values?.includes(labels[e.key]!))) return false;
    if (e.operator === 'NotIn' && has && e.values?.includes(labels[e.key]!)) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

const SECRET_NAME = /(KEY|PASSWORD|SECRET|TOKEN|CREDENTIAL)/i;
const URL_WITH_PASSWORD = /\/\/[^/@\s:]*:[^/@\s]+@/;
const quantity = (v: string | number | undefined): boolean => v !== undefined && String(v) !== '' && String(v) !== '0';

/** The port a probe's httpGet names, resolved against the container's ports. */
function probePortOk(c: Container, p: Probe | undefined): boolean {
  const port = p?.httpGet?.port;
  if (port === undefined) return false;
  return (c.ports ?? []).some((cp) => cp.name === port || cp.containerPort === port);
}

// ---- the policy ---------------------------------------------------------------------------------

export interface PolicyOptions {
  /** the workers' drain bound (ms): terminationGracePeriodSeconds must exceed it + 5 s (+ preStop) */
  drainMs: number;
}

/** Every rule of issue 6's "every container" and "policies" lists, as violations. */
export function policyViolations(objects: K8sObject[], opts: PolicyOptions): string[] {
  const v: string[] = [];
  const add = (o: K8sObject, msg: string) => v.push(`${id(o)}: ${msg}`);

  for (const o of objects) {
    if (o.kind !== 'Namespace' && o.metadata.namespace !== 'fugu') add(o, `metadata.namespace is ${o.metadata.namespace ?? 'unset'}, expected fugu`);
  }

  // -- pods and containers
  for (const { object: o, template, longRunning } of workloads(objects)) {
    const pod = template.spec;
    if (pod.automountServiceAccountToken !== false) add(o, 'pod automountServiceAccountToken must be false');
    if (pod.enableServiceLinks !== false) add(o, 'pod enableServiceLinks must be false (Service env vars such as FUGU_GATEWAY_PORT=tcp://... break the configuration)');
    if (pod.securityContext?.runAsNonRoot !== true) add(o, 'pod securityContext.runAsNonRoot must be true');
    const emptyDirs = new Set((pod.volumes ?? []).filter((vol) => vol.emptyDir !== undefined).map((vol) => vol.name));
    for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
      const at = `container ${c.name}`;
      const sc = c.securityContext ?? {};
      for (const r of ['cpu', 'memory'] as const) {
        if (!quantity(c.resources?.requests?.[r])) add(o, `${at}: resources.requests.${r} missing`);
        if (!quantity(c.resources?.limits?.[r])) add(o, `${at}: resources.limits.${r} missing`);
      }
      if (sc.runAsNonRoot !== true) add(o, `${at}: securityContext.runAsNonRoot must be true`);
      if (typeof sc.runAsUser !== 'number' || sc.runAsUser === 0) add(o, `${at}: securityContext.runAsUser must be a non-zero uid`);
      if (isFuguImage(c.image) && sc.runAsUser !== 10001) add(o, `${at}: securityContext.runAsUser must be 10001 (the image's user)`);
      if (sc.allowPrivilegeEscalation !== false) add(o, `${at}: securityContext.allowPrivilegeEscalation must be false`);
      if (sc.readOnlyRootFilesystem !== true) add(o, `${at}: securityContext.readOnlyRootFilesystem must be true`);
      if (!sc.capabilities?.drop?.includes('ALL')) add(o, `${at}: securityContext.capabilities.drop must include ALL`);
      if (sc.capabilities?.add?.length) add(o, `${at}: securityContext.capabilities.add must be empty`);
      if ((sc.seccompProfile?.type ?? pod.securityContext?.seccompProfile?.type) !== 'RuntimeDefault') add(o, `${at}: seccompProfile RuntimeDefault missing`);
      const tmp = c.volumeMounts?.find((m) => m.mountPath === '/tmp');
      if (!tmp || !emptyDirs.has(tmp.name)) add(o, `${at}: /tmp must be an emptyDir mount (read-only root filesystem)`);
      if (isFuguImage(c.image)) {
        if (c.command) add(o, `${at}: set args, not command: command replaces the image's ENTRYPOINT (tini as PID 1, which passes SIGTERM on)`);
        const home = c.volumeMounts?.find((m) => m.mountPath === '/var/lib/fugu');
        if (!home || !emptyDirs.has(home.name)) add(o, `${at}: FUGU_HOME (/var/lib/fugu) must be an emptyDir mount`);
        for (const e of c.env ?? []) {
          if (e.name === 'FUGU_HOME' && e.value !== '/var/lib/fugu') add(o, `${at}: FUGU_HOME must stay /var/lib/fugu`);
        }
      }
      for (const e of c.env ?? []) {
        if (e.value !== undefined && SECRET_NAME.test(e.name) && e.value !== '') add(o, `${at}: env ${e.name} is a literal; credentials come from a Secret (valueFrom.secretKeyRef)`);
        if (e.value !== undefined && URL_WITH_PASSWORD.test(e.value)) add(o, `${at}: env ${e.name} holds a URL with a password; use a Secret`);
      }
      if (longRunning) {
        for (const kind of ['livenessProbe', 'readinessProbe'] as const) {
          const p = c[kind];
          if (!p) add(o, `${at}: ${kind} missing`);
          else if (isFuguImage(c.image) && !probePortOk(c, p)) add(o, `${at}: ${kind} must be an httpGet on one of the container's ports (the ops server)`);
        }
        if (isFuguImage(c.image)) {
          if (c.livenessProbe?.httpGet?.path !== '/healthz') add(o, `${at}: livenessProbe must GET /healthz`);
          if (c.readinessProbe?.httpGet?.path !== '/readyz') add(o, `${at}: readinessProbe must GET /readyz`);
        }
      }
    }
    if (o.kind === 'Deployment' && pod.containers.some((c) => isFuguImage(c.image))) {
      const preStop = Math.max(0, ...pod.containers.map((c) => {
        const cmd = c.lifecycle?.preStop?.exec?.command;
        return c.lifecycle?.preStop?.sleep?.seconds ?? (cmd?.[0] === 'sleep' ? Number(cmd[1]) : 0);
      }));
      const needed = opts.drainMs / 1000 + 5 + preStop;
      if ((pod.terminationGracePeriodSeconds ?? 30) <= needed) add(o, `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds ?? 30} must exceed the drain (${opts.drainMs / 1000} s) + 5 s + preStop (${preStop} s)`);
    }
    const component = template.metadata?.labels?.['app.kubernetes.io/component'];
    if (component === 'gateway' && !pod.containers.some((c) => c.lifecycle?.preStop)) add(o, 'the gateway needs a preStop (endpoints update before it stops taking requests)');
  }

  // -- provider API keys only from Secrets; ConfigMaps hold no credentials
  for (const o of objects.filter((x) => x.kind === 'ConfigMap')) {
    for (const [k, val] of Object.entries(o.data ?? {})) {
      if (SECRET_NAME.test(k)) add(o, `data.${k} looks like a credential: put it in a Secret`);
      if (URL_WITH_PASSWORD.test(val)) add(o, `data.${k} holds a URL with a password: put it in a Secret`);
    }
  }

  // -- every Deployment that scales has a PodDisruptionBudget selecting its pods; KEDA/HPA own replicas
  const pdbs = objects.filter((o) => o.kind === 'PodDisruptionBudget');
  const scaled = new Set(objects.filter((o) => o.kind === 'ScaledObject' || o.kind === 'HorizontalPodAutoscaler').map((o) => (o.spec as { scaleTargetRef: { name: string } }).scaleTargetRef.name));
  for (const o of objects.filter((x) => x.kind === 'Deployment')) {
    const labels = (o.spec as { template: PodTemplate }).template.metadata?.labels;
    const pdb = pdbs.find((p) => selects((p.spec as { selector: LabelSelector }).selector, labels));
    if (!pdb) add(o, 'no PodDisruptionBudget selects its pods');
    else if ((pdb.spec as { minAvailable?: unknown }).minAvailable !== undefined) add(pdb, 'use maxUnavailable (minAvailable blocks drains at one replica or zero)');
    if (scaled.has(o.metadata.name) && (o.spec as { replicas?: number }).replicas !== undefined) add(o, 'spec.replicas is set although KEDA/an HPA scales it (every apply would reset the scale)');
  }
  for (const name of ['fugu-gateway', 'fugu-router-worker', 'fugu-provider-worker', 'fugu-evaluator', 'fugu-conductor']) {
    if (!objects.some((o) => o.kind === 'Deployment' && o.metadata.name === name)) v.push(`Deployment/${name}: missing`);
  }

  // -- network policies: default deny; open ingress only to the gateway; Redis/Postgres from fugu pods
  const netpols = objects.filter((o) => o.kind === 'NetworkPolicy');
  const denyAll = netpols.some((p) => {
    const s = p.spec as unknown as NetworkPolicySpec;
    return Object.keys(s.podSelector?.matchLabels ?? {}).length === 0 && !s.podSelector?.matchExpressions?.length && s.policyTypes?.includes('Ingress') && !s.ingress?.length;
  });
  if (!denyAll) v.push('NetworkPolicy: no default-deny ingress policy (podSelector {}, policyTypes [Ingress], no rules)');
  const pods = workloads(objects).map((w) => ({ id: id(w.object), labels: w.template.metadata?.labels ?? {} }));
  for (const p of netpols) {
    const s = p.spec as unknown as NetworkPolicySpec;
    for (const rule of s.ingress ?? []) {
      const fromAnywhere = !rule.from?.length || rule.from.some((f) => f.ipBlock?.cidr === '0.0.0.0/0' || (f.namespaceSelector && !f.namespaceSelector.matchLabels && !f.namespaceSelector.matchExpressions));
      if (!fromAnywhere) continue;
      for (const pod of pods.filter((x) => selects(s.podSelector, x.labels))) {
        if (pod.labels['app.kubernetes.io/component'] !== 'gateway') add(p, `admits ingress from anywhere to ${pod.id}; only the gateway may take outside traffic`);
      }
    }
  }
  for (const component of ['redis', 'postgres']) {
    const store = pods.find((x) => x.labels['app.kubernetes.io/component'] === component);
    if (!store) continue;
    const rules = netpols.filter((p) => selects((p.spec as unknown as NetworkPolicySpec).podSelector, store.labels)).flatMap((p) => (p.spec as unknown as NetworkPolicySpec).ingress ?? []);
    if (!rules.length) v.push(`${store.id}: no NetworkPolicy admits fugu's pods`);
    for (const rule of rules) {
      for (const f of rule.from ?? [{}]) {
        const fromFugu = f.podSelector && !f.namespaceSelector && selects(f.podSelector, { 'app.kubernetes.io/part-of': 'fugu', 'app.kubernetes.io/component': 'provider-worker' }) && !selects(f.podSelector, {});
        const fromKeda = component === 'redis' && f.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === 'keda';
        if (!fromFugu && !fromKeda) v.push(`${store.id}: a NetworkPolicy admits ${JSON.stringify(f)}; only fugu pods${component === 'redis' ? ' and KEDA' : ''} may connect`);
      }
    }
  }
  return v;
}
