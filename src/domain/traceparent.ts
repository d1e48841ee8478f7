/**
 * The W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/):
 * `version-traceid-parentid-flags`, lowercase hex. Pure: no I/O.
 */

/** A version-00 traceparent is exactly this long; later versions may append fields after a dash. */
const VERSION_00_LENGTH = 55;
/**
 * The longest header we read. The spec lets future versions append fields,
 * so a longer value is not wrong, but nothing we use is past the first 55
 * characters and a stored header must be bounded.
 */
export const MAX_TRACEPARENT_LENGTH = 256;

const VERSION_00 = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
/** A future version: its first four fields as version 00 has them, then `-…` or nothing. */
const FUTURE_VERSION = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[^\s]*)?$/;
const ALL_ZERO_TRACE = '00000000000000000000000000000000';
const ALL_ZERO_SPAN = '0000000000000000';

export interface TraceParent {
  readonly traceId: string;
  /** The caller's span: the parent of ours. */
  readonly spanId: string;
  /** The trace flags byte; bit 0 is "sampled". */
  readonly flags: number;
}

/**
 * The traceparent a header holds, or undefined when it is missing or not
 * valid as the spec defines it (then, as the spec says, a receiver starts a
 * new trace). Version ff and all-zero ids are invalid; a version above 00
 * is read as 00 when its first fields have 00's shape.
 */
export function parseTraceparent(header: string | undefined): TraceParent | undefined {
  if (header === undefined || header.length < VERSION_00_LENGTH || header.length > MAX_TRACEPARENT_LENGTH) return undefined;
  let traceId: string;
  let spanId: string;
  let flags: string;
  const v00 = header.length === VERSION_00_LENGTH ? VERSION_00.exec(header) : null;
  if (v00 !== null) {
    [, traceId, spanId, flags] = v00 as unknown as [string, string, string, string];
  } else {
    const future = FUTURE_VERSION.exec(header);
    if (future === null || future[1] === '00' || future[1] === 'ff') return undefined;
    [, , traceId, spanId, flags] = future as unknown as [string, string, string, string, string];
  }
  if (traceId === ALL_ZERO_TRACE || spanId === ALL_ZERO_SPAN) return undefined;
  return { traceId, spanId, flags: Number.parseInt(flags, 16) };
}

/** The version-00 header of a span context. */
export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${(flags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A header normalized to version 00 (what is stored and sent on), or undefined when invalid. */
export function normalizeTraceparent(header: string | undefined): string | undefined {
  const parsed = parseTraceparent(header);
  return parsed === undefined ? undefined : formatTraceparent(parsed.traceId, parsed.spanId, parsed.flags);
}
