import { useState } from 'preact/hooks';
import { api, settingsToPutBack, type WebhookDestination } from '../api.js';
import { ErrorMessage, Status, formatTime } from '../ui.js';

/** The API's default overlap of a rotation: a day. */
const DEFAULT_OVERLAP_SECONDS = 86_400;

/**
 * Standard Webhooks (standardwebhooks.com) signing of a destination: turn it
 * on (the API makes the secret) or off, reveal the secret for the receiver's
 * configuration, rotate it with an overlap during which both secrets sign.
 * Each action is saved at once.
 */
export function StandardWebhooks({ sourceId, destination, onSaved }: {
  sourceId: string;
  destination: WebhookDestination;
  onSaved: (saved: WebhookDestination) => void;
}) {
  const [secret, setSecret] = useState<string | undefined>(undefined);
  const [overlap, setOverlap] = useState(String(DEFAULT_OVERLAP_SECONDS));
  const [notice, setNotice] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const route = `/sources/${sourceId}/destinations/webhooks`;
  const standard = destination.settings.standardWebhooks;

  const act = async (work: () => Promise<string>): Promise<void> => {
    try {
      const done = await work();
      setError(undefined);
      setNotice(done);
    } catch (failed) {
      setNotice('');
      setError(failed);
    }
  };
  const putStandard = (on: boolean): Promise<void> =>
    act(async () => {
      const { standardWebhooks: _kept, ...settings } = settingsToPutBack(destination.settings);
      const saved = await api<WebhookDestination>('PUT', route, {
        enabled: destination.enabled,
        settings: { ...settings, ...(on && { standardWebhooks: {} }) },
        ...(destination.filters.length > 0 && { filters: destination.filters }),
      });
      setSecret(undefined);
      onSaved(saved);
      return on ? 'Standard Webhooks signing is on, with a new secret: reveal it for the receiver.' : 'Standard Webhooks signing is off.';
    });
  const reveal = (): Promise<void> =>
    act(async () => {
      setSecret((await api<{ secret: string }>('GET', `${route}/standard-webhooks/secret`)).secret);
      return 'The secret is shown below; keep it out of logs and screenshots.';
    });
  const rotate = (event: Event): Promise<void> => {
    event.preventDefault();
    return act(async () => {
      const rotated = await api<{ secret: string; previousValidUntil: string }>('POST', `${route}/standard-webhooks/rotate`, { overlapSeconds: Number(overlap) });
      setSecret(rotated.secret);
      onSaved(await api<WebhookDestination>('GET', route));
      return `Rotated. The previous secret also signs until ${formatTime(rotated.previousValidUntil)}; give the receiver the new one before then.`;
    });
  };

  return (
    <section class="panel" aria-labelledby="standard-title">
      <h2 id="standard-title">Standard Webhooks</h2>
      <p class="hint">
        Also signs every POST the Standard Webhooks way (<code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>), which their
        libraries verify. <code>X-Signature</code> is still sent when the shared secret is set. Changes here are saved at once.
      </p>
      {standard === undefined ? (
        <button type="button" onClick={() => void putStandard(true)}>
          Turn on Standard Webhooks
        </button>
      ) : (
        <>
          <p>
            On.
            {standard.previousValidUntil !== undefined && ` Rotating: the previous secret also signs until ${formatTime(standard.previousValidUntil)}.`}
          </p>
          {secret !== undefined && (
            <p>
              Secret: <code class="secret">{secret}</code>{' '}
              <button type="button" class="secondary" onClick={() => setSecret(undefined)}>
                Hide the secret
              </button>
            </p>
          )}
          <div class="row">
            {secret === undefined && (
              <button type="button" class="secondary" onClick={() => void reveal()}>
                Reveal the secret
              </button>
            )}
            <button type="button" class="danger" onClick={() => void putStandard(false)}>
              Turn off Standard Webhooks
            </button>
          </div>
          <form class="row" onSubmit={(event) => void rotate(event)} aria-label="Rotate the Standard Webhooks secret">
            <label class="inline">
              Previous secret keeps signing for (seconds)
              <input type="text" inputMode="numeric" size={8} value={overlap} onInput={(event) => setOverlap((event.target as HTMLInputElement).value)} />
            </label>
            <button type="submit">Rotate the secret</button>
          </form>
        </>
      )}
      <Status>{notice}</Status>
      <ErrorMessage error={error} />
    </section>
  );
}
