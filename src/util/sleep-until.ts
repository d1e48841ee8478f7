/**
 * Waits until `at` by the `now` clock; resolves false at once, or as soon
 * as `stop` aborts, so that a stopping worker never waits out a rate
 * limit's delay.
 */
export function sleepUntil(at: number, clock: { readonly now: () => number; readonly stop: AbortSignal }): Promise<boolean> {
  const { now, stop } = clock;
  if (stop.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onStop = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      stop.removeEventListener('abort', onStop);
      resolve(true);
    }, at - now());
    stop.addEventListener('abort', onStop, { once: true });
  });
}
