// The Responses API's stored responses (migration 0012_responses): insert one, read one, walk
// the chain a response continues (oldest first), delete one. Every read is scoped to the API key
// that stored the row (null: gateway.auth none, which sees only rows stored without a key), so
// another key's response reads as missing. Items and the response object are opaque JSON here
// (the gateway's responses-wire.ts gives them their shape).
import { sql } from 'kysely';
import { InputError } from '@fugu/core';
import type { Db } from './connection.ts';

export type ResponseItemJson = Record<string, unknown>;

export type StoredResponse = {
  /** `resp_...` */
  id: string;
  /** the API key's id; null with gateway.auth none */
  keyId: string | null;
  /** the model asked for */
  model: string;
  /** the worker that answered */
  worker: string | null;
  previousResponseId: string | null;
  /** the first response of the chain (this one's own id when it continued none) */
  conversationId: string;
  status: string;
  /** this request's own input items (not the earlier turns') */
  inputItems: ResponseItemJson[];
  outputItems: ResponseItemJson[];
  /** the response object as it was returned */
  response: Record<string, unknown>;
  instructions: string | null;
  createdAt: Date;
};

export type NewStoredResponse = Omit<StoredResponse, 'createdAt'> & { createdAt?: Date };

/** The longest chain walked; a longer one cannot be continued (an InputError naming previous_response_id). */
export const MAX_RESPONSE_CHAIN = 10_000;

type Raw = {
  id: string;
  key_id: string | null;
  model: string;
  worker: string | null;
  previous_response_id: string | null;
  conversation_id: string;
  status: string;
  input_items: ResponseItemJson[];
  output_items: ResponseItemJson[];
  response: Record<string, unknown>;
  instructions: string | null;
  created_at: Date;
};

function toStored(r: Raw): StoredResponse {
  return {
    id: r.id,
    keyId: r.key_id,
    model: r.model,
    worker: r.worker,
    previousResponseId: r.previous_response_id,
    conversationId: r.conversation_id,
    status: r.status,
    inputItems: r.input_items,
    outputItems: r.output_items,
    response: r.response,
    instructions: r.instructions,
    createdAt: r.created_at,
  };
}

const COLUMNS = sql`r.id, r.key_id, r.model, r.worker, r.previous_response_id, r.conversation_id, r.status, r.input_items, r.output_items, r.response, r.instructions, r.created_at`;

export async function insertStoredResponse(db: Db, r: NewStoredResponse): Promise<void> {
  await sql`
    insert into responses (id, key_id, model, worker, previous_response_id, conversation_id, status, input_items, output_items, response, instructions, created_at)
    values (${r.id}, ${r.keyId}, ${r.model}, ${r.worker}, ${r.previousResponseId}, ${r.conversationId}, ${r.status},
            ${JSON.stringify(r.inputItems)}::jsonb, ${JSON.stringify(r.outputItems)}::jsonb, ${JSON.stringify(r.response)}::jsonb,
            ${r.instructions}, ${r.createdAt ?? new Date()}::timestamptz)
  `.execute(db);
}

/** One stored response of this key (null: the rows stored without a key), or undefined. */
export async function getStoredResponse(db: Db, id: string, keyId: string | null): Promise<StoredResponse | undefined> {
  const { rows } = await sql<Raw>`select ${COLUMNS} from responses r where r.id = ${id} and r.key_id is not distinct from ${keyId}`.execute(db);
  return rows[0] && toStored(rows[0]);
}

/**
 * The chain that ends at `id`, oldest first, each link read under the same key. `missing`: the
 * id of the first response that could not be read (`id` itself, or an ancestor deleted since);
 * the chain is then the part that could be read, and should not be used as a conversation.
 */
export async function getResponseChain(db: Db, id: string, keyId: string | null): Promise<{ chain: StoredResponse[]; missing?: string }> {
  const { rows } = await sql<Raw & { depth: number }>`
    with recursive chain as (
      select ${COLUMNS}, 0 as depth from responses r where r.id = ${id} and r.key_id is not distinct from ${keyId}
      union all
      select ${COLUMNS}, c.depth + 1 from responses r join chain c on r.id = c.previous_response_id
       where r.key_id is not distinct from ${keyId} and c.depth < ${MAX_RESPONSE_CHAIN}
    )
    select * from chain order by depth desc
  `.execute(db);
  const chain = rows.map(toStored);
  if (chain.length > MAX_RESPONSE_CHAIN) throw new InputError(`the chain that '${id}' ends is longer than ${MAX_RESPONSE_CHAIN} responses: start a new conversation`, { field: 'previous_response_id' });
  if (chain.length === 0) return { chain, missing: id };
  const oldest = chain[0]!;
  if (oldest.previousResponseId !== null) return { chain, missing: oldest.previousResponseId };
  return { chain };
}

/** Deletes one of this key's stored responses; false when there was none to delete. */
export async function deleteStoredResponse(db: Db, id: string, keyId: string | null): Promise<boolean> {
  const r = await sql`delete from responses where id = ${id} and key_id is not distinct from ${keyId}`.execute(db);
  return Number(r.numAffectedRows ?? 0) > 0;
}
