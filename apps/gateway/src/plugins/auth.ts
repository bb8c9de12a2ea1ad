// Authentication of the API routes: every route registered in the scope of this plugin checks
// the caller's key first (401/403 in OpenAI's format) and reads it with ctx.callerOf(req).
import type { GatewayContext } from '../context.ts';
import { unencapsulated } from './shared.ts';

export const authPlugin = unencapsulated<{ ctx: GatewayContext }>(async (app, { ctx }) => {
  app.addHook('preHandler', async (req) => {
    await ctx.authenticate(req);
  });
});
