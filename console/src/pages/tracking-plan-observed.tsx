import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorMessage, formatTime, PageButtons, useCursorPages, useLoad } from '../ui.js';

/** `GET /sources/:id/tracking-plan/violations`: counts per event and violation type, biggest first. */
interface ViolationCountsAnswer {
  readonly since: string;
  readonly plan: { readonly id: string; readonly version: number } | null;
  readonly violations: ReadonlyArray<{
    readonly event: string | null;
    readonly callType: string;
    readonly type: string;
    readonly count: number;
    readonly latest: { readonly messageId: string; readonly receivedAt: string; readonly violation: { readonly message?: string; readonly property?: string } };
  }>;
  readonly truncated: boolean;
  readonly unrecordedViolations: number;
  readonly limits: { readonly rowsPerSourceAndHour: number; readonly violationsPerMessage: number };
}

/** `GET /sources/:id/schema`: what the source received, per call type and event. */
interface ObservedSchemaAnswer {
  readonly from: string;
  readonly to: string;
  readonly events: ReadonlyArray<ObservedEvent>;
  readonly truncated: { readonly events: boolean; readonly unrecordedMessages: number };
  /** The next page's; absent on the last. */
  readonly cursor?: string;
  readonly limits: { readonly eventsPerSourceAndDay: number; readonly pathsPerEvent: number; readonly depth: number; readonly pathsPerPage: number };
}

interface ObservedEvent {
  readonly type: string;
  readonly event: string | null;
  readonly count: number;
  readonly in: 'properties' | 'traits' | null;
  readonly paths: ReadonlyArray<{ readonly path: string; readonly types: readonly string[]; readonly count: number }>;
  readonly pathsTruncated: boolean;
}

const count = (n: number): string => n.toLocaleString('en-US');

/** The name a row goes by: a track's event, else its call type. */
const eventName = (row: { type: string; event: string | null }): string => (row.event === null ? row.type : `${row.type} ${row.event}`);

/**
 * How often the source's messages broke its plan over the last 24 hours, per
 * event and violation type, with the latest example of each. `planVersion`
 * is part of the key, so a save loads the counts again.
 */
