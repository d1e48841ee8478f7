/**
 * A circuit a delivery worker's breaker holds (see
 * `delivery/circuit-breaker.ts`), as the admin API and `/metrics` show it.
 * Each node has its own breakers: this is one node's view.
 */
export interface HeldCircuit {
  /** A receiver's origin (`https://host:port`: no user, path or query) or `function:<id>`. */
  readonly target: string;
  /**
   * `open`: deliveries to it are held until `until`, when the next one goes
   * as a probe; `half-open`: that probe is in flight and the others wait for
   * its answer.
   */
  readonly state: 'open' | 'half-open';
  /** Epoch ms; `open` only. */
  readonly until?: number;
}

/** The most circuits a node reports at once: plenty for a view, bounded for a message between threads. */
export const MAX_REPORTED_CIRCUITS = 1_000;

/** What a breaker key counts as in `/metrics`: a receiver's origin or a function destination. */
export function circuitKind(target: string): 'receiver' | 'function' {
  return target.startsWith('function:') ? 'function' : 'receiver';
}

/** The origin the delivery worker keys a receiver's circuit by; undefined for a URL that does not parse. */
export function receiverOrigin(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}
