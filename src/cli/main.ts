import { AdminAuth } from '../admin/admin-auth.js';
import { closest, ConfigError, loadConfig, serveHelp } from '../config.js';
import { ApiError } from '../errors.js';
import { DataDirInUseError, startSwitchyard, type Welcome } from '../serve.js';
import { withAdmin, withStore } from './admin-connection.js';
import { ServerError } from './http-admin-client.js';
import { SchemaTooNewError } from '../store/schema-error.js';
import { VERSION } from '../version.js';
import type { CliKit } from './admin-client.js';
import { parseArgs } from './args.js';
import { DEBUGGER_USAGE, debuggerCommand } from './debugger-command.js';
import { DELIVERY_USAGE, deliveryCommand } from './delivery-commands.js';
import { ENGAGE_USAGE, engageCommand } from './engage-commands.js';
import { FUNCTION_USAGE, functionCommand } from './function-commands.js';
import { InputFileError } from './input-file.js';
import { REPLAY_USAGE, replayCommand } from './replay-commands.js';
import { TRANSFORMATION_USAGE, transformationCommand } from './transformation-commands.js';
import { TRACKING_PLAN_USAGE, trackingPlanCommand } from './tracking-plan-commands.js';
import { enableLinearRegExpFallback } from '../util/regexp-fallback.js';

const USAGE = `Usage: switchyard <command> [options]

Commands:
  serve [--port N] [--host H] [--data-dir DIR] [--database-url URL] …
                                 run the service (every setting also has an environment variable; see README)
  sources list                   list sources
  sources create NAME            create a source; prints it with its write key
  sources get ID                 show one source
  sources rename ID NAME         rename a source
  sources enable ID | disable ID turn a source's intake on or off
  sources delete ID              delete a source and everything stored for it
  admin-token rotate             a new admin token, printed once (running servers take it within a second)
${DELIVERY_USAGE}${FUNCTION_USAGE}${REPLAY_USAGE}${TRANSFORMATION_USAGE}${ENGAGE_USAGE}${DEBUGGER_USAGE}${TRACKING_PLAN_USAGE}
Admin commands print JSON, and on stderr which server or store they used:
  --url URL (or SWITCHYARD_URL)  a running server's admin API (e.g. http://127.0.0.1:8080), with its admin
                                 token in SWITCHYARD_ADMIN_TOKEN (or --token); in \`webhooks set\`, --url names
                                 receivers, so give the server there with SWITCHYARD_URL
  otherwise the store directly: --data-dir (SWITCHYARD_DATA_DIR, default ./data) or --database-url
                                 (DATABASE_URL), as the server has them; admin-token rotate always does this
-h, --help: this text (COMMAND --help: that command's usage; serve --help: every setting); -v, --version: the version.
`;

/**
 * The usage of one command group: its entries of {@link USAGE} (an entry is
 * a line indented two spaces and the more-indented lines under it), and how
 * admin commands reach a server or a store; undefined for a name no entry has.
 */
function groupUsage(command: string): string | undefined {
  const [head, footer] = USAGE.split('\nAdmin commands print JSON');
  const lines = head!.split('\n');
  const picked: string[] = [];
  let inGroup = false;
  for (const line of lines.slice(lines.indexOf('Commands:') + 1)) {
    const entry = /^ {2}(\S+)/.exec(line);
    if (entry !== null) inGroup = entry[1] === command;
    if (inGroup && line.trim() !== '') picked.push(line);
  }
  if (picked.length === 0) return undefined;
  return `Usage: switchyard ${command} <command> [options]\n\nCommands:\n${picked.join('\n')}\n\nAdmin commands print JSON${footer ?? ''}`;
}

const COMMANDS = ['serve', 'sources', 'admin-token', 'webhooks', 'deliveries', 'functions', 'replays', 'transformations', 'audiences', 'computed-traits', 'profiles', 'debugger', 'tracking-plans', 'help'];

const BOOLEAN_FLAGS = new Set(['allow-private-receivers', 'trust-proxy', 'help', 'version']);

