/**
 * How many TCP connections the HTTP listener holds at once. Each open
 * connection costs about 15 KB (socket, parser, buffers) that no other
 * bound counts: 3,000 idle connections from one client added 45 MB, and
 * without these caps only the process's open-file limit stopped them.
 */
export interface ConnectionCaps {
  /** Connections held at once, in all; one more is refused. */
  readonly total: number;
  /**
   * Connections held at once from one address (its peer address as
   * `shareKey` groups it: an IPv6 address by its /64); 0: no cap per
   * address.
   */
  readonly perAddress: number;
}

/** Why a connection was refused: the listener holds `total` connections, or its address holds `perAddress`. */
export type ConnectionRefusal = 'total' | 'per_address';

/**
 * Whether one more connection may be held: undefined when it may, else
 * why not. `open` is how many are held now, `openFromAddress` how many of
 * them come from the new one's address.
 */
export function refuseConnection(caps: ConnectionCaps, open: number, openFromAddress: number): ConnectionRefusal | undefined {
  if (open >= caps.total) return 'total';
  if (caps.perAddress > 0 && openFromAddress >= caps.perAddress) return 'per_address';
  return undefined;
}
