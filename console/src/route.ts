/**
 * The console's routes: pages live in the URL's fragment (`#/page?key=value`),
 * so the server serves one page and nothing of the state reaches a server log.
 * Its own module, so that pages can navigate without importing main.tsx
 * (which imports them).
 */
export interface Route {
  readonly page: string;
  /** `#/page?key=value`: e.g. the source a page shows. */
  readonly params: URLSearchParams;
}

/** The route in the address bar; `known` says which page names exist (others show the first). */
export function currentRoute(known: readonly string[]): Route {
  const [page = '', query = ''] = location.hash.replace(/^#\/?/, '').split('?');
  return { page: known.includes(page) ? page : (known[0] ?? ''), params: new URLSearchParams(query) };
}

export function navigate(page: string, params: Record<string, string> = {}): void {
  const query = new URLSearchParams(params).toString();
  location.hash = `#/${page}${query === '' ? '' : `?${query}`}`;
}
