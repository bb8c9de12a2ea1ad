// The client session of each request of the chat routes (sessions.ts): read from its headers and
// body before the handler runs, into its record (the row's `session`). A bad explicit session
// (`x-fugu-session`, `fugu.session`) is a 400 naming it, in the route's own error shape.
import type { GatewayContext } from '../context.ts';
import { SESSION_ROUTES, sessionOf } from '../sessions.ts';
import { unencapsulated } from './shared.ts';

export const sessionsPlugin = unencapsulated<{ ctx: GatewayContext }>(async (app, { ctx }) => {
  app.addHook('preHandler', async (req) => {
    const route = req.routeOptions.url;
    if (route === undefined || !SESSION_ROUTES.has(route)) return;
    const session = sessionOf(req.headers, req.body, route);
    if (session !== undefined) ctx.record(req).session = session;
  });
});
