// The globals Codex's `exec` description promises a program, on top of the runtime's
// prelude (evaluated after it, once per isolate). The host hears them on the runtime's
// typed channel out of a program, `__cm.hostChannel()`, taken into this closure (it is
// handed out once: the runtime takes it after this, before any program runs): the kinds are
// this host's own ("text", "image" (JSON), "notify", "store" (JSON [key, value JSON]),
// "yield"), and Codex's programs have no console (`console` and `print` go).
// `__codex` (set by the host just before this runs): {store: {values, sizes, limit},
// tools: [{name, description}], exitName}.
(function __cm_codex(global, config) {
  "use strict";
  const stringify = JSON.stringify;
  const parseJSON = JSON.parse;
  const send = global.__cm.hostChannel();
  for (const name of ["console", "print", "__codex"]) {
    try { delete global[name]; } catch (e) { /* left as is */ }
  }
  function __cm_define(name, value) {
    Object.defineProperty(global, name, { value, writable: true, configurable: true });
  }
  // text(): strings as they are, anything else through JSON.stringify when it can.
  function __cm_stringify(value) {
    if (typeof value === "string") return value;
    try {
      const json = stringify(value);
      if (json !== undefined) return json;
    } catch (e) { /* below */ }
    return String(value);
  }
  __cm_define("text", function text(value) { send("text", __cm_stringify(value)); });
  __cm_define("notify", function notify(value) { send("notify", __cm_stringify(value)); });

  const DETAILS = ["auto", "low", "high", "original"];
  function __cm_image(item, detail) {
    let url;
    let chosen = null;
    if (typeof item === "string") {
      url = item;
    } else if (item && typeof item === "object" && typeof item.image_url === "string") {
      url = item.image_url;
      chosen = item.detail ?? null;
    } else if (item && typeof item === "object" && item.type === "image"
               && typeof item.data === "string") {
      // An MCP ImageContent block.
      url = `data:${item.mimeType || "image/png"};base64,${item.data}`;
      const meta = item._meta;
      chosen = (meta && meta["codex/imageDetail"]) ?? null;
    } else {
      throw new TypeError("image() expects a data: URL, {image_url, detail?} or an MCP ImageContent block");
    }
    if (detail !== undefined) chosen = detail;
    if (chosen !== null && !DETAILS.includes(chosen)) {
      throw new TypeError(`image(): detail must be one of ${DETAILS.join(", ")}`);
    }
    if (/^https?:/i.test(url)) throw new TypeError("image(): HTTP(S) URLs are not supported; pass a data: URL");
    send("image", stringify({ image_url: url, detail: chosen }));
  }
  __cm_define("image", __cm_image);

  // store/load: the session's values, as they stood when this exec started, plus what
  // this program stores (which the host keeps for later execs), within the session's
  // bound in characters of keys and JSON text (the host's session/store.py).
  const kept = config.store || { values: {}, sizes: {}, limit: Infinity };
  const stored = new Map(Object.entries(kept.values));
  const sizes = new Map(Object.entries(kept.sizes));
  let storedChars = 0;
  for (const size of sizes.values()) storedChars += size;
  __cm_define("store", function store(key, value) {
    if (typeof key !== "string") throw new TypeError("store(key, value): key must be a string");
    const json = stringify(value === undefined ? null : value);
    const size = key.length + json.length;
    const total = storedChars - (sizes.get(key) || 0) + size;
    if (total > kept.limit) {
      throw new RangeError(
        `store(): the session's stored values would hold ${total} characters, past its `
        + `bound of ${kept.limit} (${kept.limit / 1048576} Mi): nothing was stored; store less, `
        + "or replace a value");
    }
    stored.set(key, parseJSON(json));
    sizes.set(key, size);
    storedChars = total;
    send("store", stringify([key, json]));
  });
  __cm_define("load", function load(key) {
    if (!stored.has(String(key))) return undefined;
    return parseJSON(stringify(stored.get(String(key))));
  });

  __cm_define("yield_control", function yield_control() { send("yield", ""); });

  // exit(): ends the program successfully, however deep it is called.
  class __CodexExit extends Error {}
  const exitSignal = new __CodexExit("exit");
  exitSignal.name = config.exitName;
  __cm_define("exit", function exit() { throw exitSignal; });

  const all = Object.freeze((config.tools || []).map((t) => Object.freeze({ ...t })));
  __cm_define("ALL_TOOLS", all);
})(globalThis, globalThis.__codex);
