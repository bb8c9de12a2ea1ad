// Fixtures shared by the adapters' wire-level tests.
import type { ToolDefinition } from '@fugu/core';

/** A one-argument tool every adapter test declares and calls. */
export const WEATHER_TOOL: ToolDefinition = {
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
