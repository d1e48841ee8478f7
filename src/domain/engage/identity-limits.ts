/**
 * How many identifiers of each type one profile may hold (issue 29: a
 * profile linked to 30,000 anonymous ids made every message of its user and
 * every read of it cost seconds). As identity-resolution products do, the
 * limit is per identifier type. The rule for what is dropped: identifiers a
 * profile already holds stay; a new one beyond its type's limit is not
 * linked (the message still counts for the profile it resolved to, and a
 * later message naming only that identifier starts a profile of its own);
 * when two profiles merge, the survivor keeps its own, then takes the other's
 * in their order while there is room, and the rest are dropped.
 */
export const IDENTIFIER_LIMITS: Readonly<Record<IdentifierType, number>> = Object.freeze({
  user_id: 100,
  anonymous_id: 1_000,
});

export type IdentifierType = 'user_id' | 'anonymous_id';

/** The most identifiers a profile may hold, all types together. */
export const MAX_PROFILE_IDENTIFIERS = IDENTIFIER_LIMITS.user_id + IDENTIFIER_LIMITS.anonymous_id;

export function identifierType(identifier: string): IdentifierType {
  return identifier.startsWith('user_id:') ? 'user_id' : 'anonymous_id';
}

/** Counts of a profile's identifiers by type, kept as identifiers are linked (so a link is O(1), not a scan). */
export class IdentifierCounts {
  private readonly counts: Record<IdentifierType, number> = { user_id: 0, anonymous_id: 0 };

  constructor(identifiers: Iterable<string>) {
    for (const identifier of identifiers) this.counts[identifierType(identifier)]++;
  }

  of(type: IdentifierType): number {
    return this.counts[type];
  }

  /** Whether one more identifier of this one's type fits; counts it when it does. */
  take(identifier: string): boolean {
    const type = identifierType(identifier);
    if (this.counts[type] >= IDENTIFIER_LIMITS[type]) return false;
    this.counts[type]++;
    return true;
  }
}
