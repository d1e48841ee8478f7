import { useEffect, useState } from 'preact/hooks';
import { ApiError, type FunctionDestination, api, type WebhookDestination } from '../api.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { isoFromLocalInput, localInputValue, timeZoneName } from '../time.js';
import { ErrorMessage, NoSourceYet, PageTitle, SourcePicker, Status, formatTime, useLoad, useSources } from '../ui.js';

/** While a replay runs, the list refreshes this often. */
const RUNNING_REFRESH_MS = 2_000;
const TYPES = ['track', 'identify', 'page', 'screen', 'group', 'alias'] as const;

interface Replay {
  readonly id: string;
  readonly sourceId: string;
  readonly from: string;
  readonly to: string;
  readonly status: 'running' | 'done' | 'cancelled';
  readonly queued: number;
  readonly delivered: number;
  readonly failed: number;
  readonly createdAt: string;
}

export function ReplaysPage({ route }: { route: Route }) {
  const { sources, error: sourcesError } = useSources();
  const sourceId = route.params.get('source') ?? sources?.[0]?.id ?? '';
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Replays</PageTitle>
      <p class="hint">
        A replay sends a source's stored messages of a time range again, through the current filters, paced so that live deliveries keep their latency:
        to its Webhooks destination (with <code>X-Switchyard-Replay</code>, in order per user) and to the function destinations you tick.
      </p>
      <ErrorMessage error={sourcesError} />
      {sources !== undefined && sources.length === 0 && <NoSourceYet />}
      {sources !== undefined && sources.length > 0 && (
        <>
          <SourcePicker sources={sources} value={sourceId} onChange={(id) => navigate('replays', { source: id })} />
          <SourceReplays key={sourceId} sourceId={sourceId} />
        </>
      )}
    </section>
  );
}

