/** The contract between the slow-and-endless-clients scenario and lib/bad-clients.ts, its child process. */

export interface BadClientsArgs {
  readonly port: number;
  readonly authorization: string;
  readonly slowReaders: number;
  readonly fastEndless: number;
  /** Also one endless body that trickles a small chunk a second. */
  readonly trickle: boolean;
}

export interface ClientReport {
  readonly sentMb: number;
  readonly requests: number;
  readonly readMb: number;
  readonly answer: string;
  /** Seconds after the start when the server closed the connection; undefined while open. */
  readonly closedByServerAfterSec: number | undefined;
}

export interface BadClientsReport {
  readonly slowReaders: readonly ClientReport[];
  readonly fastEndless: readonly ClientReport[];
  readonly trickle: ClientReport | undefined;
}

/** Unanswered requests a slow reader keeps pipelined, and how fast it reads the answers. */
export const PIPELINE_DEPTH = 50;
export const READ_BYTES_PER_SEC = 2048;
