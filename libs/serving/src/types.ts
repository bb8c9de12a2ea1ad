// The one routing interface the gateway uses, whatever runs the router: in this process
// (worker threads, no queue hop) or a pool of router workers behind the `route` queue.

/** What the router scores: the whole conversation so far, flattened to text (see routingText). */
export type RouteRequest = {
  text: string;
  /** restrict the choice to these workers (an API key's pool); default: every worker of the checkpoint */
  allowed?: readonly string[];
  /** cost weight, >= 0 (RouterPolicy's lambda); default 0 */
  lambda?: number;
  /** give up after this long (then a RouterUnavailableError) */
  timeoutMs?: number;
};

export type RouteDecision = {
  /** the chosen worker's name */
  worker: string;
  /** worker names in head order, with pi restricted to the allowed set (0 elsewhere) */
  workers: string[];
  probs: number[];
  /** the checkpoint that decided */
  checkpointId: string;
  /** time inside the router (queue wait + batch wait + inference), ms */
  routingMs: number;
};

export interface RouteClient {
  route(req: RouteRequest): Promise<RouteDecision>;
  /** false while no checkpoint is loaded / no router worker answers */
  ready(): Promise<boolean>;
  close(): Promise<void>;
}
