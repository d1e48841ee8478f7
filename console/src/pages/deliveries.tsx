import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type Attempt, type Delivery } from '../api.js';
import { useFunctionNames } from '../function-names.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { localInputValue, timeZoneName } from '../time.js';
import { ErrorMessage, PageTitle, SourcePicker, Status, formatTime, useLoad, useSources } from '../ui.js';
import { FetchList, LoggedLines, OutcomeBadge, RunError } from './function-run.js';

const STATUSES = ['pending', 'succeeded', 'failed'] as const;
const PAGE_SIZE = 100;

/** A `datetime-local` value for an hour ago, the default "retry failed since". */
const anHourAgo = (): string => localInputValue(-3_600_000);

export function DeliveriesPage({ route }: { route: Route }) {
  const { sources, error: sourcesError } = useSources();
  const sourceId = route.params.get('source') ?? '';
  const status = route.params.get('status') ?? '';
  const selectedId = route.params.get('delivery') ?? '';
  /** Paging: only deliveries older than this id (the API's `beforeId`). */
  const beforeId = route.params.get('before') ?? '';
  /** The search: the deliveries of the messages with this userId and/or messageId (exact). */
  const userId = route.params.get('userId') ?? '';
  const messageId = route.params.get('messageId') ?? '';
  const [notice, setNotice] = useState('');
  const [actionError, setActionError] = useState<unknown>(undefined);
  const [since, setSince] = useState(anHourAgo);
  const query = new URLSearchParams({
    limit: String(PAGE_SIZE),
    ...(sourceId !== '' && { sourceId }),
    ...(status !== '' && { status }),
    ...(beforeId !== '' && { beforeId }),
    ...(userId !== '' && { userId }),
    ...(messageId !== '' && { messageId }),
  });
  const { value: deliveries, error, reload } = useLoad(async () => (await api<{ deliveries: Delivery[] }>('GET', `/deliveries?${query.toString()}`)).deliveries, [
    sourceId,
    status,
    beforeId,
    userId,
    messageId,
  ]);
  /** Each row names its source; the id stays beside it (a deleted source has only the id). */
  const sourceNames = new Map((sources ?? []).map((source) => [source.id, source.name]));
  const { names: functionNames, error: functionNamesError } = useFunctionNames((deliveries ?? []).filter((d) => d.destination === 'function').map((d) => d.sourceId));
  const go = (change: Record<string, string>): void => {
    const params = { source: sourceId, status, userId, messageId, delivery: selectedId, before: beforeId, ...change };
    navigate('deliveries', Object.fromEntries(Object.entries(params).filter(([, v]) => v !== '')));
  };
  const searching = userId !== '' || messageId !== '';

  const retryAll = async (event: Event): Promise<void> => {
    event.preventDefault();
    try {
      const sinceMs = new Date(since).getTime();
      const { requeued } = await api<{ requeued: number }>('POST', '/deliveries/retry', {
        ...(sourceId !== '' && { sourceId }),
        ...(Number.isFinite(sinceMs) && { since: new Date(sinceMs).toISOString() }),
      });
      setActionError(undefined);
      setNotice(`Put ${requeued} failed ${requeued === 1 ? 'delivery' : 'deliveries'} back in the queue.`);
      reload();
    } catch (failed) {
      setActionError(failed);
    }
  };

  return (
    <section aria-labelledby="page-title">
      <PageTitle>Deliveries</PageTitle>
      <ErrorMessage error={sourcesError} />
      <div class="row toolbar">
        {sources !== undefined && <SourcePicker sources={sources} value={sourceId} allowAll onChange={(id) => go({ source: id, delivery: '', before: '' })} />}
        <label class="inline">
          Status
          <select value={status} onChange={(event) => go({ status: (event.target as HTMLSelectElement).value, delivery: '', before: '' })}>
            <option value="">Any status</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <button type="button" class="secondary" onClick={reload}>
          Refresh
        </button>
      </div>
      <Search
        key={`${userId}\n${messageId}`}
        userId={userId}
        messageId={messageId}
        onSearch={(search) => go({ ...search, delivery: '', before: '' })}
      />
      <form class="row" onSubmit={(event) => void retryAll(event)} aria-label="Retry failed deliveries">
        <label class="inline">
          Retry every failed delivery{sourceId === '' ? '' : ' of this source'} that failed since ({timeZoneName()})
          <input type="datetime-local" value={since} onInput={(event) => setSince((event.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Retry all failed since then</button>
      </form>
      <Status>{notice}</Status>
      <ErrorMessage error={actionError} />
      <ErrorMessage error={error} />
      <ErrorMessage error={functionNamesError} />
      {deliveries !== undefined && deliveries.length === 0 && !searching && (status !== '' || beforeId !== '' ? <p>No deliveries match.</p> : <NoDeliveryYet sourceId={sourceId} />)}
      {deliveries !== undefined && deliveries.length === 0 && searching && (
        <p>
          No deliveries match: none of a message with {[userId !== '' && `userId ${userId}`, messageId !== '' && `messageId ${messageId}`].filter((part) => part !== false).join(' and ')}
          {sourceId !== '' || status !== '' ? ' with this source and status' : ''}. Ids match exactly, case included.
        </p>
      )}
      {deliveries !== undefined && deliveries.length > 0 && (
        <div class="scroll-x">
          <table>
            <caption class="visually-hidden">Deliveries, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Source</th>
                <th scope="col">Destination</th>
                <th scope="col">Message</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Updated</th>
                <th scope="col">Last error</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.map((delivery) => (
                <tr key={delivery.id} data-delivery-id={delivery.id} aria-selected={String(delivery.id) === selectedId}>
                  <td>{delivery.id}</td>
                  <td>
                    {sourceNames.get(delivery.sourceId) ?? ''}
                    <br />
                    <code class="hint">{delivery.sourceId}</code>
                  </td>
                  <td>
                    <DestinationName delivery={delivery} functionNames={functionNames} />
                  </td>
                  <td>
                    <button type="button" class="secondary" onClick={() => go({ delivery: String(delivery.id) })}>
                      {messageTitle(delivery)}
                      <span class="visually-hidden"> (the message of delivery {delivery.id})</span>
                    </button>
                    {userLine(delivery) !== '' && (
                      <>
                        <br />
                        {userLine(delivery)}
                      </>
                    )}
                    <br />
                    <code class="hint">{delivery.messageId ?? `#${delivery.messageSeq}`}</code>
                  </td>
                  <td>
                    <span class={`badge ${delivery.status}`}>{delivery.status}</span>
                  </td>
                  <td>{delivery.attemptCount}</td>
                  <td>{formatTime(delivery.updatedAt)}</td>
                  <td>{delivery.lastError ?? ''}</td>
                  <td class="actions">
                    <button type="button" class="secondary" onClick={() => go({ delivery: String(delivery.id) })} aria-label={`Show the attempts of delivery ${delivery.id}`}>
                      Attempts
                    </button>
                    {delivery.status === 'failed' && (
                      <button
                        type="button"
                        onClick={() =>
                          void api('POST', `/deliveries/${delivery.id}/retry`).then(
                            () => {
                              setActionError(undefined);
                              setNotice(`Delivery ${delivery.id} is back in the queue.`);
                              reload();
                            },
                            setActionError,
                          )
                        }
                        aria-label={`Retry delivery ${delivery.id}`}
                      >
                        Retry
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {deliveries !== undefined && (beforeId !== '' || deliveries.length === PAGE_SIZE) && (
        <nav class="row" aria-label="Pages of deliveries">
          {beforeId !== '' && (
            <button type="button" class="secondary" onClick={() => go({ before: '', delivery: '' })}>
              Newest deliveries
            </button>
          )}
          {deliveries.length === PAGE_SIZE && (
            <button type="button" class="secondary" onClick={() => go({ before: String(deliveries.at(-1)!.id), delivery: '' })}>
              Older deliveries
            </button>
          )}
        </nav>
      )}
      {selectedId !== '' && <Selected key={selectedId} id={selectedId} onClose={() => go({ delivery: '' })} onRetried={reload} />}
    </section>
  );
}

/** `track · Order Completed`: what the message was; a message no longer stored has no type. */
function messageTitle(delivery: Delivery): string {
  if (delivery.type === undefined) return 'Message';
  return delivery.event === undefined ? delivery.type : `${delivery.type} · ${delivery.event}`;
}

/** Who sent it: the userId, else the anonymousId. */
function userLine(delivery: Pick<Delivery, 'userId' | 'anonymousId'>): string {
  if (delivery.userId !== undefined) return `user ${delivery.userId}`;
  return delivery.anonymousId === undefined ? '' : `anonymous ${delivery.anonymousId}`;
}

/** The search by userId and messageId; the page's address keeps what was searched. */
function Search({ userId, messageId, onSearch }: { userId: string; messageId: string; onSearch: (search: { userId: string; messageId: string }) => void }) {
  const [user, setUser] = useState(userId);
  const [message, setMessage] = useState(messageId);
  const submit = (event: Event): void => {
    event.preventDefault();
    onSearch({ userId: user.trim(), messageId: message.trim() });
  };
  return (
    <form class="row" role="search" aria-label="Search deliveries" onSubmit={submit}>
      <label class="inline">
        User id
        <input type="search" value={user} maxLength={1024} onInput={(event) => setUser((event.target as HTMLInputElement).value)} />
      </label>
      <label class="inline">
        messageId
        <input type="search" value={message} maxLength={1024} onInput={(event) => setMessage((event.target as HTMLInputElement).value)} />
      </label>
      <button type="submit">Search</button>
      {(userId !== '' || messageId !== '') && (
        <button type="button" class="secondary" onClick={() => onSearch({ userId: '', messageId: '' })}>
          Clear search
        </button>
      )}
    </form>
  );
}

/** `heldBy`: the answering node's circuit breaker holds a pending delivery's receiver origin or `function:<id>`. */
type HeldBy = { reason: 'circuit-open'; target: string; state: 'open' | 'half-open'; until?: string };
type DeliveryDetail = Delivery & { message?: unknown; attempts: Attempt[]; heldBy?: HeldBy[] };

/** The selected delivery: its message, then its attempts, read once for both. */
function Selected({ id, onClose, onRetried }: { id: string; onClose: () => void; onRetried: () => void }) {
  const { value, error, reload } = useLoad(() => api<DeliveryDetail>('GET', `/deliveries/${id}`), [id]);
  return (
    <>
      <MessageOf id={id} value={value} />
      <Attempts id={id} value={value} error={error} reload={reload} onClose={onClose} onRetried={onRetried} />
    </>
  );
}

function MessageOf({ id, value }: { id: string; value: DeliveryDetail | undefined }) {
  // The panels open below the list: take the reader (and the keyboard focus) there.
  const title = useRef<HTMLHeadingElement>(null);
  useEffect(() => title.current?.focus(), []);
  return (
    <section class="panel" aria-labelledby="message-title">
      <h2 id="message-title" tabIndex={-1} ref={title}>
        Message of delivery {id}
      </h2>
      {value !== undefined &&
        (value.message === undefined ? (
          <p>The message is no longer stored (past the retention period, or erased by a deletion request).</p>
        ) : (
          <>
            <p>
              {messageTitle(value)}
              {userLine(value) !== '' && <> · {userLine(value)}</>}
              {value.messageId !== undefined && (
                <>
                  {' '}
                  · messageId <code>{value.messageId}</code>
                </>
              )}
            </p>
            <p class="row links">
              <a href={`#/debugger?${new URLSearchParams({ source: value.sourceId, seq: String(value.messageSeq) }).toString()}`}>Open message {value.messageSeq} in the live debugger</a>
              {value.userId !== undefined && (
                <a href={`#/deliveries?${new URLSearchParams({ userId: value.userId }).toString()}`}>Every delivery of user {value.userId}</a>
              )}
            </p>
            <pre class="json payload" tabIndex={0} aria-label={`The message of delivery ${id}, as stored`}>
              {JSON.stringify(value.message, null, 2)}
            </pre>
          </>
        ))}
    </section>
  );
}

/** `Webhooks`, or a function destination by its name (while the names load, and once it is deleted, by its id only). */
function DestinationName({ delivery, functionNames }: { delivery: Delivery; functionNames: ReadonlyMap<string, string> | undefined }) {
  if (delivery.functionId === undefined) return <>{delivery.destination === 'webhooks' ? 'Webhooks' : delivery.destination}</>;
  const name = functionNames?.get(delivery.functionId);
  return (
    <>
      {name !== undefined ? `Function ${name}` : functionNames === undefined ? 'Function' : 'Function (deleted)'}
      <br />
      <code class="hint">{delivery.functionId}</code>
    </>
  );
}

/**
 * What `POST /deliveries/:id/retry` did, in words: a failed delivery goes back
 * in the queue; a pending one becomes due at once; `requeued: 0` means a
 * worker holds it right now (or it already left the queue), so nothing changed.
 */
function retryOutcome(id: string, status: Delivery['status'], requeued: number): string {
  if (requeued === 0) return `Delivery ${id} was not changed: it is being sent right now or has just finished. Refresh to see its latest attempt.`;
  return status === 'failed' ? `Delivery ${id} is back in the queue.` : `Delivery ${id} is due now; its next attempt starts at once.`;
}

function Attempts({
  id,
  value,
  error,
  reload,
  onClose,
  onRetried,
}: {
  id: string;
  value: DeliveryDetail | undefined;
  error: unknown;
  reload: () => void;
  onClose: () => void;
  onRetried: () => void;
}) {
  const { names: functionNames } = useFunctionNames(value?.functionId === undefined ? [] : [value.sourceId]);
  const functionName = value?.functionId === undefined ? undefined : functionNames?.get(value.functionId);
  const [outcome, setOutcome] = useState('');
  const [retryError, setRetryError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const retryNow = async (status: Delivery['status']): Promise<void> => {
    setBusy(true);
    try {
      const { requeued } = await api<{ requeued: number }>('POST', `/deliveries/${id}/retry`);
      setRetryError(undefined);
      setOutcome(retryOutcome(id, status, requeued));
      reload();
      onRetried();
    } catch (failed) {
      setOutcome('');
      setRetryError(failed);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="panel" aria-labelledby="attempts-title">
      <h2 id="attempts-title">Attempts of delivery {id}</h2>
      <ErrorMessage error={error} />
      {value !== undefined && (
        <>
          <p>
            To <DestinationName delivery={value} functionNames={functionNames} /> · Status <span class={`badge ${value.status}`}>{value.status}</span>
            {value.nextAttemptAt !== undefined && value.status === 'pending' && <> · next attempt {formatTime(value.nextAttemptAt)}</>}
            {value.waitingFor !== undefined && <> · waiting for delivery {value.waitingFor} of the same user</>}
          </p>
          {value.heldBy?.map((held) => (
            <p key={held.target}>
              Held: the circuit of {held.target} is {held.state === 'open' && held.until !== undefined ? <>open until {formatTime(held.until)}, then one delivery goes as a probe</> : <>half-open: a probe is in flight</>}{' '}
              (it failed 5 times in a row; this server node's view). No attempt is recorded while it is held.
            </p>
          ))}
          {value.status !== 'succeeded' && (
            <div class="row">
              <button type="button" disabled={busy} onClick={() => void retryNow(value.status)} aria-describedby={`retry-hint-${id}`}>
                {value.status === 'pending' ? 'Retry now' : 'Retry'}
              </button>
              <span class="hint" id={`retry-hint-${id}`}>
                {value.status === 'pending'
                  ? 'Makes the next attempt due at once; the retry window is unchanged.'
                  : 'Puts it back in the queue with a fresh retry window.'}
              </span>
            </div>
          )}
          <Status>{outcome}</Status>
          <ErrorMessage error={retryError} />
          {value.attempts.length === 0 ? (
            <p>No attempt yet.</p>
          ) : (
            <div class="scroll-x">
              <table>
                <caption class="visually-hidden">Attempts, oldest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">{value.functionId === undefined ? 'URL' : 'Function'}</th>
                    <th scope="col">Answer</th>
                    <th scope="col">Duration</th>
                  </tr>
                </thead>
                <tbody>
                  {value.attempts.map((attempt, i) => (
                    <tr key={i} class="attempt">
                      <td>{formatTime(attempt.at)}</td>
                      <td>
                        {attempt.function !== undefined && (
                          <>
                            {functionName ?? 'Function'} v{attempt.function.version}
                            <br />
                          </>
                        )}
                        <code>{attempt.url}</code>
                      </td>
                      <td>
                        {attempt.function !== undefined && <FunctionAttempt attempt={attempt} run={attempt.function} index={i} />}
                        {attempt.function === undefined && (attempt.statusCode !== undefined ? `HTTP ${attempt.statusCode}` : (attempt.error ?? ''))}
                        {attempt.response?.contentType !== undefined && <span class="hint"> · {attempt.response.contentType}</span>}
                        {attempt.response?.retryAfter !== undefined && <span class="hint"> · Retry-After {attempt.response.retryAfter}</span>}
                        {attempt.response !== undefined && attempt.response.body !== '' && (
                          <details>
                            <summary>Body{attempt.response.bodyTruncated === true ? ' (first 1 KB)' : ''}</summary>
                            <pre class="answer-body">{attempt.response.body}</pre>
                          </details>
                        )}
                      </td>
                      <td>{attempt.durationMs} ms</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
      <div class="row">
        <button type="button" class="secondary" onClick={reload}>
          Refresh attempts
        </button>
        <button type="button" class="secondary" onClick={onClose}>
          Close attempts
        </button>
      </div>
    </section>
  );
}

/** A function destination's call: its outcome and error, every fetch it made and, a click away, its logged lines. */
function FunctionAttempt({ attempt, run, index }: { attempt: Attempt; run: NonNullable<Attempt['function']>; index: number }) {
  return (
    <>
      <OutcomeBadge outcome={run.outcome} />
      <RunError error={attempt.error} errorType={run.errorType} />
      <FetchList fetches={run.fetches} label={`Fetches of attempt ${index + 1}`} />
      {run.logs.length > 0 ? (
        <details>
          <summary>Logged lines ({run.logs.length})</summary>
          <LoggedLines logs={run.logs} />
        </details>
      ) : (
        <p class="hint">Nothing logged.</p>
      )}
    </>
  );
}

/** What to do while nothing was delivered: a destination, then a message. */
function NoDeliveryYet({ sourceId }: { sourceId: string }) {
  const query = sourceId === '' ? '' : `?source=${encodeURIComponent(sourceId)}`;
  return (
    <p>
      No deliveries yet. Each message a source accepts is delivered to its Webhooks destination (<a href={`#/webhooks${query}`}>set its receivers</a>) and its
      function destinations; send an event (<a href={`#/debugger${query}`}>how to send one</a>) and its delivery shows here.
    </p>
  );
}
