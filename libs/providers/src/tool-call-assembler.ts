// Streams deliver a tool call in pieces (id and name first, then argument fragments) keyed by
// an index. The assembler collects them so consumers only ever see whole tool calls.

import type { ToolCall } from '@fugu/core';

type Slot = { id: string; name: string; arguments: string };

export class ToolCallAssembler {
  readonly #slots = new Map<number, Slot>();
  readonly #order: number[] = [];
  readonly #fallbackIdPrefix: string;
  #nextSynthetic = 1_000_000;

  /** `fallbackIdPrefix` names calls whose stream gives no id (some OpenAI-compatible servers). */
  constructor(fallbackIdPrefix: string) {
    this.#fallbackIdPrefix = fallbackIdPrefix;
  }

  /** Add a piece: `id`/`name` when the call starts, `argsDelta` for each fragment. */
  add(index: number | undefined, piece: { id?: string | null; name?: string | null; argsDelta?: string | null }): void {
    let key = index ?? this.#order.at(-1) ?? 0;
    let slot = this.#slots.get(key);
    // Some servers give parallel calls the same index: a new id at an index in use starts a new call.
    if (slot && piece.id && slot.id && piece.id !== slot.id) {
      key = this.#nextSynthetic++;
      slot = undefined;
    }
    if (!slot) {
      slot = { id: '', name: '', arguments: '' };
      this.#slots.set(key, slot);
      this.#order.push(key);
    }
    if (piece.id) slot.id = piece.id;
    if (piece.name && !slot.name) slot.name = piece.name;
    if (piece.argsDelta) slot.arguments += piece.argsDelta;
  }

  get size(): number {
    return this.#slots.size;
  }

  /** The whole calls, in the order they started; empty arguments become "{}". */
  calls(): ToolCall[] {
    return this.#order.map((key, i) => {
      const s = this.#slots.get(key)!;
      return { id: s.id || `${this.#fallbackIdPrefix}_${i}`, name: s.name, arguments: s.arguments.trim() === '' ? '{}' : s.arguments };
    });
  }
}
