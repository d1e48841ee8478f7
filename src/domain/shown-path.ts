/** How much of a request's path an error message repeats: enough to recognize it, never the whole of a long one. */
const SHOWN_PATH_CHARS = 200;

/**
 * The path of `url` as an error message names it: without the query, and
 * cut to its first 200 characters. A path can be as long as the request
 * line allows (16 KB), and an answer should not echo it whole.
 */
export function shownPath(url: string): string {
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  return path.length <= SHOWN_PATH_CHARS ? path : `${path.slice(0, SHOWN_PATH_CHARS)}…`;
}

/** `scheme://authority` at the start of an absolute-form request target. */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The origin-form of a request target: `/admin/v1/x` for
 * `http://host/admin/v1/x`. HTTP/1.1 lets a client send the absolute form
 * (RFC 9112 §3.2.2), and the router routes it as its path.
 */
export function originForm(url: string): string {
  const absolute = ABSOLUTE_FORM.exec(url);
  if (absolute === null) return url;
  const rest = url.slice(absolute[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}
