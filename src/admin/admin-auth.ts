import type { Store } from '../store/store.js';
import { constantTimeEqual, sha256Hex } from '../util/crypto.js';
import { newAdminToken } from '../util/ids.js';

const TOKEN_HASH_SETTING = 'admin_token_sha256';
/** Set once the generated token has been printed: until then nobody knows it, so a start may replace it. */
const TOKEN_SHOWN_SETTING = 'admin_token_shown_at';
/**
 * How old the stored digest a check uses may be: a rotation (by the CLI, by
 * another node, in another process) takes effect on every node within this
 * long, for the old token and the new one alike. One small read a second.
 */
const REREAD_AFTER_MS = 1_000;

/**
 * Checks admin bearer tokens against a SHA-256 digest; the token itself is
 * never stored. A generated token lives in the store as its digest; the
 * `serve` that generated it prints it once it listens and then marks it
 * shown, so a first start that fails (a busy port) does not lose it: the
 * next start makes a new one and prints that.
 */
export class AdminAuth {
  /** The stored digest's last read: when it started (ms, this clock) and what it gives. */
  private read: { readonly startedAt: number; readonly digest: Promise<string> } | undefined;

  private constructor(
    private tokenHash: string,
    /** Where a rotated digest is read from; undefined with a configured token. */
    private readonly store: Store | undefined,
  ) {}

  /**
   * Whether `token` is the admin token, against the stored digest as read
   * less than {@link REREAD_AFTER_MS} before this check (a check that comes
   * later reads it again, and concurrent checks share that read). A digest
   * cached on a match would keep a rotated-away token working for as long as
   * it is used.
   */
  async verify(token: string): Promise<boolean> {
    const digest = sha256Hex(token);
    return constantTimeEqual(digest, await this.currentHash());
  }

  private async currentHash(): Promise<string> {
    if (this.store === undefined) return this.tokenHash;
    const now = performance.now();
    if (this.read === undefined || now - this.read.startedAt >= REREAD_AFTER_MS) {
      const store = this.store;
      const digest = store.getSetting(TOKEN_HASH_SETTING).then((stored) => (this.tokenHash = stored ?? this.tokenHash));
      // A failed read is not kept: the next check tries again.
      digest.catch(() => {
        if (this.read?.digest === digest) this.read = undefined;
      });
      this.read = { startedAt: now, digest };
    }
    return this.read.digest;
  }

  /**
   * Uses the configured token when there is one; otherwise the stored digest,
   * generating a token when there is none or when the one there was never
   * shown. `createdToken` is set for the process that generated it, which
   * prints it and then calls {@link AdminAuth.markShown}.
   */
  static async load(store: Store, configured: string | undefined): Promise<{ auth: AdminAuth; createdToken?: string }> {
    if (configured !== undefined) return { auth: new AdminAuth(sha256Hex(configured), undefined) };
    const stored = await store.getSetting(TOKEN_HASH_SETTING);
    if (stored !== undefined && (await store.getSetting(TOKEN_SHOWN_SETTING)) !== undefined) return { auth: new AdminAuth(stored, store) };
    const candidate = newAdminToken();
    await store.putSetting(TOKEN_HASH_SETTING, sha256Hex(candidate));
    return { auth: new AdminAuth(sha256Hex(candidate), store), createdToken: candidate };
  }

  /** The generated token has been printed: later starts keep it. */
  static async markShown(store: Store, at: number): Promise<void> {
    await store.putSetting(TOKEN_SHOWN_SETTING, new Date(at).toISOString());
  }

  /** A new generated token (the old one stops working within a second on running servers); resolves it. */
  static async rotate(store: Store, at: number): Promise<string> {
    const token = newAdminToken();
    await store.putSetting(TOKEN_HASH_SETTING, sha256Hex(token));
    await AdminAuth.markShown(store, at);
    return token;
  }
}
