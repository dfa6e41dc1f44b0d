// The host side of code mode, as the isolate sees it. Evaluated once per isolate.
//
// Neither engine may call into Python while a time limit is armed, so a tool call is
// not a callback: it is pushed onto an outbox, the Promise it returns is parked in
// `pending`, and the host drains the outbox between evaluations and settles the
// Promises with the results. Console output is buffered the same way.
//
// Every function here is named __cm_*: the host drops frames with that prefix when it
// reports where an error happened, so the model sees only its own code.
(function __cm_install(global) {
  "use strict";

  // Kept before Atomics goes: the live console below publishes with it.
  const atomicStore = typeof Atomics === "object" ? Atomics.store : null;
  // The console's formatter (inspect.js, evaluated just before), taken out of reach.
  const inspector = global.__cm_inspect || null;
  delete global.__cm_inspect;
  // Kept before any program runs: what the host reads must not depend on globals a
  // program can replace (the host still treats what it reads as untrusted).
  const stringify = JSON.stringify;
  const parseJSON = JSON.parse;
  // For the inbox below: kept here, where no program has replaced them yet.
  const applyFn = Reflect.apply;
  const fromCharCode = String.fromCharCode;
  const subarray = Uint16Array.prototype.subarray;
  const wellFormed = String.prototype.toWellFormed;
  const concatString = String.prototype.concat;
  const objectProto = Object.prototype;
  // QuickJS in its worker process: a host function that takes each console line as it
  // is written (level index, text), so a program killed for its time limit has shown
  // everything it printed. Taken off the global object before any program runs.
  const hostLog = typeof global.__cm_hostLog === "function" ? global.__cm_hostLog : null;
  try { delete global.__cm_hostLog; } catch (e) { /* left as is */ }

  // No ambient authority: tools are the only door out of the isolate.
  for (const name of [
    "SharedArrayBuffer", "Atomics", "WebAssembly", "setTimeout", "clearTimeout",
    "setInterval", "clearInterval", "__timer_manager", "__TimerManager",
    "require", "process", "fetch", "XMLHttpRequest", "std", "os", "print", "console",
  ]) {
    try { delete global[name]; } catch (e) { /* non-configurable: left as is */ }
  }

  // Globals declared with `var` by an embedder (mini-racer's setTimeout) cannot be
  // redefined, only overwritten.
  function __cm_define(name, value, writable = true) {
    try {
      Object.defineProperty(global, name, { value, writable, configurable: writable });
    } catch (e) {
      global[name] = value;
    }
  }

  let outbox = [];
  // The outbox's entries as JSON text too, "[id,name,args]" each, built as calls are
  // made: what a drain sends most often (new calls, nothing else) is then put together
  // by hand, without a JSON.stringify of the whole state (a fifth of QuickJS's work
  // for a tool call).
  let outboxText = "";
  let timerbox = [];  // [id, ms]: timers the host is to fire
  let logs = [];
  let pending = new Map();
  let nextId = 1;
  let done = null;
  let calls = 0;
  let overLimit = false;
  let maxCalls = Infinity;
  // A failed tool call rejects with a ToolError; with `plainRejections` (Codex's
  // protocol, whose programs see a failed call's message as a bare string) with the text.
  let plainRejections = false;

  function __cm_render(value, seen) {
    if (typeof value === "string") return value;
    if (value === undefined) return "undefined";
    if (typeof value === "function") return `[Function ${value.name || "anonymous"}]`;
    if (typeof value === "symbol" || typeof value === "bigint") return String(value);
    if (value instanceof Error) return value.stack && value.stack.includes(value.message)
      ? value.stack : `${value.name}: ${value.message}`;
    try {
      return stringify(value, __cm_replacer(), 2) ?? String(value);
    } catch (e) {
      return String(value);
    }
  }

  // JSON.stringify that shows what a developer expects instead of throwing or
  // dropping: cycles, Maps, Sets, undefined in arrays, BigInts, Errors.
  function __cm_replacer() {
    const stack = [];
    return function __cm_replace(key, value) {
      if (typeof value === "bigint") return value.toString();
      if (typeof value === "function") return `[Function ${value.name || "anonymous"}]`;
      if (value instanceof Error) return { name: value.name, message: value.message };
      if (value instanceof Map) return Object.fromEntries(value);
      if (value instanceof Set) return [...value];
      if (value !== null && typeof value === "object") {
        while (stack.length && stack[stack.length - 1] !== this) stack.pop();
        if (stack.includes(value)) return "[Circular]";
        stack.push(value);
      }
      return value;
    };
  }

  // The live console: an engine whose host can read memory while a step runs (V8, on
  // its own thread) hands over an ArrayBuffer, and console lines go there as they are
  // written, so the output of a long synchronous stretch shows as it happens. Int32 0 is
  // how many UTF-16 units are written after the 8-byte header; a record is the level's
  // index, the text's length as two units (low, high), then the text. A line that does
  // not fit goes to `logs`, and so does every later one until the next drain, to keep
  // the order.
  // The console's levels, then the host channel's (__cm.hostChannel below): protocol.LEVELS too.
  const LEVELS = ["log", "info", "warn", "error", "debug", "host"];
  let live = null;
  let liveAt = 0;
  let inbox = null;  // see host.inbox

  function __cm_toLive(level, text) {
    if (live === null || logs.length) return false;
    const units = live.units;
    const at = liveAt;
    if (at + 3 + text.length > units.length) return false;
    units[at] = LEVELS.indexOf(level);
    units[at + 1] = text.length & 0xffff;
    units[at + 2] = text.length >>> 16;
    for (let i = 0; i < text.length; i++) units[at + 3 + i] = text.charCodeAt(i);
    liveAt = at + 3 + text.length;
    atomicStore(live.head, 0, liveAt);  // after the text: the host reads up to here
    return true;
  }

  function __cm_send(level, index, text) {
    if (hostLog !== null) hostLog(index, wellFormed ? wellFormed.call(text) : text);
    else if (!__cm_toLive(level, text)) logs.push([level, text]);
  }

  function __cm_emit(level) {
    const index = LEVELS.indexOf(level);
    return function __cm_log(...args) {
      const text = inspector ? `${inspector.format(args)}` : args.map((a) => __cm_render(a)).join(" ");
      __cm_send(level, index, text);
    };
  }

  // The typed channel out of a program to its host: a host's setup script (run after
  // this, once per isolate) takes it with __cm.hostChannel() into its own closure and
  // gives programs functions of its own; the host hears each call as a
  // HostEvent(kind, data), in its place among the program's output, never as console
  // output. Handed out once: the runtime takes it itself after the setup scripts ran,
  // so no program gets it. (A closure, not a global deleted later: deleting a global
  // slows every later global lookup of the isolate.)
  const HOST_INDEX = LEVELS.indexOf("host");
  let hostChannel = function __cm_hostEvent(kind, data) {
    __cm_send("host", HOST_INDEX, stringify([String(kind), String(data)]));
  };

  const console = {
    log: __cm_emit("log"), info: __cm_emit("info"), warn: __cm_emit("warn"),
    error: __cm_emit("error"), debug: __cm_emit("debug"),
  };
  __cm_define("console", console);
  __cm_define("print", console.log);

  class ToolError extends Error {
    constructor(message, tool) {
      super(message);
      this.name = "ToolError";
      this.tool = tool;
    }
  }
  __cm_define("ToolError", ToolError);

  function __cm_distance(a, b) {
    const row = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0];
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const cur = row[j];
        row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return row[b.length];
  }

  function __cm_unknownTool(prefix, name, known) {
    let best = null;
    let bestScore = Infinity;
    for (const candidate of known) {
      const d = __cm_distance(name.toLowerCase(), candidate.toLowerCase());
      if (d < bestScore) { best = candidate; bestScore = d; }
    }
    const close = best !== null && bestScore <= Math.max(2, Math.floor(best.length / 3));
    const hint = close
      ? ` — did you mean tools.${prefix}${best}?`
      : ` — available: ${known.map((k) => prefix + k).join(", ")}`;
    const missing = function __cm_missing() {
      throw new TypeError(`tools.${prefix}${name} is not a function${hint}`);
    };
    // `tools.nosuch.tool(...)`: say that tools.nosuch is missing, not just "not a function".
    return new Proxy(missing, {
      get: function __cm_missingMember(target, key) {
        if (typeof key !== "string" || key === "then" || key in target) return target[key];
        return function __cm_missing() {
          throw new TypeError(
            `tools.${prefix}${name}.${key} is not a function: there is no tools.${prefix}${name}${hint}`);
        };
      },
    });
  }

  function __cm_reason(e) {
    try { return e instanceof Error ? String(e.message) : String(e); } catch (_) { return "?"; }
  }

  // `quoted`: the name as JSON text, made once per tool (see __cm_toolbox).
  function __cm_call(name, args, quoted) {
    if (overLimit) return new Promise(() => {});
    if (++calls > maxCalls) {
      // The host stops the program when it sees this; the Promise never settles so
      // the program cannot catch its way around the cap.
      overLimit = true;
      return new Promise(() => {});
    }
    // Serialized now, at the call: a throwing getter, Proxy trap or toJSON fails this
    // call with an exception the program can catch, at its own line.
    let json;
    if (args === undefined && !("toJSON" in objectProto)) {
      json = "{}";  // what the replacer makes of an empty object, at no call
    } else {
      try {
        json = stringify(args === undefined ? {} : args, __cm_replacer()) ?? "{}";
      } catch (e) {
        throw new TypeError(`tools.${name}: arguments cannot be sent: ${__cm_reason(e)}`);
      }
    }
    const id = nextId++;
    outbox.push([id, name, json]);
    outboxText += (outboxText === "" ? "[" : ",[") + id + "," + quoted + "," +
      (json === "{}" ? '"{}"' : stringify(json)) + "]";
    // Captured now so that a failed call is reported at the line that made it.
    const site = new Error();
    return new Promise((resolve, reject) => pending.set(id, [resolve, reject, name, site]));
  }

  // `tools.NAME(args)`, and `tools.NS.NAME(args)` for namespaced tools (an MCP server's
  // tools are `tools.SERVER.TOOL`): `members` maps what the program writes to the
  // registry name the host is called with.
  function __cm_toolbox(prefix, members) {
    const cache = new Map();
    const box = new Proxy({}, {
      get: function __cm_get(_, name) {
        if (typeof name !== "string") return undefined;
        let value = cache.get(name);
        if (value === undefined) {
          const target = members.get(name);
          if (typeof target === "string") {
            const quoted = stringify(target);
            value = function __cm_tool(args) { return __cm_call(target, args, quoted); };
          } else if (target !== undefined) {
            value = __cm_toolbox(`${prefix}${name}.`, target);
          } else {
            value = __cm_unknownTool(prefix, name, [...members.keys()]);
          }
          cache.set(name, value);
        }
        return value;
      },
      has(_, name) { return members.has(name); },
      ownKeys() { return [...members.keys()]; },
      getOwnPropertyDescriptor(_, name) {
        return members.has(name)
          ? { value: box[name], enumerable: true, configurable: true } : undefined;
      },
    });
    return box;
  }

  let toolMembers = new Map();
  const tools = new Proxy({}, {
    get: function __cm_get(_, name) { return toolRoot[name]; },
    has(_, name) { return name in toolRoot; },
    ownKeys() { return Reflect.ownKeys(toolRoot); },
    getOwnPropertyDescriptor(_, name) { return Reflect.getOwnPropertyDescriptor(toolRoot, name); },
  });
  let toolRoot = __cm_toolbox("", toolMembers);
  __cm_define("tools", tools, false);

  // Timers run through the host too, so `await new Promise(r => setTimeout(r, 50))`
  // works in both engines and counts against the program's wall-clock limit.
  let timerSeq = 0;
  const timers = new Map();
  function __cm_setTimeout(fn, ms, ...args) {
    const tid = ++timerSeq;
    const id = nextId++;
    timers.set(tid, id);
    const delay = Number(ms);
    timerbox.push([id, delay > 0 ? Math.min(delay, 1e9) : 0]);
    pending.set(id, [() => { if (timers.delete(tid)) fn(...args); }, () => {}, "setTimeout"]);
    return tid;
  }
  function __cm_clearTimeout(tid) { timers.delete(tid); }
  __cm_define("setTimeout", __cm_setTimeout);
  __cm_define("clearTimeout", __cm_clearTimeout);

  function __cm_frames(error) {
    return String(error.stack || "").split("\n").filter((l) => /^\s*at /.test(l)).join("\n");
  }

  function __cm_describe(error) {
    if (error instanceof Error || (error && typeof error === "object" && "message" in error)) {
      return {
        name: String(error.name || "Error"),
        message: String(error.message),
        stack: typeof error.stack === "string" ? error.stack : "",
      };
    }
    return { name: "Error", message: `Uncaught ${__cm_render(error)}`, stack: "" };
  }

  function __cm_serialize(value) {
    if (value === undefined) return undefined;
    try {
      return parseJSON(stringify(value, __cm_replacer()) ?? "null");
    } catch (e) {
      try { return String(value); } catch (_) { return "[value that cannot be shown]"; }
    }
  }

  const host = {
    // The host channel above, to the first caller only (then null).
    hostChannel: function __cm_hostChannel() {
      const channel = hostChannel;
      hostChannel = null;
      return channel;
    },
    // Called by the host once the tool names and limits are known.
    // `namespaces` is optional: {NS: {NAME: registryName}} for tools called as tools.NS.NAME.
    configure: function __cm_configure(names, limit, namespaces, options) {
      maxCalls = limit;
      plainRejections = Boolean(options && options.plainRejections);
      toolMembers = new Map(names.map((n) => [n, n]));
      for (const [ns, members] of Object.entries(namespaces || {})) {
        if (!toolMembers.has(ns)) toolMembers.set(ns, new Map(Object.entries(members)));
      }
      toolRoot = __cm_toolbox("", toolMembers);
    },
    // A fresh program: forget the previous one's state but keep the globals.
    reset: function __cm_reset() {
      outbox = []; outboxText = ""; timerbox = []; logs = []; pending = new Map(); done = null;
      calls = 0;
      overLimit = false;
      timers.clear();
    },
    start: function __cm_start(promise) {
      promise.then(
        (value) => { done = { ok: true, value: __cm_serialize(value) }; },
        (error) => {
          try { done = { ok: false, error: __cm_describe(error) }; } catch (e) {
            done = { ok: false, error: { name: "Error", message: "a thrown value that cannot be shown", stack: "" } };
          }
        },
      );
    },
    // settle() with the results as JSON text, parsed with the JSON kept at install.
    settleText: function __cm_settleText(text) { host.settle(parseJSON(text)); },
    // Results arrive as [id, ok, payload]; payload is the value or the error message.
    settle: function __cm_settle(results) {
      // Indexed, not destructured: no iterator objects per result (and nothing a
      // program did to Array.prototype's iterator matters here).
      for (let i = 0; i < results.length; i++) {
        const result = results[i];
        const id = result[0], ok = result[1], payload = result[2];
        const entry = pending.get(id);
        if (entry === undefined) continue;
        pending.delete(id);
        if (ok) entry[0](payload);
        else if (plainRejections) entry[1](String(payload));
        else {
          const error = new ToolError(payload, entry[2]);
          if (entry[3]) error.stack = `ToolError: ${payload}\n${__cm_frames(entry[3])}`;
          entry[1](error);
        }
      }
    },
    drain: function __cm_drain() {
      // `live`: units of live console written this step; they come before `logs`.
      // No replacer: everything here is plain data already (ids, names, texts, and a
      // value that went through __cm_serialize), and a replacer call per entry is a
      // fifth of QuickJS's work for a tool call. (A program that tampers with
      // prototypes still gets a clean error: the host checks what arrives.)
      // The common state (new calls, nothing else) by hand, with `+` (a template
      // literal calls String.prototype.concat, which a program can replace), then
      // flattened: QuickJS-ng joins long strings as ropes, which its Python binding
      // cannot read.
      const state = timerbox.length === 0 && logs.length === 0 && done === null && !overLimit
        ? applyFn(concatString, '{"calls":[' + outboxText + '],"timers":[],"logs":[],' +
          '"done":null,"overLimit":false,"pending":' + pending.size + ',"live":' + liveAt +
          "}", [])
        : stringify({
          calls: outbox, timers: timerbox, logs, done, overLimit, pending: pending.size,
          live: liveAt,
        });
      outbox = [];
      outboxText = "";
      timerbox = [];
      logs = [];
      if (live !== null) {
        liveAt = 0;
        atomicStore(live.head, 0, 0);
      }
      return state;
    },
    // The inbox: a buffer the host writes tool results into (V8, whose host can write
    // the isolate's memory between evaluations), so that settling them is the same
    // script every time, compiled once, instead of a new script per settle. Int32 0 is
    // how many UTF-16 units of JSON text follow the 8-byte header. Only the first call
    // counts, as for the live console.
    inbox: function __cm_inbox(buffer) {
      if (inbox !== null) return null;
      inbox = { head: new Int32Array(buffer, 0, 2), units: new Uint16Array(buffer, 8) };
      return buffer;
    },
    settleInbox: function __cm_settleInbox() {
      const count = inbox === null ? 0 : inbox.head[0];
      let text = "";
      for (let at = 0; at < count; at += 8192) {
        const chunk = applyFn(subarray, inbox.units, [at, Math.min(count, at + 8192)]);
        text += applyFn(fromCharCode, null, chunk);
      }
      host.settle(parseJSON(text));
    },
    // The host's buffer for the live console (see __cm_toLive); returns it back.
    // Only the first call counts: the host reads the buffer it was given then, and a
    // later call must not make it read memory it no longer owns.
    live: function __cm_live(buffer) {
      if (atomicStore === null || live !== null) return null;
      live = { head: new Int32Array(buffer, 0, 2), units: new Uint16Array(buffer, 8) };
      return buffer;
    },
  };
  Object.freeze(host);
  __cm_define("__cm", host, false);
})(globalThis);
