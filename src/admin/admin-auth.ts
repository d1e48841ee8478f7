import type { Store } from '../store/store.js';
import { constantTimeEqual, sha256Hex } from '../util/crypto.js';
import { newAdminToken } from '../util/ids.js';

const TOKEN_HASH_SETTING = 'admin_token_sha256';

/** Checks admin bearer tokens against a SHA-256 digest; the token itself is never stored. */
export class AdminAuth {
  private constructor(private readonly tokenHash: string) {}

  verify(token: string): boolean {
    return constantTimeEqual(sha256Hex(token), this.tokenHash);
  }

  /**
   * Uses the configured token when there is one; otherwise the stored digest,
   * creating a token on first start. `createdToken` is set only for the one
   * process that created it, which prints it once.
   */
  static async load(store: Store, configured: string | undefined): Promise<{ auth: AdminAuth; createdToken?: string }> {
    if (configured !== undefined) return { auth: new AdminAuth(sha256Hex(configured)) };
    const candidate = newAdminToken();
    if (await store.insertSettingIfAbsent(TOKEN_HASH_SETTING, sha256Hex(candidate))) {
      return { auth: new AdminAuth(sha256Hex(candidate)), createdToken: candidate };
    }
    const stored = await store.getSetting(TOKEN_HASH_SETTING);
    if (stored === undefined) throw new Error('the admin token digest vanished from the settings table');
    return { auth: new AdminAuth(stored) };
  }
}
