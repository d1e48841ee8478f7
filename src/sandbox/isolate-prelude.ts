/**
 * The JavaScript run in each isolate before the user's code: `log` (and
 * `console.log` &c. as aliases) and the functions the host calls the
 * isolate through. The script's value is `[dispatch, resume, currentCall, setBoard]`,
 * held only by the host as References (never globals), so user code can
 * neither call nor replace them; they captured `JSON.parse`/`JSON.stringify`
 * before user code ran. Whatever `dispatch` returns is still untrusted text
 * to the host (user code may tamper with prototypes the dispatcher touches,
 * which changes only that program's own output).
 *
 * Calls: several may be in flight in one isolate at once (function
 * destinations' handlers, which mostly wait on the host's `fetch`). Each has
 * an id (a positive integer the host chose) and its own logs. JavaScript runs
 * in an isolate only when the host enters it, through `dispatch` (a call
 * starts) or `resume` (the host answers a call's asynchronous work): each
 * entry makes its call the current one, and the isolate runs that entry and
 * the microtasks it queues to the end before the host enters again. So
 * `log`, and the host callbacks that ask `currentCall()`, are attributed to
 * the call whose entry is running. Code that hands one call's promise to
 * another (through a global) runs the other's continuation under the entry
 * that settled it: within one program only, never across programs.
 *
 * Protocol:
 * - `dispatch(fn, argsJson, metaJson, id)` → Promise<string>, the string
 *   being `{"value":…,"logs":[…]}` or `{"error":"…","errorType"?:"…","logs":[…]}`
 *   (`errorType`: the thrown error's `name`, which function destinations'
 *   outcomes depend on). `metaJson`, unless undefined, becomes a last
 *   argument `metadata(event)` returning a fresh copy of it (RudderStack's shape).
 * - `resume(id, fn, a, b)`: makes call `id` current and calls `fn(a, b)`;
 *   nothing when call `id` has ended (its answer is dropped).
 * - `currentCall()` → the current call's id, 0 when none (load time, or code
 *   of a call that has ended).
 * - `setBoard(sharedArrayBuffer)`: once (later calls are ignored), a
 *   buffer shared with the host, where each entry writes which call it
 *   runs for: `[entries so far, call id]` as two doubles. The host reads it
 *   to tell code stuck in one entry from an isolate that is merely busy
 *   (see `watchStuck` in sandbox.ts). Like the others it lives only in this
 *   closure; user code can neither read nor write it.
 */
export function isolatePrelude(logChars: number, resultChars: number, filename: string): string {
  return `(() => {
  'use strict';
  const parse = JSON.parse, stringify = JSON.stringify, toStr = String, isError = (e) => e instanceof Error;
  // What the prelude calls on strings and patterns is captured too, so code
  // that replaces RegExp.prototype.exec or String.prototype.slice can neither
  // choose the text position() appends, nor skip the prelude's bounds on logs
  // and errors, nor throw out of the dispatcher's catch.
  const apply = Reflect.apply, execRe = RegExp.prototype.exec, sliceStr = String.prototype.slice;
  const LOG_CHARS = ${logChars}, RESULT_CHARS = ${resultChars};
  // The first stack frame in the user's own file: where their code threw.
  // Matched on frames only (lines after the first), never on the message,
  // and on the whole file name (after "at " or "("), never a longer one ending in it.
  const FRAME = new RegExp('\\\\n\\\\s+at [^\\\\n]*?' + '[ (]' + ${JSON.stringify(escapeRegExp(filename))} + ':(\\\\d{1,7}):(\\\\d{1,7})');
  // Calls in flight by id; no prototype, so no lookup reaches code the user can change.
  const calls = Object.create(null);
  let current = null;
  let board = null;
  const setBoard = (buffer) => { if (board === null) board = new Float64Array(buffer); };
  const entering = (id) => { if (board !== null) { board[1] = id; board[0] = board[0] + 1; } };
  const format = (v) => {
    if (typeof v === 'string') return v;
    try { const s = stringify(v); if (s !== undefined) return s; } catch {}
    try { return toStr(v); } catch { return '[unprintable]'; }
  };
  const log = (...args) => {
    const call = current;
    if (call === null || call.full) return;
    let line = '';
    for (let i = 0; i < args.length; i++) line += (i === 0 ? '' : ' ') + format(args[i]);
    if (call.chars + line.length > LOG_CHARS) { line = apply(sliceStr, line, [0, LOG_CHARS - call.chars]) + ' [log limit reached]'; call.full = true; }
    call.chars += line.length;
    call.logs[call.logs.length] = line;
  };
  const describe = (error) => {
    let text;
    try { text = isError(error) ? toStr(error.message) : format(error); } catch { text = 'an error that could not be read'; }
    if (typeof text !== 'string' || text === '') text = isError(error) ? 'Error' : toStr(text);
    return text.length > 1000 ? apply(sliceStr, text, [0, 1000]) + '…' : text;
  };
  // ' (line L, column C)' of the frame that threw, when the error's stack
  // names the user's file; only the two numbers leave the isolate. The stack
  // (or a getter for it) is the user's own: read it guarded and bounded.
  const position = (error) => {
    let stack;
    try { stack = isError(error) ? error.stack : undefined; } catch { return ''; }
    if (typeof stack !== 'string') return '';
    const at = apply(execRe, FRAME, [stack.length > 4000 ? apply(sliceStr, stack, [0, 4000]) : stack]);
    return at === null ? '' : ' (line ' + at[1] + ', column ' + at[2] + ')';
  };
  // WebAssembly.Memory is allocated outside V8's heap and isolated-vm's
  // ArrayBuffer allocator, so memoryLimit does not bound it: not offered.
  delete globalThis.WebAssembly;
  // Both run JavaScript later as tasks of their own, outside any call, its
  // time limit and its logs (a FinalizationRegistry callback can spin the
  // isolate's thread forever), and a waitAsync with a timeout aborts the
  // host process (isolated-vm 5 posts a delayed task it cannot run).
  delete globalThis.FinalizationRegistry;
  delete Atomics.waitAsync;
  globalThis.log = log;
  globalThis.console = { log, info: log, warn: log, error: log, debug: log };
  const dispatch = async (fn, argsJson, metaJson, id) => {
    entering(id);
    const mine = { id, logs: [], chars: 0, full: false };
    calls[id] = mine;
    current = mine;
    try {
      const args = parse(argsJson);
      if (metaJson !== undefined) args[args.length] = () => parse(metaJson);
      const value = await fn(...args);
      let out;
      try { out = stringify({ value, logs: mine.logs }); }
      catch (error) { return stringify({ error: 'the result is not JSON: ' + describe(error), logs: mine.logs }); }
      if (out.length > RESULT_CHARS) return stringify({ error: 'the result is larger than ' + RESULT_CHARS + ' characters', logs: mine.logs });
      return out;
    } catch (error) {
      let errorType;
      try { errorType = isError(error) && typeof error.name === 'string' ? apply(sliceStr, error.name, [0, 100]) : undefined; } catch {}
      return stringify({ error: describe(error) + position(error), errorType, logs: mine.logs });
    } finally {
      delete calls[id];
      if (current === mine) current = null;
    }
  };
  const resume = (id, fn, a, b) => {
    entering(id);
    const call = calls[id];
    // An answer for a call that has ended is dropped: the code waiting on
    // it would run outside any call, its logs and its time limit.
    if (call === undefined) return;
    current = call;
    fn(a, b);
  };
  const currentCall = () => (current === null ? 0 : current.id);
  return [dispatch, resume, currentCall, setBoard];
})()`;
}

/** `text` as a regular expression that matches it literally. */
function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
