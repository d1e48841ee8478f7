import { DEFAULT_FETCH_BOUNDS, MAX_REQUEST_JSON_CHARS } from './function-fetch.js';

/**
 * The globals of a function destination's isolate, as the JavaScript that
 * builds them (run once per isolate, before the user's code; see
 * `SandboxHost` in src/sandbox/sandbox.ts): Segment's error classes,
 * `fetch`, `Headers`, `Request`, `Response`, `URL`, `URLSearchParams`,
 * `atob`, `btoa`. Everything here is plain JavaScript inside the isolate
 * except what it is called with: the prelude's `currentCall()` (the id of
 * the call whose code runs now) and two host functions, which take and
 * return strings and numbers only:
 *
 * - `parseUrl(input, base, part, value)` → `{"href":…,…}` or `{"error":…}`:
 *   WHATWG URL parsing, done by the host's own `URL` (V8 has none); with
 *   `part`, sets that component of `input` first. A callback (the isolate
 *   waits for it); what it answers for a plain `input` is kept, 256 at most.
 * - `startFetch(callId, fetchId, requestJson, body)`, a notice (the isolate
 *   does not wait; `body` a string or null): the host checks the request
 *   against that call's budget and starts it, or refuses it; either way it
 *   answers through `settle(fetchId, answerJson)`, the second function
 *   this script returns, entered with that call current. A call that has
 *   ended gets no answer.
 *
 * The callbacks and `currentCall` live only in this closure: user code never
 * sees them, nor `invoke`/`settle` (the host holds those). `fetch` sends a
 * call at most twice its request budget of notices, each a string JSON of
 * bounded length and a string body of at most 1 MB characters: past that it
 * rejects without a notice (see the comment in `fetch`).
 */
