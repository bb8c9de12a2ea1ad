// The Postgres schema as kysely sees it. Money is numeric(24,12) and reaches JavaScript as a
// decimal string (exact); int8 counts are parsed to numbers (see connection.ts).
import type { ColumnType, Generated, JSONColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Money = ColumnType<string, string | undefined, string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
type NullableJson<T> = ColumnType<T | null, string | null | undefined, string | null>;

export type RunStatus = 'pending' | 'running' | 'paused' | 'completed' | 'failed' | 'cancelled';
export type CallStatus = 'ok' | 'error';

export interface DatasetsTable {
  id: Generated<number>;
  name: string;
  source: string;
  content_hash: string;
  item_count: number;
  created_at: Timestamp;
}

export interface ItemsTable {
  id: Generated<number>;
  dataset_id: number;
  idx: number;
  ext_id: string;
  task: string;
  prompt: string;
  ground_truth: string | null;
  metric: string | null;
  choices: NullableJson<{ labels: string[]; texts: string[] }>;
  source_split: string | null;
  recorded: NullableJson<Record<string, { score: number; tokensIn?: number; tokensOut?: number; answer?: string }>>;
}

export interface WorkerPoolsTable {
  id: Generated<number>;
  name: string;
  content_hash: string;
  created_at: Timestamp;
}

export interface WorkersTable {
  id: Generated<number>;
  pool_id: number;
  name: string;
  provider: string;
  model: string;
  base_url: string | null;
  api_key_env: string | null;
  settings: JSONColumnType<Record<string, unknown>>;
  input_price: Money;
  output_price: Money;
  /** migration 0009: the worker's description and size (pool file / LLMRouter card) */
  description: ColumnType<string | null, string | null | undefined, string | null>;
  size: ColumnType<string | null, string | null | undefined, string | null>;
  /** migration 0017: a scripted worker's script (WorkerSpec.script) */
  script: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
}

export interface EvalRunsTable {
  id: string;
  dataset_id: number;
  pool_id: number;
  repetitions: number;
  sample_size: number | null;
  seed: number;
  item_count: number;
  total_calls: number;
  enqueued_calls: Generated<number>;
  done_calls: Generated<number>;
  failed_calls: Generated<number>;
  spent: Money;
  spend_cap: ColumnType<string | null, string | null | undefined, string | null>;
  status: RunStatus;
  status_reason: string | null;
  options: JSONColumnType<Record<string, unknown>>;
  created_at: Timestamp;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
}

export interface CallsTable {
  id: Generated<number>;
  run_id: string;
  item_id: number;
  worker_id: number;
  repetition: number;
  request_hash: string;
  status: CallStatus;
  response: NullableJson<Record<string, unknown>>;
  tokens_in: number;
  tokens_out: number;
  cost: Money;
  latency_ms: number;
  attempts: number;
  cached: boolean;
  error_kind: string | null;
  error: string | null;
  created_at: Timestamp;
}

export interface RewardsTable {
  call_id: number;
  run_id: string;
  item_id: number;
  worker_id: number;
  repetition: number;
  score: number;
  verifier: string;
}

export interface ResponseCacheTable {
  request_hash: string;
  provider: string;
  model: string;
  response: JSONColumnType<Record<string, unknown>>;
  tokens_in: number;
  tokens_out: number;
  paid_by: string;
  created_at: Timestamp;
}

export type CheckpointStage = 'init' | 'sft' | 'es' | 'import';

export interface RouterCheckpointsTable {
  id: string;
  stage: CheckpointStage;
  backbone_id: string;
  backbone: JSONColumnType<Record<string, unknown>>;
  workers: JSONColumnType<Array<{ name: string; inputPerMTok: string; outputPerMTok: string }>>;
  theta: Buffer;
  theta_layout: JSONColumnType<Array<{ name: string; offset: number; shape: number[] }>>;
  tau: number | null;
  training: JSONColumnType<Record<string, unknown>>;
  metrics: JSONColumnType<Record<string, unknown>>;
  parent_id: string | null;
  created_at: Timestamp;
}

export interface RouterFeaturesTable {
  backbone_id: string;
  text_hash: string;
  dim: number;
  data: Buffer;
  created_at: Timestamp;
}

export interface ApiKeysTable {
  id: string;
  name: string;
  prefix: string;
  key_hash: string;
  allowed_workers: NullableJson<string[]>;
  /** picodollars (int8; read with ::text, see api-keys.ts) */
  spend_limit: ColumnType<string | null, string | null | undefined, string | null>;
  spent: ColumnType<string, string | undefined, string>;
  created_at: Timestamp;
  revoked_at: NullableTimestamp;
}

/** Gateway requests (migration 0007_requests; repository in requests.ts). */
export interface RequestsTable {
  id: string;
  request_id: string;
  api_key_id: string | null;
  route: string;
  model: string | null;
  worker: string | null;
  stream: ColumnType<boolean, boolean | undefined, boolean>;
  top_probs: NullableJson<Array<{ worker: string; prob: number }>>;
  fallbacks: JSONColumnType<string[]>;
  tokens_in: number;
  tokens_out: number;
  cost: Money;
  routing_ms: number | null;
  provider_ms: number | null;
  total_ms: number;
  status: number;
  error_code: string | null;
  workflow_id: ColumnType<string | null, number | null | undefined, number | null>;
  /** the end user the request named (migration 0019_requests_end_user) */
  end_user: ColumnType<string | null, string | null | undefined, string | null>;
  /** the hints and metadata the request sent (migration 0020_requests_hints) */
  hints: NullableJson<Record<string, unknown>>;
  /** the client session the request belongs to (migration 0021_requests_session) */
  session: ColumnType<string | null, string | null | undefined, string | null>;
  /** the names of the tool calls its answer gave the client, in order (migration 0021_requests_session) */
  tool_calls: NullableJson<string[]>;
  created_at: Timestamp;
}

/** Stored responses of the Responses API (migration 0012_responses; repository in responses.ts). */
export interface ResponsesTable {
  id: string;
  key_id: string | null;
  model: string;
  worker: string | null;
  previous_response_id: string | null;
  conversation_id: string;
  status: string;
  input_items: JSONColumnType<Array<Record<string, unknown>>>;
  output_items: JSONColumnType<Array<Record<string, unknown>>>;
  response: JSONColumnType<Record<string, unknown>>;
  instructions: string | null;
  created_at: Timestamp;
}

export interface RouterDeploymentsTable {
  name: string;
  checkpoint_id: string;
  published_at: NullableTimestamp;
}

export type EsRunStatus = 'running' | 'completed' | 'failed' | 'paused';

/** ES runs (migration 0005_es); states are @fugu/es SepCmaEsState objects, kept opaque here. */
export interface EsRunsTable {
  id: string;
  status: EsRunStatus;
  status_reason: string | null;
  config: JSONColumnType<Record<string, unknown>>;
  code_version: string;
  checkpoint_id: string;
  best_checkpoint_id: string | null;
  initial_state: JSONColumnType<Record<string, unknown>>;
  state: JSONColumnType<Record<string, unknown>>;
  generation: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface EsGenerationsTable {
  run_id: string;
  generation: number;
  state: JSONColumnType<Record<string, unknown>>;
  mean_fitness: number;
  best_fitness: number;
  median_fitness: number;
  best_so_far: number;
  sigma: number;
  sigma_after: number;
  evaluations: number;
  dispatches: ColumnType<number, number | undefined, number>;
  wall_ms: number | null;
  committed_at: Timestamp;
}

export interface EsEvaluationsTable {
  run_id: string;
  generation: number;
  candidate: number;
  replica: number;
  fitness: number;
  seed: string;
  summary: JSONColumnType<Record<string, unknown>>;
  evaluator: string | null;
  eval_ms: number | null;
  created_at: Timestamp;
}

/** A chat-call job's stored request (migration 0006_chat_calls); the job carries only `id`. */
export interface ChatRequestsTable {
  id: string;
  worker_id: number;
  request: JSONColumnType<Record<string, unknown>>;
  sample: ColumnType<number, number | undefined, number>;
  origin: string;
  created_at: Timestamp;
}

/** One row per non-evaluation call (chat-call jobs, gateway calls, ...), unique by `key`. */
export interface ChatCallsTable {
  id: Generated<number>;
  key: string;
  origin: string;
  worker_id: number | null;
  worker: string;
  provider: string;
  model: string;
  request_hash: string;
  status: CallStatus;
  response: NullableJson<Record<string, unknown>>;
  tokens_in: number;
  tokens_out: number;
  cost: Money;
  latency_ms: number;
  attempts: number;
  cached: boolean;
  error_code: string | null;
  error_message: string | null;
  error: NullableJson<Record<string, unknown>>;
  created_at: Timestamp;
}

/** The embedded Conductor policy's checkpoints (migration 0008_conductor). */
export interface ConductorCheckpointsTable {
  id: string;
  workers: JSONColumnType<string[]>;
  backbone_id: string;
  feature_dim: number;
  config: JSONColumnType<Record<string, unknown>>;
  theta: Buffer;
  theta_layout: JSONColumnType<Array<{ name: string; offset: number; shape: number[] }>>;
  training: ColumnType<Record<string, unknown>, string | undefined, string>;
  metrics: ColumnType<Record<string, unknown>, string | undefined, string>;
  parent_id: string | null;
  created_at: Timestamp;
}

/** A batch of workflows (`fugu ultra eval`; migration 0008_conductor). */
export interface ConductorRunsTable {
  id: string;
  dataset_id: number | null;
  pool_id: number;
  specs: JSONColumnType<string[]>;
  options: JSONColumnType<Record<string, unknown>>;
  status: RunStatus;
  status_reason: string | null;
  total: ColumnType<number, number | undefined, number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: NullableTimestamp;
}

export type WorkflowStatus = 'pending' | 'running' | 'done' | 'failed';
export type WorkflowFinishReason =
  | 'answered' | 'parse-error' | 'step-error' | 'budget-steps' | 'budget-tokens' | 'budget-usd' | 'conductor-error'
  // fugu-ultra with tools: an agent's tool loop passed its bounds; the client's results came too late
  | 'budget-tool-turns' | 'tool-timeout';

/** One workflow, one row however often it ran (migration 0008_conductor). */
export interface WorkflowsTable {
  id: Generated<number>;
  key: string;
  run_id: string | null;
  item_id: number | null;
  pool_id: number;
  question: string;
  conductor: string;
  seed: ColumnType<number, number | undefined, number>;
  repeat: ColumnType<number, number | undefined, number>;
  options: JSONColumnType<Record<string, unknown>>;
  status: ColumnType<WorkflowStatus, WorkflowStatus | undefined, WorkflowStatus>;
  attempts: ColumnType<number, number | undefined, number>;
  finish_reason: WorkflowFinishReason | null;
  completion: string | null;
  prompt_version: string | null;
  parse_ok: boolean | null;
  parse_error: NullableJson<{ list: string; step?: number; message: string }>;
  steps: NullableJson<Array<{ worker: number; name: string; subtask: string; access: 'all' | 'none' | number[] }>>;
  topology: string | null;
  n_steps: number | null;
  critical_path: number | null;
  final_answer: string | null;
  score: number | null;
  outcome: string | null;
  reward: number | null;
  logprob: number | null;
  conductor_tokens_in: ColumnType<number, number | undefined, number>;
  conductor_tokens_out: ColumnType<number, number | undefined, number>;
  conductor_cost: Money;
  worker_tokens_in: ColumnType<number, number | undefined, number>;
  worker_tokens_out: ColumnType<number, number | undefined, number>;
  worker_cost: Money;
  latency_ms: number | null;
  error: NullableJson<Record<string, unknown>>;
  /** the writer's own record of its decisions (migration 0010_grpo) */
  decisions: NullableJson<unknown>;
  created_at: Timestamp;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
}

/** One step of a workflow (migration 0008_conductor). */
export interface WorkflowStepsTable {
  workflow_id: number;
  idx: number;
  worker_id: number;
  worker: string;
  subtask: string;
  access: ColumnType<'all' | 'none' | number[], string, string>;
  sees: ColumnType<number[], string, string>;
  chat_call_id: string;
  status: 'ok' | 'error' | 'skipped';
  answer: string | null;
  tokens_in: ColumnType<number, number | undefined, number>;
  tokens_out: ColumnType<number, number | undefined, number>;
  cost: Money;
  latency_ms: ColumnType<number, number | undefined, number>;
  cached: ColumnType<boolean, boolean | undefined, boolean>;
  replay: NullableJson<Record<string, unknown>>;
  error: NullableJson<Record<string, unknown>>;
  created_at: Timestamp;
}

export type GrpoRunStatus = 'running' | 'paused' | 'completed' | 'failed';

/** A GRPO training run of the embedded Conductor (migration 0010_grpo). */
export interface GrpoRunsTable {
  id: string;
  dataset_id: number;
  pool_id: number;
  start_checkpoint_id: string;
  config: JSONColumnType<Record<string, unknown>>;
  code_version: string;
  status: GrpoRunStatus;
  status_reason: string | null;
  iteration: ColumnType<number, number | undefined, number>;
  policy_checkpoint_id: string;
  adam_step: ColumnType<number, number | undefined, number>;
  adam_m: Buffer | null;
  adam_v: Buffer | null;
  best_checkpoint_id: string | null;
  best_val_reward: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: NullableTimestamp;
}

export interface GrpoIterationsTable {
  run_id: string;
  iteration: number;
  policy_checkpoint_id: string;
  next_checkpoint_id: string;
  record: JSONColumnType<Record<string, unknown>>;
  val_reward: number | null;
  committed_at: Timestamp;
}

export interface GrpoRolloutsTable {
  run_id: string;
  iteration: number;
  split: 'train' | 'val';
  question: number;
  sample: number;
  item_id: number;
  workflow_id: number | null;
  finish_reason: string | null;
  parse_ok: boolean | null;
  reward: number | null;
  cost: Money;
  n_steps: number | null;
  topology: string | null;
  decisions: NullableJson<unknown>;
  logprobs: NullableJson<unknown>;
  advantage: number | null;
}

export interface Database {
  datasets: DatasetsTable;
  items: ItemsTable;
  worker_pools: WorkerPoolsTable;
  workers: WorkersTable;
  eval_runs: EvalRunsTable;
  calls: CallsTable;
  rewards: RewardsTable;
  response_cache: ResponseCacheTable;
  router_checkpoints: RouterCheckpointsTable;
  router_features: RouterFeaturesTable;
  router_deployments: RouterDeploymentsTable;
  api_keys: ApiKeysTable;
  requests: RequestsTable;
  responses: ResponsesTable;
  es_runs: EsRunsTable;
  es_generations: EsGenerationsTable;
  es_evaluations: EsEvaluationsTable;
  chat_requests: ChatRequestsTable;
  chat_calls: ChatCallsTable;
  conductor_checkpoints: ConductorCheckpointsTable;
  conductor_runs: ConductorRunsTable;
  workflows: WorkflowsTable;
  workflow_steps: WorkflowStepsTable;
  grpo_runs: GrpoRunsTable;
  grpo_iterations: GrpoIterationsTable;
  grpo_rollouts: GrpoRolloutsTable;
  ultra_deployments: UltraDeploymentsTable;
  ultra_conversations: UltraConversationsTable;
  ultra_sessions: UltraSessionsTable;
  ultra_tool_log: UltraToolLogTable;
}

/** fugu-ultra's deployments, conversations, interactive workflow state and shared tool memory (migration 0011_ultra_serving; repository in ultra-serving.ts). */
export interface UltraDeploymentsTable {
  name: string;
  conductor: string;
  pool: string;
  options: JSONColumnType<Record<string, unknown>>;
  published_at: Generated<Date>;
}

export interface UltraConversationsTable {
  id: string;
  api_key_id: string | null;
  /** coalesce(api_key_id, ''), generated: a conversation is (key_scope, id) (0016_ultra_conversation_keys) */
  key_scope: ColumnType<string, never, never>;
  turns: Generated<number>;
  created_at: Generated<Date>;
}

export type UltraSessionStatus = 'running' | 'tools' | 'done' | 'failed';

export interface UltraSessionsTable {
  workflow_id: ColumnType<string, number, never>;
  conversation_id: string;
  api_key_id: string | null;
  /** coalesce(api_key_id, ''), generated (0016_ultra_conversation_keys) */
  key_scope: ColumnType<string, never, never>;
  status: UltraSessionStatus;
  version: Generated<number>;
  state: JSONColumnType<Record<string, unknown>>;
  deadline_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: Generated<Date>;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

export interface UltraToolLogTable {
  /** the conversation's key: its API key's id, '' without auth (0016_ultra_conversation_keys) */
  key_scope: string;
  conversation_id: string;
  seq: number;
  workflow_id: ColumnType<string, number, never>;
  step: number;
  name: string;
  arguments: string;
  result: string;
  /** the client-visible id of the tool call (0015_ultra_durable; null in older entries) */
  call_id: string | null;
  created_at: Generated<Date>;
}
