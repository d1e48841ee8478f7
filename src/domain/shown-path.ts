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