function SourceReplays({ sourceId }: { sourceId: string }) {
  const { value: replays, error, reload } = useLoad(async () => (await api<{ replays: Replay[] }>('GET', `/sources/${sourceId}/replays`)).replays, [sourceId]);
  const [receivers, setReceivers] = useState<string[] | undefined>(undefined);
  const [functions, setFunctions] = useState<FunctionDestination[] | undefined>(undefined);
  const [from, setFrom] = useState(() => localInputValue(-3_600_000));
  const [to, setTo] = useState(() => localInputValue(60_000));
  const [types, setTypes] = useState<string[]>([]);
  const [events, setEvents] = useState('');
  const [chosenReceivers, setChosenReceivers] = useState<string[]>([]);
  const [notice, setNotice] = useState('');
  const [actionError, setActionError] = useState<unknown>(undefined);

  useEffect(() => {
    api<WebhookDestination>('GET', `/sources/${sourceId}/destinations/webhooks`).then(
      (destination) => setReceivers(destination.settings.webhooks.map((r) => r.url)),
      (failed: unknown) => {
        if (failed instanceof ApiError && failed.code === 'not_found') setReceivers([]);
        else setActionError(failed);
      },
    );
    api<{ functions: FunctionDestination[] }>('GET', `/sources/${sourceId}/destinations/functions`).then(
      (listed) => setFunctions(listed.functions),
      (failed: unknown) => setActionError(failed),
    );
  }, [sourceId]);
  const running = replays?.some((r) => r.status === 'running') === true;
  useEffect(() => {
    if (!running) return undefined;
    const timer = setTimeout(reload, RUNNING_REFRESH_MS);
    return () => clearTimeout(timer);
  }, [replays, running, reload]);

  const toggle = (list: string[], value: string, on: boolean): string[] => (on ? [...list, value] : list.filter((v) => v !== value));
  const start = async (event: Event): Promise<void> => {
    event.preventDefault();
    // None ticked: the Webhooks destination's receivers (the API's default), or every function when there is no Webhooks destination.
    const targets = chosenReceivers.length > 0 || (receivers?.length ?? 0) > 0 ? chosenReceivers : (functions ?? []).map((fn) => fn.id);
    const names = events
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e !== '');
    // The field has no seconds, so its default ends a minute ahead; a replay
    // keeps running until its `to` has passed, so the console replays up to
    // now at the latest (the API takes a `to` ahead for a replay that waits).
    const chosenTo = isoFromLocalInput(to);
    const until = chosenTo !== undefined && Date.parse(chosenTo) > Date.now() ? new Date().toISOString() : (chosenTo ?? to);
    try {
      const created = await api<Replay>('POST', `/sources/${sourceId}/replays`, {
        from: isoFromLocalInput(from) ?? from,
        to: until,
        ...(types.length > 0 && { types }),
        ...(names.length > 0 && { events: names }),
        ...(targets.length > 0 && { receivers: targets }),
      });
      setActionError(undefined);
      // Its counts grow as it finds and sends the messages: the list below follows them.
      setNotice(`Started replay ${created.id}; its progress shows below.`);
      reload();
    } catch (failed) {
      setNotice('');
      setActionError(failed);
    }
  };
  const cancel = async (replay: Replay): Promise<void> => {
    try {
      await api('POST', `/replays/${replay.id}/cancel`);
      setActionError(undefined);
      setNotice(`Cancelled replay ${replay.id}: nothing more is sent.`);
      reload();
    } catch (failed) {
      setActionError(failed);
    }
  };

  if (receivers !== undefined && receivers.length === 0 && functions !== undefined && functions.length === 0) {
    return (
      <p>
        This source has nothing to replay to: set its receivers on the <a href={`#/webhooks?source=${sourceId}`}>Webhooks page</a> or add a function on
        the <a href={`#/functions?source=${sourceId}`}>Functions page</a> first.
      </p>
    );
  }
  // What a replay can be sent to: each receiver URL of the Webhooks destination and each function destination (by id).
  const choices = [
    ...(receivers ?? []).map((url) => ({ value: url, label: <code>{url}</code> })),
    ...(functions ?? []).map((fn) => ({
      value: fn.id,
      label: (
        <span>
          function {fn.name} (<code>{fn.id}</code>){fn.enabled ? '' : ', disabled'}
        </span>
      ),
    })),
  ];
  const noneTicked = (receivers?.length ?? 0) > 0 ? 'every receiver of the Webhooks destination' : 'every function destination';
  return (
    <>
      <form onSubmit={(event) => void start(event)} aria-label="Start a replay">
        <div class="row">
          <label class="inline">
            From ({timeZoneName()})
            <input type="datetime-local" required value={from} onInput={(event) => setFrom((event.target as HTMLInputElement).value)} />
          </label>
          <label class="inline">
            To, not included, at most now ({timeZoneName()})
            <input type="datetime-local" required value={to} onInput={(event) => setTo((event.target as HTMLInputElement).value)} />
          </label>
        </div>
        <fieldset>
          <legend>Types (none ticked: all)</legend>
          {TYPES.map((type) => (
            <label class="checkbox inline" key={type}>
              <input type="checkbox" checked={types.includes(type)} onChange={(event) => setTypes((all) => toggle(all, type, (event.target as HTMLInputElement).checked))} />
              {type}
            </label>
          ))}
        </fieldset>
        <label>
          Only these track events (comma-separated; empty: all)
          <input type="text" value={events} onInput={(event) => setEvents((event.target as HTMLInputElement).value)} />
        </label>
        {choices.length > 1 && (
          <fieldset>
            <legend>Send to (none ticked: {noneTicked})</legend>
            {choices.map((choice) => (
              <label class="checkbox" key={choice.value}>
                <input
                  type="checkbox"
                  checked={chosenReceivers.includes(choice.value)}
                  onChange={(event) => setChosenReceivers((all) => toggle(all, choice.value, (event.target as HTMLInputElement).checked))}
                />
                {choice.label}
              </label>
            ))}
          </fieldset>
        )}
        <button type="submit">Start replay</button>
      </form>
      <Status>{notice}</Status>
      <ErrorMessage error={actionError} />
      <ErrorMessage error={error} />
      <h2>Replays of this source</h2>
      {replays !== undefined && replays.length === 0 && <p>No replays yet. Start one with the form above: it sends this source's stored messages of a time range to its receivers or functions again.</p>}
      {replays !== undefined && replays.length > 0 && (
        <div class="scroll-x">
          <table>
            <caption class="visually-hidden">Replays, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Started</th>
                <th scope="col">Range</th>
                <th scope="col">Status</th>
                <th scope="col">Progress</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {replays.map((replay) => (
                <tr key={replay.id} data-replay-id={replay.id}>
                  <td>{formatTime(replay.createdAt)}</td>
                  <td>
                    {formatTime(replay.from)} to {formatTime(replay.to)}
                  </td>
                  <td>
                    <span class={`badge replay-${replay.status}`}>{replay.status}</span>
                  </td>
                  <td>
                    {replay.delivered} delivered, {replay.failed} failed of {replay.queued} queued
                  </td>
                  <td class="actions">
                    {replay.status === 'running' && (
                      <button type="button" class="danger" onClick={() => void cancel(replay)} aria-label={`Cancel replay ${replay.id}`}>
                        Cancel
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
