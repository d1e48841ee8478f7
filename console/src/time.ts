/**
 * The console's one way of showing a time: the browser's local time, to the
 * second, written the same way whatever the browser's language
 * (`2026-11-24 09:05:07`), with its time zone (`UTC`, `EST`, `GMT+1`), so
 * that two people reading the same page across zones cannot mistake it.
 */
const PARTS = new Intl.DateTimeFormat('en-US', {
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hourCycle: 'h23',
  timeZoneName: 'short',
});

function partsOf(date: Date): Record<string, string> {
  return Object.fromEntries(PARTS.formatToParts(date).map((part) => [part.type, part.value]));
}

/** `2026-11-24 09:05:07 UTC`; an unreadable time as it came; undefined as nothing. */
export function formatTime(iso: string | undefined): string {
  if (iso === undefined) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const p = partsOf(date);
  return `${p['year']}-${p['month']}-${p['day']} ${p['hour']}:${p['minute']}:${p['second']} ${p['timeZoneName']}`;
}

/** `09:05`: a minute of the last hour (a chart's axis), in the zone {@link timeZoneName} names. */
export function formatClock(iso: string): string {
  const p = partsOf(new Date(iso));
  return `${p['hour']}:${p['minute']}`;
}

/** The browser's time zone as {@link formatTime} writes it: what a clock time or a time field is in. */
export function timeZoneName(): string {
  return partsOf(new Date())['timeZoneName'] ?? '';
}

/** A `datetime-local` field's value for the local time `offsetMs` from now. */
export function localInputValue(offsetMs: number): string {
  const date = new Date(Date.now() + offsetMs);
  date.setMinutes(date.getMinutes() - date.getTimezoneOffset());
  return date.toISOString().slice(0, 16);
}

/** A `datetime-local` field's value (local time) as an ISO time, or undefined when it is not one. */
export function isoFromLocalInput(local: string): string | undefined {
  const ms = new Date(local).getTime();
  return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}
