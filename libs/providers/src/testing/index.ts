// Test helpers: local HTTP servers that speak each provider's real wire format, for tests that
// point a real SDK at them. Import from '@fugu/providers/testing' (not part of the main API).

export {
  StubServer,
  pieces,
  type Dialect,
  type RecordedRequest,
  type ReplyContext,
  type Route,
  type StubReply,
  type StubServerOptions,
  type StubToolCall,
  type StubUsage,
} from './stub-server.ts';
export { openAIDialect, startOpenAIStub, type OpenAIStub } from './stub-openai.ts';
export { anthropicDialect, startAnthropicStub, type AnthropicStub } from './stub-anthropic.ts';
export { collectStream, type CollectedStream } from './collect.ts';
export { googleDialect, startGoogleStub, type GoogleStub } from './stub-google.ts';
export { WEATHER_TOOL } from './fixtures.ts';