export const FUNCTION_GLOBALS = String.raw`(function (currentCall, parseUrl, startFetch) {
  'use strict';
  // Captured before user code runs: what is looked up later can have been replaced.
  const parse = JSON.parse, stringify = JSON.stringify, toStr = String, freeze = Object.freeze, create = Object.create;
  const waiting = new Map();
  let lastFetchId = 0;
  const MAX_BODY_CHARS = ${DEFAULT_FETCH_BOUNDS.maxRequestBodyBytes}, MAX_REQUEST_JSON_CHARS = ${MAX_REQUEST_JSON_CHARS};
  const REQUESTS_PER_CALL = ${DEFAULT_FETCH_BOUNDS.maxRequestsPerCall}, NOTICES_PER_CALL = REQUESTS_PER_CALL * 2;
  // Notices sent by call id (no prototype: nothing user code can change is
  // looked up); emptied past 1,024 calls, the oldest long ended.
  let sent = create(null), sentCalls = 0;

  const defineError = (name) => {
    const Class = class extends Error {
      constructor(message) {
        super(message);
        this.name = name;
      }
    };
    Object.defineProperty(Class, 'name', { value: name });
    return Class;
  };
  const RetryError = defineError('RetryError');
  const EventNotSupported = defineError('EventNotSupported');
  const InvalidEventPayload = defineError('InvalidEventPayload');
  const ValidationError = defineError('ValidationError');

  // --- base64 -----------------------------------------------------------------
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const btoa = (input) => {
    const s = toStr(input);
    let out = '';
    for (let i = 0; i < s.length; i += 3) {
      const a = s.charCodeAt(i), b = s.charCodeAt(i + 1), c = s.charCodeAt(i + 2);
      if (a > 255 || b > 255 || c > 255) throw new DOMExceptionLike('The string to be encoded contains characters outside of the Latin1 range.', 'InvalidCharacterError');
      const n = (a << 16) | ((b || 0) << 8) | (c || 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < s.length ? B64[(n >> 6) & 63] : '=') + (i + 2 < s.length ? B64[n & 63] : '=');
    }
    return out;
  };
  const atob = (input) => {
    let s = toStr(input).replace(/[\t\n\f\r ]/g, '');
    if (s.length % 4 === 0) s = s.replace(/==?$/, '');
    if (s.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(s)) throw new DOMExceptionLike('The string to be decoded is not correctly encoded.', 'InvalidCharacterError');
    let out = '', bits = 0, value = 0;
    for (let i = 0; i < s.length; i++) {
      value = (value << 6) | B64.indexOf(s[i]);
      bits += 6;
      if (bits >= 8) { bits -= 8; out += String.fromCharCode((value >> bits) & 255); }
    }
    return out;
  };
  class DOMExceptionLike extends Error {
    constructor(message, name) { super(message); this.name = name; }
  }

  // --- UTF-8 (for arrayBuffer) ------------------------------------------------
  const utf8 = (text) => {
    const bytes = [];
    for (const ch of text) {
      const c = ch.codePointAt(0);
      if (c < 0x80) bytes.push(c);
      else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else bytes.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    return new Uint8Array(bytes).buffer;
  };

  // --- URLSearchParams --------------------------------------------------------
  const formDecode = (s) => {
    const spaced = s.replace(/\+/g, ' ');
    try { return decodeURIComponent(spaced); } catch { return spaced.replace(/%([0-9a-fA-F]{2})/g, (_, h) => String.fromCharCode(parseInt(h, 16))); }
  };
  const formEncode = (s) => encodeURIComponent(s).replace(/%20/g, '+').replace(/[!'()~]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
  const onChange = Symbol('onChange');
  class URLSearchParams {
    #list = [];
    constructor(init) {
      this[onChange] = undefined;
      if (init === undefined || init === null) return;
      if (init instanceof URLSearchParams) { this.#list = init.#list.map((p) => [p[0], p[1]]); return; }
      if (typeof init === 'object') {
        if (typeof init[Symbol.iterator] === 'function') {
          for (const pair of init) {
            const items = [...pair];
            if (items.length !== 2) throw new TypeError('Each query pair must be an iterable [name, value] tuple');
            this.#list.push([toStr(items[0]), toStr(items[1])]);
          }
        } else {
          for (const key of Object.keys(init)) this.#list.push([key, toStr(init[key])]);
        }
        return;
      }
      this.#parse(toStr(init));
    }
    #parse(text) {
      this.#list = [];
      const s = text.startsWith('?') ? text.slice(1) : text;
      for (const part of s.split('&')) {
        if (part === '') continue;
        const at = part.indexOf('=');
        this.#list.push(at === -1 ? [formDecode(part), ''] : [formDecode(part.slice(0, at)), formDecode(part.slice(at + 1))]);
      }
    }
    #changed() { if (this[onChange] !== undefined) this[onChange](this.toString()); }
    get size() { return this.#list.length; }
    append(name, value) { this.#list.push([toStr(name), toStr(value)]); this.#changed(); }
    delete(name, value) { const n = toStr(name); this.#list = this.#list.filter((p) => !(p[0] === n && (value === undefined || p[1] === toStr(value)))); this.#changed(); }
    get(name) { const n = toStr(name); const p = this.#list.find((q) => q[0] === n); return p === undefined ? null : p[1]; }
    getAll(name) { const n = toStr(name); return this.#list.filter((p) => p[0] === n).map((p) => p[1]); }
    has(name, value) { const n = toStr(name); return this.#list.some((p) => p[0] === n && (value === undefined || p[1] === toStr(value))); }
    set(name, value) {
      const n = toStr(name), v = toStr(value);
      const i = this.#list.findIndex((p) => p[0] === n);
      if (i === -1) this.#list.push([n, v]);
      else { this.#list[i] = [n, v]; this.#list = this.#list.filter((p, j) => j <= i || p[0] !== n); }
      this.#changed();
    }
    sort() { this.#list.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)); this.#changed(); }
    forEach(callback, thisArg) { for (const [k, v] of this.#list) callback.call(thisArg, v, k, this); }
    *entries() { for (const [k, v] of this.#list) yield [k, v]; }
    *keys() { for (const [k] of this.#list) yield k; }
    *values() { for (const [, v] of this.#list) yield v; }
    [Symbol.iterator]() { return this.entries(); }
    toString() { return this.#list.map(([k, v]) => formEncode(k) + '=' + formEncode(v)).join('&'); }
    static _reset(params, text) { params.#parse(text); }
  }
  const resetParams = URLSearchParams._reset;
  delete URLSearchParams._reset;

  // --- URL (parsed by the host's WHATWG parser) -------------------------------
  const URL_PARTS = ['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'];
  // A function fetches the same few URLs over and over: each plain parse is
  // kept (no prototype: no lookup reaches code the user can change).
  let parsed = create(null), parsedCount = 0;
  const parseOrThrow = (input, base, part, value) => {
    const plain = base === undefined && part === undefined;
    if (plain) { const known = parsed[input]; if (known !== undefined) return known; }
    const answer = parse(parseUrl(input, base, part, value));
    if (answer.error !== undefined) throw new TypeError(answer.error);
    if (plain) {
      if (parsedCount >= 256) { parsed = create(null); parsedCount = 0; }
      parsed[input] = freeze(answer);
      parsedCount++;
    }
    return answer;
  };
  class URL {
    #parts;
    #params;
    constructor(url, base) {
      this.#parts = parseOrThrow(toStr(url), base === undefined ? undefined : toStr(base));
      this.#params = new URLSearchParams(this.#parts.search);
      this.#params[onChange] = (text) => {
        this.#parts = parseOrThrow(this.#parts.href, undefined, 'search', text);
        if (text === '') this.#parts = parseOrThrow(this.#parts.href.replace(/\?(?=#|$)/, ''));
      };
    }
    static canParse(url, base) { try { new URL(url, base); return true; } catch { return false; } }
    get origin() { return this.#parts.origin; }
    get searchParams() { return this.#params; }
    toString() { return this.#parts.href; }
    toJSON() { return this.#parts.href; }
    #set(part, value) {
      this.#parts = parseOrThrow(this.#parts.href, undefined, part, toStr(value));
      if (part === 'search' || part === 'href') resetParams(this.#params, this.#parts.search);
    }
    static {
      for (const part of URL_PARTS) {
        Object.defineProperty(URL.prototype, part, {
          get() { return this.#parts[part]; },
          set(value) { this.#set(part, value); },
          enumerable: true,
          configurable: true,
        });
      }
    }
  }

  // --- Headers ----------------------------------------------------------------
  const TOKEN = /^[!#$%&'*+.^_\x60|~0-9A-Za-z-]+$/;
  class Headers {
    #map = new Map();
    constructor(init) {
      if (init === undefined || init === null) return;
      if (init instanceof Headers) { for (const [k, v] of init) this.append(k, v); return; }
      if (typeof init !== 'object') throw new TypeError('Headers init must be an object or a list of pairs');
      if (typeof init[Symbol.iterator] === 'function') {
        for (const pair of init) {
          const items = [...pair];
          if (items.length !== 2) throw new TypeError('Each header pair must be a [name, value] tuple');
          this.append(items[0], items[1]);
        }
      } else {
        for (const key of Object.keys(init)) this.append(key, init[key]);
      }
    }
    #name(name) {
      const n = toStr(name);
      if (!TOKEN.test(n)) throw new TypeError('Invalid header name: ' + n.slice(0, 100));
      return n.toLowerCase();
    }
    #value(value) {
      const v = toStr(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
      if (/[\0\r\n]/.test(v)) throw new TypeError('Invalid header value');
      return v;
    }
    append(name, value) {
      const n = this.#name(name), v = this.#value(value);
      const old = this.#map.get(n);
      this.#map.set(n, old === undefined ? v : n === 'set-cookie' ? old + '\n' + v : old + ', ' + v);
    }
    set(name, value) { this.#map.set(this.#name(name), this.#value(value)); }
    get(name) { const v = this.#map.get(this.#name(name)); return v === undefined ? null : v.replace(/\n/g, ', '); }
    has(name) { return this.#map.has(this.#name(name)); }
    delete(name) { this.#map.delete(this.#name(name)); }
    getSetCookie() { const v = this.#map.get('set-cookie'); return v === undefined ? [] : v.split('\n'); }
    forEach(callback, thisArg) { for (const [k, v] of this) callback.call(thisArg, v, k, this); }
    *entries() { for (const k of [...this.#map.keys()].sort()) yield [k, this.get(k)]; }
    *keys() { for (const [k] of this.entries()) yield k; }
    *values() { for (const [, v] of this.entries()) yield v; }
    [Symbol.iterator]() { return this.entries(); }
  }

  // --- Request / Response -----------------------------------------------------
  const bodyText = (body, headers) => {
    if (body === undefined || body === null) return undefined;
    if (typeof body === 'string') return body;
    if (body instanceof URLSearchParams) {
      if (!headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
      return body.toString();
    }
    if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
      const bytes = body instanceof ArrayBuffer ? new Uint8Array(body) : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
      let text = '';
      for (let i = 0; i < bytes.length; i++) text += String.fromCharCode(bytes[i]);
      try { return decodeURIComponent(escape(text)); } catch { throw new TypeError('fetch: binary bodies must be UTF-8 text'); }
    }
    return toStr(body);
  };
  class Body {
    #text;
    #used = false;
    constructor(text) { this.#text = text; }
    get bodyUsed() { return this.#used; }
    get body() { return this.#text === undefined ? null : this.#text; }
    #take() {
      if (this.#used) return Promise.reject(new TypeError('Body has already been consumed.'));
      this.#used = true;
      return Promise.resolve(this.#text === undefined ? '' : this.#text);
    }
    text() { return this.#take(); }
    json() { return this.#take().then((t) => parse(t)); }
    arrayBuffer() { return this.#take().then(utf8); }
    static _text(b) { return b.#text; }
  }
  const textOf = Body._text;
  delete Body._text;
  class Request extends Body {
    constructor(input, init) {
      const options = init === undefined || init === null ? {} : init;
      const from = input instanceof Request ? input : undefined;
      const headers = new Headers(options.headers !== undefined ? options.headers : from !== undefined ? from.headers : undefined);
      const text = options.body !== undefined ? bodyText(options.body, headers) : from !== undefined ? textOf(from) : undefined;
      super(text);
      this.url = from !== undefined ? from.url : new URL(toStr(input)).href;
      this.method = toStr(options.method !== undefined ? options.method : from !== undefined ? from.method : 'GET').toUpperCase();
      this.headers = headers;
      this.redirect = 'manual';
      if (text !== undefined && (this.method === 'GET' || this.method === 'HEAD')) throw new TypeError('Request with GET/HEAD method cannot have body.');
    }
    clone() { return new Request(this); }
  }
  class Response extends Body {
    constructor(body, init) {
      const options = init === undefined || init === null ? {} : init;
      const headers = new Headers(options.headers);
      super(bodyText(body, headers));
      this.status = options.status === undefined ? 200 : options.status;
      this.statusText = options.statusText === undefined ? '' : toStr(options.statusText);
      this.headers = headers;
      this.url = options.url === undefined ? '' : toStr(options.url);
      this.type = 'basic';
      this.redirected = false;
    }
    get ok() { return this.status >= 200 && this.status <= 299; }
    clone() { return new Response(textOf(this), { status: this.status, statusText: this.statusText, headers: this.headers, url: this.url }); }
    static json(data, init) {
      const response = new Response(stringify(data), init);
      if (!response.headers.has('content-type')) response.headers.set('content-type', 'application/json');
      return response;
    }
  }

  // --- fetch ------------------------------------------------------------------
  const fetch = (input, init) => {
    let request;
    try { request = new Request(input, init); } catch (error) { return Promise.reject(error); }
    const call = currentCall();
    if (call === 0) return Promise.reject(new TypeError('fetch is only available while a handler runs'));
    // Checked here with what user code cannot change (typeof, a string's
    // length, this closure's counts) before anything is sent: the host takes
    // notices as they come, and a loop of them, or of large ones, would
    // hold its thread (and every other program's calls) for as long as it
    // ran. The host checks again, and decides the rest.
    const text = textOf(request);
    if (text !== undefined && typeof text !== 'string') return Promise.reject(new TypeError('fetch: the body could not be read'));
    if (text !== undefined && text.length > MAX_BODY_CHARS) return Promise.reject(new TypeError('fetch: the request body is larger than ' + MAX_BODY_CHARS / 1024 / 1024 + ' MB'));
    // The body goes beside the JSON, not escaped into it: the host checks it
    // as the string it is, and never parses a megabyte out of JSON.
    const requestJson = stringify({ method: request.method, url: request.url, headers: [...request.headers] });
    if (typeof requestJson !== 'string' || requestJson.length > MAX_REQUEST_JSON_CHARS) return Promise.reject(new TypeError('fetch: the request could not be read'));
    // Read, checked and counted with no user code in between: the line
    // above runs some (Headers' iterator, toJSON), which may call fetch
    // itself; a count read before it would be written back stale.
    const used = sent[call] === undefined ? 0 : sent[call];
    if (used >= NOTICES_PER_CALL) return Promise.reject(new TypeError('fetch: at most ' + REQUESTS_PER_CALL + ' requests per call'));
    if (used === 0 && ++sentCalls > 1024) { sent = create(null); sentCalls = 1; }
    sent[call] = used + 1;
    const id = ++lastFetchId;
    const answer = new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
    startFetch(call, id, requestJson, text === undefined ? null : text);
    return answer;
  };

  const settle = (id, answerJson) => {
    const key = Number(id);
    const pending = waiting.get(key);
    if (pending === undefined) return;
    waiting.delete(key);
    const answer = parse(answerJson);
    if (answer.error !== undefined) pending.reject(new TypeError(answer.error));
    else pending.resolve(new Response(answer.body, { status: answer.status, statusText: answer.statusText, headers: answer.headers, url: answer.url }));
  };

  const invoke = async (name, event, settings) => {
    const handler = globalThis[name];
    if (typeof handler !== 'function') throw new EventNotSupported(toStr(event && event.type) + ' is not supported');
    await handler(event, settings);
    return null;
  };

  const globals = { RetryError, EventNotSupported, InvalidEventPayload, ValidationError, fetch, Headers, Request, Response, URL, URLSearchParams, atob, btoa };
  for (const name of Object.keys(globals)) {
    Object.defineProperty(globalThis, name, { value: globals[name], writable: true, configurable: true, enumerable: false });
  }
  return [invoke, settle];
})`;
