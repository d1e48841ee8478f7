/**
 * Whether a JSON Schema `pattern` could backtrack catastrophically, checked
 * when a tracking plan is saved. ajv runs patterns with the JavaScript regex
 * engine, which cannot be interrupted, on the processing thread every source
 * shares (and a preview on the server's main thread). Two defences:
 *
 * 1. safe-regex's rule, for every pattern: a repeated group that itself
 *    contains a repetition (star height above 1, as in `(a+)+`, `(\w*)*`,
 *    `(x+y?){2,}`) is refused. Lookarounds and backreferences are refused
 *    too: nothing in a tracking plan needs them, and V8's linear-time engine
 *    cannot run them.
 * 2. A pattern that V8's linear-time engine can run ({@link runsLinear})
 *    falls back to it once it backtracks too much (`util/regexp-fallback.ts`),
 *    which catches what no static rule does (`^(\w|\d)+$`: overlapping
 *    alternatives under a quantifier). One it cannot run (it needs the `u`
 *    flag, or counts above 16) must also be plainly linear: no quantified
 *    group, and at most one quantifier that repeats without a small bound.
 *
 * Conservative: a few harmless patterns are refused too, and the error says
 * what to rewrite. Returns why the pattern is refused, or undefined.
 */
export function unsafePattern(pattern: string): string | undefined {
  try {
    new RegExp(pattern, 'u');
  } catch (error) {
    return `is not a valid regular expression: ${(error as Error).message}`;
  }
  const shown = pattern.slice(0, 80);
  if (LOOKAROUND_OR_BACKREFERENCE.test(pattern)) return `uses a lookaround or a backreference, which patterns do not support: ${shown}`;
  const linear = runsLinear(pattern);
  // One entry per open group: whether a repetition occurs inside it.
  const groups: boolean[] = [];
  // Whether the atom just read was a group, and whether it contains a repetition.
  let lastWasGroup = false;
  let lastGroupRepeats = false;
  let manyRepeats = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      i++;
      lastWasGroup = lastGroupRepeats = false;
      continue;
    }
    if (c === '[') {
      // A class is one atom: skip to its unescaped closing bracket.
      for (i++; i < pattern.length && pattern[i] !== ']'; i++) if (pattern[i] === '\\') i++;
      lastWasGroup = lastGroupRepeats = false;
      continue;
    }
    if (c === '(') {
      groups.push(false);
      lastWasGroup = lastGroupRepeats = false;
      continue;
    }
    if (c === ')') {
      const repeats = groups.pop() ?? false;
      lastWasGroup = true;
      lastGroupRepeats = repeats;
      // A group that repeats inside makes its enclosing group contain a repetition too.
      if (repeats && groups.length > 0) groups[groups.length - 1] = true;
      continue;
    }
    const repetition = c === '*' || c === '+' || (c === '{' && isUnboundedOrMany(pattern, i));
    if (repetition) {
      if (lastGroupRepeats) return `repeats a group that itself repeats (nested quantifiers backtrack catastrophically): ${shown}`;
      if (!linear && lastWasGroup) return `repeats a group, which a pattern with the u flag (\\p{…}, \\u{…}, characters outside the BMP) or a count above 16 may not: ${shown}`;
      if (!linear && (c !== '{' || isUnboundedOrLarge(pattern, i)) && ++manyRepeats > 1) {
        return `repeats more than one part without a bound of at most 16, which a pattern with the u flag (\\p{…}, \\u{…}, characters outside the BMP) or a count above 16 may not: ${shown}`;
      }
      if (groups.length > 0) groups[groups.length - 1] = true;
    }
    lastWasGroup = lastGroupRepeats = false;
  }
  return undefined;
}

/**
 * Whether V8's linear-time engine can run the pattern as plans compile it
 * (see {@link keepsUnicode}), and so take over when it backtracks too much:
 * no `u` flag, no lookarounds or backreferences (refused anyway), and no
 * count above 16.
 */
export function runsLinear(pattern: string): boolean {
  return !keepsUnicode(pattern) && !hasLargeCount(pattern);
}

/**
 * Whether a plan's pattern keeps the `u` flag: it means something else, or
 * nothing, without it (a `\p{…}` or `\u{…}` escape, a surrogate written as
 * a character or as `\uD83D`). Every other pattern runs without `u`, so
 * that V8 can fall back to its linear-time engine, which takes none.
 */
export function keepsUnicode(pattern: string): boolean {
  if (NEEDS_UNICODE.test(pattern)) return true;
  try {
    new RegExp(pattern, '');
    return false;
  } catch {
    return true; // valid only with u (the caller checked it is valid with u)
  }
}

const NEEDS_UNICODE = /\\[pP]\{|\\u\{|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\uD800-\uDFFF]/;

/** `(?=`, `(?!`, `(?<=`, `(?<!`, `\1`…`\9`, `\k<name>`. */
const LOOKAROUND_OR_BACKREFERENCE = /\(\?<?[=!]|\\[1-9]|\\k</;

/** The most a quantifier of the linear-time engine may count: it refuses `{17}`, `{1,100}`, `{17,}`. */
const LINEAR_MAX_COUNT = 16;

/** Whether any `{n}`, `{n,m}` or `{n,}` in the pattern counts above {@link LINEAR_MAX_COUNT}. */
function hasLargeCount(pattern: string): boolean {
  for (const match of pattern.matchAll(/\{\d+(?:,\d*)?\}/g)) {
    const { min, max } = countAt(pattern, match.index)!;
    if (min > LINEAR_MAX_COUNT || (max !== Infinity && max > LINEAR_MAX_COUNT)) return true;
  }
  return false;
}

/** The bounds of a `{n}`, `{n,m}` or `{n,}` quantifier at `i`, or undefined (a `{` that is not one is a literal). */
function countAt(pattern: string, i: number): { readonly min: number; readonly max: number } | undefined {
  const match = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i, i + 24));
  if (match === null) return undefined;
  const min = Number(match[1]);
  return { min, max: match[2] === undefined ? min : match[3] === '' ? Infinity : Number(match[3]) };
}

/** `{n,}` or `{n,m}` with m above 1 at `i`: a repetition. */
function isUnboundedOrMany(pattern: string, i: number): boolean {
  return (countAt(pattern, i)?.max ?? 0) > 1;
}

/** `{n,}`, or a count above {@link LINEAR_MAX_COUNT}, at `i`: a repetition without a small bound. */
function isUnboundedOrLarge(pattern: string, i: number): boolean {
  return (countAt(pattern, i)?.max ?? 0) > LINEAR_MAX_COUNT;
}
