/**
 * The closest known name to a mistyped one, when it is close enough to be
 * what was meant: an edit distance of at most 2, or a third of the typed
 * name's length. For "did you mean" hints (a flag, a command, a body field,
 * a tracking plan's required path); pure.
 */
export function closest(typed: string, known: Iterable<string>): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(typed, name);
    if (best === undefined || distance < best.distance) best = { name, distance };
  }
  return best !== undefined && best.distance <= Math.max(2, Math.floor(typed.length / 3)) ? best.name : undefined;
}

/** Levenshtein distance: insertions, deletions and substitutions of one UTF-16 unit. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}
