/**
 * Whether a JSON Schema `pattern` could backtrack catastrophically, checked
 * when a tracking plan is saved (ajv runs patterns with the JavaScript regex
 * engine, which cannot be interrupted, on the processing thread). The rule is
 * safe-regex's: a repeated group that itself contains a repetition (star
 * height above 1, as in `(a+)+`, `(\w*)*`, `(x+y?){2,}`) is refused. It is a
 * conservative test: a few harmless patterns are refused too, and the error
 * says which to rewrite. Returns why the pattern is refused, or undefined.
 */
export function unsafePattern(pattern: string): string | undefined {
  try {
    new RegExp(pattern, 'u');
  } catch (error) {
    return `is not a valid regular expression: ${(error as Error).message}`;
  }
  // One entry per open group: whether a repetition occurs inside it.
  const groups: boolean[] = [];
  // Whether the atom just read was a group containing a repetition.
  let lastGroupRepeats = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      i++;
      lastGroupRepeats = false;
      continue;
    }
    if (c === '[') {
      // A class is one atom: skip to its unescaped closing bracket.
      for (i++; i < pattern.length && pattern[i] !== ']'; i++) if (pattern[i] === '\\') i++;
      lastGroupRepeats = false;
      continue;
    }
    if (c === '(') {
      groups.push(false);
      lastGroupRepeats = false;
      continue;
    }
    if (c === ')') {
      const repeats = groups.pop() ?? false;
      lastGroupRepeats = repeats;
      // A group that repeats inside makes its enclosing group contain a repetition too.
      if (repeats && groups.length > 0) groups[groups.length - 1] = true;
      continue;
    }
    const repetition = c === '*' || c === '+' || (c === '{' && isUnboundedOrMany(pattern, i));
    if (repetition) {
      if (lastGroupRepeats) return `repeats a group that itself repeats (nested quantifiers backtrack catastrophically): ${pattern.slice(0, 80)}`;
      if (groups.length > 0) groups[groups.length - 1] = true;
    }
    lastGroupRepeats = false;
  }
  return undefined;
}

/** `{n,}` or `{n,m}` with m above 1 at `i` (a `{` that is not a quantifier is a literal). */
function isUnboundedOrMany(pattern: string, i: number): boolean {
  const match = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(i, i + 24));
  if (match === null) return false;
  if (match[2] === undefined) return Number(match[1]) > 1;
  return match[3] === '' || Number(match[3]) > 1;
}
