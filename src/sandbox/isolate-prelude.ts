/**
 * The JavaScript run in each isolate before the user's code: `log` (and
 * `console.log` &c. as aliases) and the dispatcher every call goes through.
 * The script's value is the dispatcher, held only by the host as a
 * Reference (never a global), so user code cannot replace it; it captured
 * `JSON.parse`/`JSON.stringify` before user code ran. Whatever it returns is
 * still untrusted text to the host (user code may tamper with prototypes the
 * dispatcher touches, which changes only that transformation's own output).
 *
 * Protocol: dispatcher(fn, argsJson, metaJson?) → Promise<string>, the
 * string being `{"value":…,"logs":[…]}` or `{"error":"…","errorType"?:"…","logs":[…]}`
 * (`errorType`: the thrown error's `name`, which function destinations'
 * outcomes depend on).
 * `metaJson`, when given, becomes a last argument `metadata(event)`
 * returning a fresh copy of it (RudderStack's shape).
 */
export function isolatePrelude(logChars: number, resultChars: number): string {
  return `(() => {
  'use strict';
  const parse = JSON.parse, stringify = JSON.stringify, toStr = String, isError = (e) => e instanceof Error;
  const LOG_CHARS = ${logChars}, RESULT_CHARS = ${resultChars};
  let logs = null, logChars = 0, logFull = false;
  const format = (v) => {
    if (typeof v === 'string') return v;
    try { const s = stringify(v); if (s !== undefined) return s; } catch {}
    try { return toStr(v); } catch { return '[unprintable]'; }
  };
  const log = (...args) => {
    if (logs === null || logFull) return;
    let line = '';
    for (let i = 0; i < args.length; i++) line += (i === 0 ? '' : ' ') + format(args[i]);
    if (logChars + line.length > LOG_CHARS) { line = line.slice(0, LOG_CHARS - logChars) + ' [log limit reached]'; logFull = true; }
    logChars += line.length;
    logs[logs.length] = line;
  };
  const describe = (error) => {
    let text;
    try { text = isError(error) ? toStr(error.message) : format(error); } catch { text = 'an error that could not be read'; }
    if (typeof text !== 'string' || text === '') text = isError(error) ? 'Error' : toStr(text);
    return text.length > 1000 ? text.slice(0, 1000) + '…' : text;
  };
  // WebAssembly.Memory is allocated outside V8's heap and isolated-vm's
  // ArrayBuffer allocator, so memoryLimit does not bound it: not offered.
  delete globalThis.WebAssembly;
  globalThis.log = log;
  globalThis.console = { log, info: log, warn: log, error: log, debug: log };
  return async (fn, argsJson, metaJson) => {
    const mine = logs = [];
    logChars = 0; logFull = false;
    try {
      const args = parse(argsJson);
      if (metaJson !== undefined) args[args.length] = () => parse(metaJson);
      const value = await fn(...args);
      let out;
      try { out = stringify({ value, logs: mine }); }
      catch (error) { return stringify({ error: 'the result is not JSON: ' + describe(error), logs: mine }); }
      if (out.length > RESULT_CHARS) return stringify({ error: 'the result is larger than ' + RESULT_CHARS + ' characters', logs: mine });
      return out;
    } catch (error) {
      let errorType;
      try { errorType = isError(error) && typeof error.name === 'string' ? error.name.slice(0, 100) : undefined; } catch {}
      return stringify({ error: describe(error), errorType, logs: mine });
    } finally {
      if (logs === mine) logs = null;
    }
  };
})()`;
}
