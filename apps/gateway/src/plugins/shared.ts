// Helpers of the gateway's plugins.
import type { FastifyPluginAsync } from 'fastify';

/**
 * A plugin whose hooks and decorations apply to the scope it is registered in (what the
 * fastify-plugin package does, by the same symbol), instead of its own encapsulated child scope.
 */
export function unencapsulated<O extends Record<string, unknown>>(plugin: FastifyPluginAsync<O>): FastifyPluginAsync<O> {
  (plugin as unknown as Record<symbol, boolean>)[Symbol.for('skip-override')] = true;
  return plugin;
}
