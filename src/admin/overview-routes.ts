import type { FastifyInstance } from 'fastify';
import type { OverviewAdmin } from './overview-admin.js';
import { OVERVIEW_SCHEMAS } from './route-schemas.js';

/** The console overview's data, as an `extensions` entry of adminRoutes (same auth and error shape). */
export function overviewRoutes(overview: OverviewAdmin): (app: FastifyInstance) => void {
  return (app) => {
    app.get<{ Querystring: Record<string, string | undefined> }>('/overview/traffic', { schema: OVERVIEW_SCHEMAS.traffic }, async (request) =>
      overview.traffic(request.query),
    );
  };
}