async function sourcesCommand(words: string[], flags: Record<string, string | true>): Promise<void> {
  const [action, id, name] = words;
  const need = (value: string | undefined, what: string): string => {
    if (value === undefined) throw new UsageError(`missing ${what}`);
    return value;
  };
  switch (action) {
    case 'list':
      return withAdmin(flags, async (admin) => ({ sources: await admin.sources.list() }));
    case 'create':
      return withAdmin(flags, (admin) => admin.sources.create({ name: need(id, 'NAME') }));
    case 'get':
      return withAdmin(flags, (admin) => admin.sources.get(need(id, 'ID')));
    case 'rename':
      return withAdmin(flags, (admin) => admin.sources.update(need(id, 'ID'), { name: need(name, 'NAME') }));
    case 'enable':
    case 'disable':
      return withAdmin(flags, (admin) => admin.sources.update(need(id, 'ID'), { enabled: action === 'enable' }));
    case 'delete':
      return withAdmin(flags, async (admin) => {
        await admin.sources.delete(need(id, 'ID'));
        return { deleted: id };
      });
    default:
      throw new UsageError(`unknown sources command ${JSON.stringify(action ?? '')}`);
  }
}

async function serve(flags: Record<string, string | true>): Promise<void> {
  const config = loadConfig(flags);
  const running = await startSwitchyard(config);
  if (running.welcome !== undefined) {
    printWelcome(running.port, running.welcome);
    if (running.welcome.adminToken !== undefined) await AdminAuth.markShown(running.store, Date.now());
  }
  let signals = 0;
  const stop = (signal: string): void => {
    if (++signals > 1) process.exit(1);
    process.stderr.write(`\n${signal}: finishing in-flight requests, then stopping (again to force)\n`);
    running.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

/** Secrets go to stdout once, for the person starting the service; never to the log. */
function printWelcome(port: number, welcome: Welcome): void {
  const lines = ['', 'Switchyard is ready.'];
  const source = welcome.defaultSource;
  if (source !== undefined) lines.push(`  The "default" source: id ${source.id}, write key ${source.writeKey}`);
  if (welcome.adminToken !== undefined) {
    lines.push(
      `  Admin token (shown only this once; keep it): ${welcome.adminToken}`,
      `    export ADMIN_TOKEN=${welcome.adminToken}`,
      '    (set SWITCHYARD_ADMIN_TOKEN to choose your own; `switchyard admin-token rotate` makes a new one)',
    );
  }
  if (source !== undefined) {
    lines.push(
      '  Try it:',
      `    curl -u '${source.writeKey}:' -H 'Content-Type: application/json' \\`,
      `      -d '{"userId":"u1","event":"Signed Up"}' http://127.0.0.1:${port}/v1/track`,
    );
  }
  process.stdout.write(`${lines.join('\n')}\n\n`);
}

async function adminTokenCommand(rest: readonly string[], flags: Record<string, string | true>): Promise<void> {
  if (rest[0] !== 'rotate') throw new UsageError(`unknown admin-token command ${JSON.stringify(rest[0] ?? '')}`);
  if (flags['url'] !== undefined) {
    throw new ConfigError('admin-token rotate works on the store, where the token\'s digest is kept: run it with the server\'s SWITCHYARD_DATA_DIR or DATABASE_URL instead of --url');
  }
  if (loadConfig(flags).adminToken !== undefined) {
    throw new ConfigError(
      'SWITCHYARD_ADMIN_TOKEN (--admin-token) is set: a server started with it uses whatever it says (change it there and restart); ' +
        'if it is set here only for --url / SWITCHYARD_URL, unset it for this command',
    );
  }
  return withStore(flags, async (store) => {
    const token = await AdminAuth.rotate(store, Date.now());
    return { adminToken: token, note: 'shown only this once; the old token stops working within a second' };
  });
}

class UsageError extends Error {}

const KIT: CliKit = { withAdmin, usageError: (message) => new UsageError(message) };

function suggestion(command: string): string {
  const meant = closest(command, COMMANDS);
  return meant === undefined ? '' : ` (did you mean "${meant}"?)`;
}

async function main(argv: string[]): Promise<void> {
  enableLinearRegExpFallback(); // before any tracking plan is compiled (see the function)
  // The short forms every CLI user tries first.
  const expanded = argv.map((arg) => (arg === '-h' ? '--help' : arg === '-v' ? '--version' : arg));
  const { words, flags } = parseArgs(expanded, BOOLEAN_FLAGS);
  if (flags['version'] === true) {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  const [command, ...rest] = words;
  if (command === 'serve' && flags['help'] === true) {
    process.stdout.write(`Usage: switchyard serve [options]\n\nEvery option is a flag or an environment variable (the flag wins):\n${serveHelp()}\n`);
    return;
  }
  if (command === undefined || command === 'help' || flags['help'] === true) {
    // `webhooks --help` (or `help webhooks`): that group's commands, not the whole CLI's.
    const group = command === 'help' ? rest[0] : command;
    if (group !== undefined && !COMMANDS.includes(group)) throw new UsageError(`unknown command ${JSON.stringify(group)}${suggestion(group)}`);
    process.stdout.write((group === undefined ? undefined : groupUsage(group)) ?? USAGE);
    return;
  }
  delete flags['help'];
  switch (command) {
    case 'serve':
      return serve(flags);
    case 'sources':
      return sourcesCommand(rest, flags);
    case 'admin-token':
      return adminTokenCommand(rest, flags);
    case 'webhooks':
    case 'deliveries':
      return deliveryCommand(argv, KIT);
    case 'functions':
      return functionCommand(argv, KIT);
    case 'replays':
      return replayCommand(argv, KIT);
    case 'transformations':
      return transformationCommand(argv, KIT);
    case 'audiences':
    case 'computed-traits':
    case 'profiles':
      return engageCommand(argv, KIT);
    case 'debugger':
      return debuggerCommand(argv, KIT);
    case 'tracking-plans':
      return trackingPlanCommand(argv, KIT);
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}${suggestion(command)}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError) {
    process.stderr.write(`switchyard: ${error.message}\n\n${USAGE}`);
    process.exitCode = 2;
  } else if (error instanceof InputFileError) {
    process.stderr.write(`switchyard: ${error.message}\n`);
    process.exitCode = 2;
  } else if (error instanceof ConfigError || error instanceof ApiError || error instanceof ServerError || error instanceof SchemaTooNewError || error instanceof DataDirInUseError) {
    process.stderr.write(`switchyard: ${error.message}\n`);
    process.exitCode = error instanceof ConfigError ? 2 : 1;
  } else {
    const known = operationalError(error, process.argv.slice(2));
    const debug = process.env['LOG_LEVEL'] === 'debug' || process.env['LOG_LEVEL'] === 'trace';
    process.stderr.write(`switchyard: ${known ?? (error instanceof Error ? error.message : String(error))}\n`);
    if (debug || known === undefined) process.stderr.write(`${error instanceof Error ? (error.stack ?? '') : ''}\n`);
    process.exitCode = 1;
  }
});

/**
 * The failures of running a service that are not bugs, in one line naming
 * the setting, the value and the fix (the stack only with LOG_LEVEL=debug).
 */
function operationalError(error: unknown, argv: readonly string[]): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code ?? ((error as { cause?: { code?: unknown } } | undefined)?.cause?.code);
  const config = (() => {
    try {
      return loadConfig(parseArgs(argv, BOOLEAN_FLAGS).flags);
    } catch {
      return undefined;
    }
  })();
  if (code === 'EADDRINUSE') {
    return `port ${config?.port ?? '?'} on ${config?.host ?? '?'} is in use (PORT / --port): stop the process that holds it or choose another port`;
  }
  if (code === 'EADDRNOTAVAIL') return `${config?.host ?? 'the host'} is not an address of this machine (HOST / --host): use 127.0.0.1, 0.0.0.0 or one of its addresses`;
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS' || code === 'ENOTDIR') {
    const where = (error as { path?: string }).path ?? config?.dataDir;
    if (where !== undefined) return `cannot write ${where} (SWITCHYARD_DATA_DIR / --data-dir is ${config?.dataDir ?? '?'}): choose a folder this user may write, or fix its permissions`;
    return `permission denied binding port ${config?.port ?? '?'} (PORT / --port): use a port above 1023`;
  }
  if (code === '3D000') {
    const where = databaseName(config?.databaseUrl);
    const name = where?.name ?? 'NAME';
    return `the database ${where === undefined ? 'in DATABASE_URL' : `"${where.name}" on ${where.server} (DATABASE_URL)`} does not exist: create it (createdb ${name}) or point DATABASE_URL at one that does`;
  }
  if (code === 'ECONNREFUSED' && config?.databaseUrl !== undefined) return 'PostgreSQL refused the connection (DATABASE_URL): is it running, and on that host and port?';
  if (code === '28P01' || code === '28000') return 'PostgreSQL refused the credentials in DATABASE_URL: check the user and password';
  return undefined;
}

/** The database and server a PostgreSQL URL names, for messages: never its user or password. */
function databaseName(url: string | undefined): { name: string; server: string } | undefined {
  if (url === undefined) return undefined;
  try {
    const parsed = new URL(url);
    const name = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
    if (name === '') return undefined;
    return { name, server: parsed.host === '' ? 'the local socket' : parsed.host };
  } catch {
    return undefined;
  }
}
