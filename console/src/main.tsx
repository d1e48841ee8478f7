import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, callWith, storeToken, storedToken, whenUnauthorized } from './api.js';
import { AudiencesPage, ComputedTraitsPage } from './pages/computations.js';
import { DebuggerPage } from './pages/debugger.js';
import { DeliveriesPage } from './pages/deliveries.js';
import { FunctionsPage } from './pages/functions.js';
import { OverviewPage } from './pages/overview.js';
import { ProfilesPage } from './pages/profiles.js';
import { RegulationsPage } from './pages/regulations.js';
import { ReplaysPage } from './pages/replays.js';
import { SourcesPage } from './pages/sources.js';
import { TrackingPlanPage } from './pages/tracking-plan.js';
import { TransformationsPage } from './pages/transformations.js';
import { WebhooksPage } from './pages/webhooks.js';
import { currentRoute } from './route.js';
import { errorText } from './ui.js';

/** The pages, in navigation order (routes: route.ts). */
const PAGES = [
  { path: 'overview', title: 'Overview', view: OverviewPage },
  { path: 'sources', title: 'Sources', view: SourcesPage },
  { path: 'webhooks', title: 'Webhooks', view: WebhooksPage },
  { path: 'functions', title: 'Functions', view: FunctionsPage },
  { path: 'debugger', title: 'Live debugger', view: DebuggerPage },
  { path: 'deliveries', title: 'Deliveries', view: DeliveriesPage },
  { path: 'replays', title: 'Replays', view: ReplaysPage },
  { path: 'transformations', title: 'Transformations', view: TransformationsPage },
  { path: 'tracking-plan', title: 'Tracking plans', view: TrackingPlanPage },
  { path: 'regulations', title: 'Regulations', view: RegulationsPage },
  { path: 'computed-traits', title: 'Computed traits', view: ComputedTraitsPage },
  { path: 'audiences', title: 'Audiences', view: AudiencesPage },
  { path: 'profiles', title: 'Profiles', view: ProfilesPage },
] as const;

const PAGE_PATHS = PAGES.map((p) => p.path);

function SignIn({ onSignedIn, notice }: { onSignedIn: () => void; notice: string | undefined }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      // Any authenticated read proves the token.
      await callWith(token.trim(), 'GET', '/sources');
      storeToken(token.trim());
      onSignedIn();
    } catch (failed) {
      setError(failed instanceof ApiError && failed.status === 401 ? 'That admin token is wrong. Check it and try again.' : errorText(failed));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>Switchyard console</h1>
      <form onSubmit={(event) => void submit(event)} aria-describedby={error === undefined ? undefined : 'signin-error'}>
        {notice !== undefined && <p class="status">{notice}</p>}
        <label>
          Admin token
          <input
            type="password"
            name="token"
            autoComplete="current-password"
            required
            value={token}
            onInput={(event) => setToken((event.target as HTMLInputElement).value)}
            aria-invalid={error !== undefined}
          />
        </label>
        <p class="hint">The token `serve` printed on its first start, or SWITCHYARD_ADMIN_TOKEN. It stays in this tab only.</p>
        {error !== undefined && (
          <p class="error" id="signin-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(storedToken() !== undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [route, setRoute] = useState(() => currentRoute(PAGE_PATHS));
  useEffect(() => {
    const onHash = (): void => setRoute(currentRoute(PAGE_PATHS));
    addEventListener('hashchange', onHash);
    whenUnauthorized(() => {
      storeToken(undefined);
      setNotice('The admin token was not accepted any more; sign in again.');
      setSignedIn(false);
    });
    return () => removeEventListener('hashchange', onHash);
  }, []);
  const page = PAGES.find((p) => p.path === route.page) ?? PAGES[0];
  useEffect(() => {
    document.title = `${page.title} · Switchyard console`;
  }, [page]);
  if (!signedIn) return <SignIn notice={notice} onSignedIn={() => setSignedIn(true)} />;
  const View = page.view;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <span class="brand">Switchyard</span>
        <nav aria-label="Console pages">
          <ul>
            {PAGES.map((p) => (
              <li key={p.path}>
                <a href={`#/${p.path}`} aria-current={p.path === page.path ? 'page' : undefined}>
                  {p.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            storeToken(undefined);
            setNotice('Signed out.');
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <View route={route} />
      </main>
    </>
  );
}

const root = document.getElementById('app');
if (root !== null) {
  root.textContent = '';
  render(<App />, root);
}
