import { useEffect, useState } from 'preact/hooks';
import { api, type Profile, type ProfileEvent } from '../api.js';
import type { Route } from '../route.js';
import { navigate } from '../route.js';
import { ErrorMessage, PageTitle, formatTime, useLoad, useSources } from '../ui.js';

/** As many recent events as the API gives (its maximum). */
const EVENTS = 50;

/** `user_id:u1` and `anonymous_id:a1` as they are; a bare id is taken as a user id. */
function identifierOf(text: string): string {
  const trimmed = text.trim();
  return /^(user_id|anonymous_id):/.test(trimmed) ? trimmed : `user_id:${trimmed}`;
}

/** A trait's value as JSON text, so `"3"` and `3` look different. */
function valueText(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

export function ProfilesPage({ route }: { route: Route }) {
  const identifier = route.params.get('id') ?? '';
  const [text, setText] = useState(identifier);
  // Back, forward and links from other pages change the profile shown: the field follows.
  useEffect(() => setText(identifier), [identifier]);
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Profiles</PageTitle>
      <form
        class="row"
        role="search"
        aria-label="Look up a profile"
        onSubmit={(event) => {
          event.preventDefault();
          if (text.trim() !== '') navigate('profiles', { id: identifierOf(text) });
        }}
      >
        <label class="inline">
          Identifier
          <input name="identifier" required maxLength={1100} value={text} aria-describedby="identifier-hint" onInput={(event) => setText((event.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">Look up</button>
      </form>
      <p class="hint" id="identifier-hint">
        <code>user_id:&lt;userId&gt;</code> or <code>anonymous_id:&lt;anonymousId&gt;</code>; a bare id is taken as a user id.
      </p>
      {identifier !== '' && <ProfileDetails key={identifier} identifier={identifier} />}
    </section>
  );
}

function ProfileDetails({ identifier }: { identifier: string }) {
  const path = `/profiles/${encodeURIComponent(identifier)}`;
  const { sources } = useSources();
  const { value: profile, error, reload } = useLoad(() => api<Profile>('GET', path), [path]);
  const { value: events, error: eventsError, reload: reloadEvents } = useLoad(
    async () => (await api<{ events: ProfileEvent[] }>('GET', `${path}/events?limit=${EVENTS}`)).events,
    [path],
  );
  const sourceName = (id: string): string => sources?.find((s) => s.id === id)?.name ?? id;
  if (error !== undefined) return <ErrorMessage error={error} />;
  if (profile === undefined) return <p>Loading…</p>;
  const traits = Object.entries(profile.traits);
  const computed = Object.entries(profile.computedTraits);
  return (
    <section aria-labelledby="profile-title">
      <h2 id="profile-title">
        Profile <code>{profile.id}</code>
      </h2>
      <button
        type="button"
        class="secondary"
        onClick={() => {
          reload();
          reloadEvents();
        }}
      >
        Refresh profile
      </button>
      <div class="profile">
        <section aria-labelledby="identifiers-title">
          <h3 id="identifiers-title">Identifiers</h3>
          <ul class="plain">
            {profile.identifiers.map((id) => (
              <li key={id}>
                <code>{id}</code>
              </li>
            ))}
          </ul>
        </section>
        <section aria-labelledby="audiences-title">
          <h3 id="audiences-title">Audiences</h3>
          {profile.audiences.length === 0 ? (
            <p>In no audience.</p>
          ) : (
            <ul class="plain">
              {profile.audiences.map((key) => (
                <li key={key}>
                  <code>{key}</code>
                </li>
              ))}
            </ul>
          )}
        </section>
      </div>
      <KeyValues id="traits" title="Traits" empty="No traits from identify messages." entries={traits} />
      <KeyValues id="computed-traits" title="Computed traits" empty="No computed trait has a value for this profile." entries={computed} />
      <section aria-labelledby="events-title">
        <h3 id="events-title">Recent events</h3>
        <ErrorMessage error={eventsError} />
        {events !== undefined && events.length === 0 && <p>No stored events (messages older than the retention period are gone).</p>}
        {events !== undefined && events.length > 0 && (
          <table>
            <caption class="visually-hidden">Recent events, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Received</th>
                <th scope="col">Type</th>
                <th scope="col">Event</th>
                <th scope="col">Source</th>
                <th scope="col">Message</th>
              </tr>
            </thead>
            <tbody>
              {events.map((event) => (
                <tr key={event.seq} class="event">
                  <td>{formatTime(event.receivedAt)}</td>
                  <td>{event.type ?? ''}</td>
                  <td>{summary(event.message)}</td>
                  <td>{sourceName(event.sourceId)}</td>
                  <td>
                    <details>
                      <summary>JSON of message {event.seq}</summary>
                      <pre>{JSON.stringify(event.message, null, 2)}</pre>
                    </details>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </section>
  );
}

function KeyValues({ id, title, empty, entries }: { id: string; title: string; empty: string; entries: Array<[string, unknown]> }) {
  return (
    <section aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>{title}</h3>
      {entries.length === 0 ? (
        <p>{empty}</p>
      ) : (
        <table tabIndex={0} class="key-values" data-section={id}>
          <caption class="visually-hidden">{title}</caption>
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Value</th>
            </tr>
          </thead>
          <tbody>
            {entries.map(([key, value]) => (
              <tr key={key}>
                <th scope="row">
                  <code>{key}</code>
                </th>
                <td>
                  <code>{valueText(value)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** What a message is about, in a few words: a track's event, a page's name, an alias's previous id. */
function summary(message: unknown): string {
  if (typeof message !== 'object' || message === null) return '';
  const m = message as Record<string, unknown>;
  for (const field of ['event', 'name', 'previousId', 'groupId'] as const) {
    if (typeof m[field] === 'string') return m[field];
  }
  return '';
}
