import { readFile } from 'node:fs/promises';
import { ApiError } from '../errors.js';
import type { ObservedSchemaAnswer } from '../admin/tracking-plan-admin.js';
import type { AdminClient, CliKit } from './admin-client.js';
import { parseArgs } from './args.js';

export const TRACKING_PLAN_USAGE = `  tracking-plans get SOURCE_ID   the source's tracking plan (current version)
  tracking-plans set SOURCE_ID --file PLAN.json
                                 set the source's tracking plan (a new version; --file - reads stdin)
  tracking-plans delete SOURCE_ID
                                 remove the source's tracking plan
  tracking-plans violations SOURCE_ID [--since TIME]
                                 violation counts per event and type, with the latest example (default: last 24 h)
  tracking-plans schema SOURCE_ID [--since TIME] [--until TIME] [--limit N] [--cursor C | --all]
                                 what the source received: events, property paths, JSON types, counts (default: last 7 days),
                                 a page of events (biggest count first; "cursor" names the next); --all reads every page
  tracking-plans draft SOURCE_ID [--since TIME] [--until TIME]
                                 a plan drafted from the observed schema's most frequent events (printed, not stored: edit it, then set it)
`;

/**
 * `switchyard tracking-plans …`, on a running server or the store. A change bumps the
 * config version, so running servers (every node) use it within their
 * config poll.
 */
export async function trackingPlanCommand(argv: readonly string[], kit: CliKit): Promise<void> {
  const { words, flags } = parseArgs(argv, new Set(['all']));
  const file = flags['file'];
  const period = { since: flags['since'], until: flags['until'] };
  const page = { limit: flags['limit'], cursor: flags['cursor'], all: flags['all'] };
  for (const own of ['file', 'since', 'until', 'limit', 'cursor', 'all']) delete flags[own];
  const [, action, sourceId] = words;
  if (sourceId === undefined) throw kit.usageError('missing SOURCE_ID');
  switch (action) {
    case 'get':
      return kit.withAdmin(flags, (admin) => admin.trackingPlans.get(sourceId));
    case 'set': {
      if (typeof file !== 'string') throw kit.usageError('set needs --file PLAN.json (or --file - for stdin)');
      const text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
      let plan: unknown;
      try {
        plan = JSON.parse(text);
      } catch (error) {
        throw new ApiError('invalid_tracking_plan', `${file === '-' ? 'stdin' : file} is not valid JSON`, { cause: error });
      }
      return kit.withAdmin(flags, (admin) => admin.trackingPlans.put(sourceId, plan));
    }
    case 'delete':
      return kit.withAdmin(flags, async (admin) => {
        await admin.trackingPlans.delete(sourceId);
        return { deleted: sourceId };
      });
    case 'violations':
      return kit.withAdmin(flags, (admin) => admin.trackingPlans.violations(sourceId, { since: period.since }));
    case 'schema':
      if (page.all !== undefined && page.cursor !== undefined) throw kit.usageError('--all reads every page from the first: drop --cursor');
      return kit.withAdmin(flags, (admin) => observedSchema(admin, sourceId, { ...period, limit: page.limit, cursor: page.cursor }, page.all !== undefined));
    case 'draft':
      return kit.withAdmin(flags, (admin) => admin.trackingPlans.draftFromSchema(sourceId, period));
    default:
      throw kit.usageError(`unknown tracking-plans command ${JSON.stringify(action ?? '')}`);
  }
}

/** One page of the observed schema, saying on stderr how to read the next; or (`all`) every page, as one answer. */
async function observedSchema(admin: AdminClient, sourceId: string, query: { since?: unknown; until?: unknown; limit?: unknown; cursor?: unknown }, all: boolean): Promise<ObservedSchemaAnswer> {
  const first = await admin.trackingPlans.observedSchema(sourceId, query);
  if (!all) {
    if (first.cursor !== undefined) process.stderr.write(`switchyard: ${first.events.length} events on this page, more after it: add --cursor ${first.cursor} (or --all)\n`);
    return first;
  }
  const events = [...first.events];
  for (let cursor = first.cursor; cursor !== undefined; ) {
    const next = await admin.trackingPlans.observedSchema(sourceId, { ...query, cursor });
    events.push(...next.events);
    cursor = next.cursor;
  }
  const { cursor: _, ...rest } = first;
  return { ...rest, events, truncated: { events: first.truncated.unrecordedMessages > 0, unrecordedMessages: first.truncated.unrecordedMessages } };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    // The plan bound (256 KB) with room for whitespace: parseTrackingPlan says the exact limit.
    if (size > 1024 * 1024) throw new ApiError('invalid_tracking_plan', 'the plan on stdin is over 1 MB');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
