/** Splits `argv` into positional words and `--flag value` / `--flag=value` / `--flag` pairs. */
export function parseArgs(argv: readonly string[], booleanFlags: ReadonlySet<string>): { words: string[]; flags: Record<string, string | true> } {
  const words: string[] = [];
  const flags: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      words.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      words.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    if (eq !== -1) {
      flags[arg.slice(2, eq)] = arg.slice(eq + 1);
    } else if (booleanFlags.has(arg.slice(2)) || i + 1 >= argv.length || argv[i + 1]!.startsWith('--')) {
      flags[arg.slice(2)] = true;
    } else {
      flags[arg.slice(2)] = argv[++i]!;
    }
  }
  return { words, flags };
}
