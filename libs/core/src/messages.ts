// Chat messages as typed content parts (after the Vercel AI SDK's provider specification):
// text, images and tool calls are parts; tool results are their own role.

export type TextPart = { type: 'text'; text: string };
export type ImagePart = { type: 'image'; url: string; mediaType?: string };
export type ToolCallPart = { type: 'tool-call'; id: string; name: string; arguments: string };
export type ToolResultPart = { type: 'tool-result'; toolCallId: string; name?: string; content: string; isError?: boolean };

export type SystemMessage = { role: 'system'; content: string };
export type UserMessage = { role: 'user'; content: string | Array<TextPart | ImagePart> };
export type AssistantMessage = { role: 'assistant'; content: string | Array<TextPart | ToolCallPart> };
export type ToolMessage = { role: 'tool'; content: ToolResultPart[] };
export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

/** A function the model may call; `parameters` is a JSON Schema object. */
export type ToolDefinition = { name: string; description?: string; parameters: Record<string, unknown> };
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

export type ToolCall = { id: string; name: string; arguments: string };

export type Usage = { inputTokens: number; outputTokens: number; reasoningTokens?: number; cachedInputTokens?: number };

export type FinishReason = 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'error' | 'other';

/** Plain text of a message's content (text parts joined), for hashing, token estimates and routing. */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') return m.content;
  return m.content
    .map((p) => {
      switch (p.type) {
        case 'text':
          return p.text;
        case 'tool-call':
          return `${p.name}(${p.arguments})`;
        case 'tool-result':
          return p.content;
        default:
          return '';
      }
    })
    .join('');
}

/** Rough token count (about 4 characters a token) used where a provider reports none. */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.max(1, Math.ceil(text.length / 4));
}