export function ViolationCounts({ sourceId, planVersion }: { sourceId: string; planVersion: number | undefined }) {
  const { value, error, reload } = useLoad(() => api<ViolationCountsAnswer>('GET', `/sources/${sourceId}/tracking-plan/violations`), [sourceId, planVersion]);
  return (
    <section class="panel" aria-labelledby="violations-title">
      <h2 id="violations-title">Violations in the last 24 hours</h2>
      <ErrorMessage error={error} />
      {value !== undefined && (
        <>
          <p>
            {value.violations.length === 0
              ? `No violations since ${formatTime(value.since)}.`
              : `Counted since ${formatTime(value.since)}, biggest first; a message counts once per violation (its first ${value.limits.violationsPerMessage}). Look a message id up in the live debugger.`}
          </p>
          {value.truncated && (
            <p class="warning">
              Past {count(value.limits.rowsPerSourceAndHour)} kinds of violation in an hour, {count(value.unrecordedViolations)} violations were not recorded.
            </p>
          )}
          {value.violations.length > 0 && (
            <div class="scroll-x">
              <table tabIndex={0}>
                <caption class="visually-hidden">Violation counts per event and type</caption>
                <thead>
                  <tr>
                    <th scope="col">Event</th>
                    <th scope="col">Type</th>
                    <th scope="col">Count</th>
                    <th scope="col">Latest example</th>
                  </tr>
                </thead>
                <tbody>
                  {value.violations.map((row) => (
                    <tr key={`${row.callType} ${row.event ?? ''} ${row.type}`}>
                      <td>{eventName({ type: row.callType, event: row.event })}</td>
                      <td>{row.type}</td>
                      <td class="number">{count(row.count)}</td>
                      <td>
                        {row.latest.violation.message ?? row.type}
                        <br />
                        <span class="hint">
                          message <code>{row.latest.messageId}</code>, {formatTime(row.latest.receivedAt)}
                        </span>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
      <button type="button" class="secondary" onClick={reload}>
        Refresh the counts
      </button>
    </section>
  );
}

/** Events per page; a page also holds at most `limits.pathsPerPage` paths (fewer events when they have many). */
const PAGE_SIZE = 100;

/**
 * What the source actually received over the last 7 days: each call type and
 * event with its count and, a click away, its property paths with the JSON
 * types seen, a page at a time with the API's cursor (a source may have
 * 2,000 events a day of 200 paths each). The paths of an event are rendered
 * only once it is opened.
 */
export function ObservedSchema({ sourceId }: { sourceId: string }) {
  const pages = useCursorPages();
  const { cursor } = pages;
  const query = new URLSearchParams({ limit: String(PAGE_SIZE), ...(cursor !== undefined && { cursor }) });
  const { value, error, reload } = useLoad(() => api<ObservedSchemaAnswer>('GET', `/sources/${encodeURIComponent(sourceId)}/schema?${query.toString()}`), [sourceId, cursor]);
  return (
    <section class="panel" aria-labelledby="observed-title">
      <h2 id="observed-title">Observed schema</h2>
      <ErrorMessage error={error} />
      {value !== undefined && (
        <>
          <p>
            {value.events.length === 0
              ? pages.page > 1
                ? 'No more events.'
                : `Nothing received from ${formatTime(value.from)} to ${formatTime(value.to)}.`
              : `What the source received from ${formatTime(value.from)} to ${formatTime(value.to)} (whole UTC days), before the plan changed anything; biggest first${pages.page > 1 || value.cursor !== undefined ? `, page ${pages.page}` : ''}.`}
          </p>
          {value.truncated.unrecordedMessages > 0 && (
            <p class="warning">
              Past {count(value.limits.eventsPerSourceAndDay)} events a day, {count(value.truncated.unrecordedMessages)} messages of further events were not recorded.
            </p>
          )}
          {value.events.length > 0 && (
            <ul class="plain observed-events">
              {value.events.map((observed) => (
                <ObservedEventEntry key={`${observed.type} ${observed.event ?? ''}`} observed={observed} depth={value.limits.depth} pathsPerEvent={value.limits.pathsPerEvent} />
              ))}
            </ul>
          )}
        </>
      )}
      <nav class="row" aria-label="Pages of the observed schema">
        <PageButtons pages={pages} next={value?.cursor} noun="events" />
        <button type="button" class="secondary" onClick={reload}>
          Refresh the observed schema
        </button>
      </nav>
    </section>
  );
}

function ObservedEventEntry({ observed, depth, pathsPerEvent }: { observed: ObservedEvent; depth: number; pathsPerEvent: number }) {
  const [open, setOpen] = useState(false);
  const name = eventName(observed);
  return (
    <li>
      <details onToggle={(event) => setOpen(event.currentTarget.open)}>
        <summary>
          {name}: {count(observed.count)} {observed.count === 1 ? 'message' : 'messages'}
          {observed.in !== null && `, ${observed.paths.length} ${observed.in} ${observed.paths.length === 1 ? 'path' : 'paths'}`}
          {observed.pathsTruncated && ' (some paths left out)'}
        </summary>
        {open && (
          <>
            {observed.pathsTruncated && (
              <p class="warning">
                Some paths were left out: past {pathsPerEvent} per event and day, deeper than {depth} levels, or past the other bounds of the walk.
              </p>
            )}
            {observed.paths.length === 0 ? (
              <p class="hint">{observed.in === null ? 'This call has no properties or traits.' : `No ${observed.in} seen.`}</p>
            ) : (
              <table tabIndex={0}>
                <caption class="visually-hidden">The {observed.in} paths of {name}</caption>
                <thead>
                  <tr>
                    <th scope="col">Path in {observed.in}</th>
                    <th scope="col">Types</th>
                    <th scope="col">Messages</th>
                  </tr>
                </thead>
                <tbody>
                  {observed.paths.map((path) => (
                    <tr key={path.path}>
                      <td>
                        <code>{path.path}</code>
                      </td>
                      <td>{path.types.join(', ')}</td>
                      <td class="number">{count(path.count)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
          </>
        )}
      </details>
    </li>
  );
}
