// How console.log shows values: Node's util.inspect conventions, so a model reads what
// it would read under Node. Evaluated before the prelude, which takes the formatter
// from globalThis.__cm_inspect and removes that name.
//
// Compact (up to three inner levels on one line when they fit in 80 columns), depth 2
// (deeper objects are `[Object]`, `[Array]`, `[Foo]`), 100 array items and 10,000
// characters of a string at most; `Map(1) { 'a' => 1 }`, `Set(1) { 1 }`, `/re/g`,
// `1n`, `undefined`, `[Function: f]`, `[class A]`, `<ref *1>` ... `[Circular *1]`,
// class names, Symbols, Dates, Errors (their stack in the program's own lines).
// Getters are never called: inspecting must not run the program's code.
(function __cm_inspect_install(global) {
  "use strict";

  const BREAK = 80;
  const DEPTH = 2;
  const COMPACT = 3;
  const MAX_ITEMS = 100;
  const MAX_STRING = 10000;
  // The runtime wraps the program in one line of its own (js_runtime/source.py).
  const WRAPPER_LINES = 1;

  const objectToString = Object.prototype.toString;
  const fnToString = Function.prototype.toString;
  const hasOwn = Object.prototype.hasOwnProperty;
  const IDENT = /^[A-Za-z_$][\w$]*$/;
  const ESCAPES = { "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f",
    "\v": "\\v", "\\": "\\\\" };

  function __cm_quote(s) {
    let q = "'";
    if (s.includes("'")) {
      if (!s.includes('"')) q = '"';
      else if (!s.includes("`") && !s.includes("${")) q = "`";
    }
    let out = "";
    for (const ch of s) {
      if (ch === q) out += "\\" + ch;
      else if (ESCAPES[ch]) out += ESCAPES[ch];
      else if (ch < " " || ch === "\x7f") out += "\\x" + ch.charCodeAt(0).toString(16).padStart(2, "0");
      else out += ch;
    }
    return q + out + q;
  }

  function __cm_string(s, nested) {
    let extra = "";
    if (s.length > MAX_STRING) {
      extra = `... ${s.length - MAX_STRING} more character${s.length - MAX_STRING > 1 ? "s" : ""}`;
      s = s.slice(0, MAX_STRING);
    }
    return (nested ? __cm_quote(s) : s) + extra;
  }

  function __cm_number(n) {
    return Object.is(n, -0) ? "-0" : String(n);
  }

  function __cm_key(key) {
    if (typeof key === "symbol") return `[${String(key)}]`;
    return IDENT.test(key) ? key : __cm_quote(key);
  }

  function __cm_fn_base(fn) {
    let source = "";
    try { source = fnToString.call(fn); } catch (e) { /* a proxy */ }
    const name = fn.name ? String(fn.name) : "";
    if (source.startsWith("class") && /^class\b/.test(source)) {
      const parent = Object.getPrototypeOf(fn);
      const ext = parent && parent.name ? ` extends ${parent.name}` : "";
      return `[class ${name || "(anonymous)"}${ext}]`;
    }
    const ctor = fn.constructor && fn.constructor.name;
    const kind = ctor === "AsyncFunction" || ctor === "GeneratorFunction" ||
      ctor === "AsyncGeneratorFunction" ? ctor : "Function";
    return `[${kind}${name ? ": " + name : " (anonymous)"}]`;
  }

  // The name an object is shown with: its constructor's, or a null-prototype mark.
  function __cm_prefix(value, fallback) {
    let proto;
    try { proto = Object.getPrototypeOf(value); } catch (e) { return fallback; }
    if (proto === null) return `[${fallback}: null prototype]`;
    let name = "";
    for (let p = proto; p !== null && !name; p = Object.getPrototypeOf(p)) {
      const desc = Object.getOwnPropertyDescriptor(p, "constructor");
      if (desc && typeof desc.value === "function" && desc.value.name) name = desc.value.name;
    }
    let tag = "";
    try { tag = value[Symbol.toStringTag]; } catch (e) { /* a throwing getter */ }
    name = name || fallback;
    return typeof tag === "string" && tag && tag !== name ? `${name} [${tag}]` : name;
  }

  // A stack as the program's own: frames of the runtime left out, lines shifted back
  // past the wrapper line.
  function __cm_stack(err) {
    let stack = "";
    try { stack = typeof err.stack === "string" ? err.stack : ""; } catch (e) { /* getter */ }
    const head = `${err.name || "Error"}: ${err.message}`;
    if (!stack) return head;
    const lines = stack.split("\n");
    const frames = [];
    for (const line of lines) {
      const m = /^\s*at (?:(.+?) \()?(?:<input>|program\.js):(\d+):(\d+)\)?\s*$/.exec(line);
      if (!m) continue;
      if (m[1] && (m[1].startsWith("__cm") || m[1].includes("ToolError"))) continue;
      const n = Number(m[2]) - WRAPPER_LINES;
      if (n < 1) continue;
      const fn = m[1] && !/^(<eval>|<anonymous>|async <anonymous>|eval)$/.test(m[1]) ? m[1] : "";
      frames.push(fn ? `    at ${fn} (program.js:${n}:${m[3]})` : `    at program.js:${n}:${m[3]}`);
    }
    const first = lines[0] && !/^\s*at /.test(lines[0]) ? lines[0] : head;
    return [first.includes(String(err.message)) ? first : head, ...frames].join("\n");
  }

  function __cm_entries(ctx, value, depth, skip) {
    // Own enumerable string keys (array indexes aside), then enumerable symbols.
    const out = [];
    let keys;
    try { keys = Object.keys(value); } catch (e) { return out; }
    for (const key of keys) {
      if (skip && skip(key)) continue;
      out.push(__cm_property(ctx, value, key, depth));
    }
    let symbols = [];
    try { symbols = Object.getOwnPropertySymbols(value); } catch (e) { /* proxy */ }
    for (const sym of symbols) {
      const desc = Object.getOwnPropertyDescriptor(value, sym);
      if (desc && desc.enumerable) out.push(__cm_property(ctx, value, sym, depth));
    }
    return out;
  }

  function __cm_property(ctx, value, key, depth) {
    const desc = Object.getOwnPropertyDescriptor(value, key) || { value: undefined };
    let shown;
    if (desc.get || desc.set) {
      shown = desc.get && desc.set ? "[Getter/Setter]" : desc.get ? "[Getter]" : "[Setter]";
    } else {
      shown = __cm_value(ctx, desc.value, depth + 1, true);
    }
    return `${__cm_key(key)}: ${shown}`;
  }

  function __cm_array_items(ctx, value, depth) {
    const out = [];
    const length = value.length;
    const shown = Math.min(length, MAX_ITEMS);
    let holes = 0;
    for (let i = 0; i < shown; i++) {
      if (!hasOwn.call(value, i)) {
        holes++;
        continue;
      }
      if (holes) {
        out.push(`<${holes} empty item${holes > 1 ? "s" : ""}>`);
        holes = 0;
      }
      out.push(__cm_value(ctx, value[i], depth + 1, true));
    }
    if (holes) out.push(`<${holes} empty item${holes > 1 ? "s" : ""}>`);
    if (length > shown) {
      out.push(`... ${length - shown} more item${length - shown > 1 ? "s" : ""}`);
    }
    return out;
  }

  // Node's grouping of many short array items into aligned columns.
  function __cm_group(ctx, output, value) {
    let total = 0;
    let max = 0;
    let i = 0;
    let count = output.length;
    if (count > MAX_ITEMS) count -= 1;  // the "... more items" line stays on its own
    const separatorSpace = 2;
    const lengths = [];
    for (; i < count; i++) {
      const len = output[i].length;
      lengths.push(len);
      total += len + separatorSpace;
      if (max < len) max = len;
    }
    const actualMax = max + separatorSpace;
    if (actualMax * 3 + ctx.indent < BREAK &&
        (total / actualMax > 5 || max <= 6)) {
      const averageBias = Math.sqrt(actualMax - total / output.length);
      const biasedMax = Math.max(actualMax - 3 - averageBias, 1);
      const columns = Math.min(
        Math.round(Math.sqrt(2.5 * biasedMax * count) / biasedMax),
        Math.floor((BREAK - ctx.indent) / actualMax),
        COMPACT * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLineLength = [];
      for (let c = 0; c < columns; c++) {
        let lineLength = 0;
        for (let j = c; j < output.length; j += columns) {
          if (lengths[j] > lineLength) lineLength = lengths[j];
        }
        maxLineLength.push(lineLength + separatorSpace);
      }
      const numbers = Array.isArray(value) && value.every(
        (v) => typeof v === "number" || typeof v === "bigint");
      for (let r = 0; r < count; r += columns) {
        const end = Math.min(r + columns, count);
        let line = "";
        let j = r;
        for (; j < end - 1; j++) {
          const padding = maxLineLength[j - r] + output[j].length - lengths[j];
          line += numbers ? `${output[j]}, `.padStart(padding, " ")
            : `${output[j]}, `.padEnd(padding, " ");
        }
        line += numbers
          ? output[j].padStart(maxLineLength[j - r] - separatorSpace, " ")
          : output[j];
        tmp.push(line);
      }
      if (output.length > count) tmp.push(output[count]);
      return tmp;
    }
    return output;
  }

  function __cm_join(ctx, output, base, braces, depth, isArray, value) {
    const entries = output.length;
    if (isArray && entries > 6) output = __cm_group(ctx, output, value);
    if (ctx.currentDepth - depth < COMPACT && entries === output.length) {
      const start = output.length + ctx.indent + braces[0].length + base.length + 10;
      let total = output.length + start;
      let fits = total + output.length <= BREAK;
      for (let i = 0; fits && i < output.length; i++) {
        total += output[i].length;
        if (total > BREAK) fits = false;
      }
      if (fits && !base.includes("\n")) {
        const joined = output.join(", ");
        if (!joined.includes("\n")) {
          return `${base ? base + " " : ""}${braces[0]} ${joined} ${braces[1]}`;
        }
      }
    }
    const pad = "\n" + " ".repeat(ctx.indent);
    return `${base ? base + " " : ""}${braces[0]}${pad}  ${output.join(`,${pad}  `)}${pad}${braces[1]}`;
  }

  function __cm_value(ctx, value, depth, nested) {
    switch (typeof value) {
      case "string": return __cm_string(value, nested);
      case "number": return __cm_number(value);
      case "bigint": return `${value}n`;
      case "boolean": return String(value);
      case "undefined": return "undefined";
      case "symbol": return String(value);
      default: break;
    }
    if (value === null) return "null";
    return __cm_object(ctx, value, depth);
  }

  function __cm_object(ctx, value, depth) {
    if (ctx.seen.includes(value)) {
      let index = ctx.circular.get(value);
      if (index === undefined) {
        index = ctx.circular.size + 1;
        ctx.circular.set(value, index);
      }
      return `[Circular *${index}]`;
    }
    const tag = objectToString.call(value);
    const isArray = Array.isArray(value);
    let base = "";
    let braces = ["{", "}"];
    let items = [];
    let skip = null;
    let kind = "Object";

    if (typeof value === "function") {
      base = __cm_fn_base(value);
      skip = (key) => key === "prototype";
      const props = Object.keys(value).filter((k) => k !== "prototype");
      if (props.length === 0) return base;
      kind = "Function";
    } else if (isArray) {
      const prefix = __cm_prefix(value, "Array");
      braces = [prefix === "Array" ? "[" : `${prefix}(${value.length}) [`, "]"];
      kind = "Array";
      skip = (key) => /^(0|[1-9]\d*)$/.test(key) && Number(key) < 2 ** 32 - 1;
    } else if (value instanceof Map || tag === "[object Map]") {
      braces = [`${__cm_prefix(value, "Map")}(${value.size}) {`, "}"];
      kind = "Map";
    } else if (value instanceof Set || tag === "[object Set]") {
      braces = [`${__cm_prefix(value, "Set")}(${value.size}) {`, "}"];
      kind = "Set";
    } else if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
      const prefix = __cm_prefix(value, "TypedArray");
      braces = [`${prefix}(${value.length}) [`, "]"];
      kind = "TypedArray";
      skip = (key) => /^(0|[1-9]\d*)$/.test(key);
    } else if (value instanceof RegExp || tag === "[object RegExp]") {
      base = RegExp.prototype.toString.call(value);
      if (Object.keys(value).length === 0) return base;
    } else if (value instanceof Date || tag === "[object Date]") {
      const time = Date.prototype.getTime.call(value);
      base = Number.isNaN(time) ? "Invalid Date" : Date.prototype.toISOString.call(value);
      if (Object.keys(value).length === 0) return base;
    } else if (value instanceof Error || tag === "[object Error]") {
      base = __cm_stack(value);
      skip = (key) => key === "stack" || key === "message";
      const props = Object.keys(value).filter((k) => !skip(k));
      if (props.length === 0) return depth > 0 && base.includes("\n") ? `[${base.split("\n")[0]}]` : base;
      if (depth > 0) base = `[${base.split("\n")[0]}]`;
    } else if (value instanceof Promise || tag === "[object Promise]") {
      return "Promise { <not awaited> }";
    } else if (value instanceof WeakMap || value instanceof WeakSet) {
      return `${__cm_prefix(value, "Weak")} { <items unknown> }`;
    } else if (value instanceof ArrayBuffer) {
      return `ArrayBuffer { byteLength: ${value.byteLength} }`;
    } else if (tag === "[object Number]" || tag === "[object String]" ||
      tag === "[object Boolean]" || tag === "[object BigInt]" || tag === "[object Symbol]") {
      const inner = value.valueOf();
      const shown = typeof inner === "string" ? __cm_quote(inner)
        : typeof inner === "bigint" ? `${inner}n` : String(inner);
      base = `[${tag.slice(8, -1)}: ${shown}]`;
      skip = typeof inner === "string" ? (key) => /^\d+$/.test(key) || key === "length" : null;
      const props = Object.keys(value).filter((k) => !skip || !skip(k));
      if (props.length === 0) return base;
    } else {
      const prefix = __cm_prefix(value, "Object");
      if (prefix !== "Object") braces = [`${prefix} {`, "}"];
      kind = prefix;
    }

    if (depth > DEPTH) {
      if (kind === "Array") return "[Array]";
      if (kind === "Function") return base;
      const name = braces[0].replace(/\s*[\[{]$/, "").replace(/\(\d+\)$/, "") || kind;
      return `[${name}]`;
    }

    ctx.seen.push(value);
    ctx.currentDepth = depth;
    const saved = ctx.indent;
    ctx.indent += 2;
    try {
      if (kind === "Array") items = __cm_array_items(ctx, value, depth);
      else if (kind === "TypedArray") {
        const shown = Math.min(value.length, MAX_ITEMS);
        for (let i = 0; i < shown; i++) {
          items.push(typeof value[i] === "bigint" ? `${value[i]}n` : __cm_number(value[i]));
        }
        if (value.length > shown) items.push(`... ${value.length - shown} more items`);
      } else if (kind === "Map") {
        let n = 0;
        for (const [k, v] of Map.prototype.entries.call(value)) {
          if (n++ >= MAX_ITEMS) { items.push(`... ${value.size - MAX_ITEMS} more items`); break; }
          items.push(`${__cm_value(ctx, k, depth + 1, true)} => ${__cm_value(ctx, v, depth + 1, true)}`);
        }
      } else if (kind === "Set") {
        let n = 0;
        for (const v of Set.prototype.values.call(value)) {
          if (n++ >= MAX_ITEMS) { items.push(`... ${value.size - MAX_ITEMS} more items`); break; }
          items.push(__cm_value(ctx, v, depth + 1, true));
        }
      }
      items = items.concat(__cm_entries(ctx, value, depth, skip));
    } finally {
      ctx.indent = saved;
      ctx.seen.pop();
    }
    let out;
    if (items.length === 0) {
      if (base) out = base.includes("\n") ? base : `${base} {}`;
      else out = `${braces[0]}${braces[1]}`;
      if (base && kind === "Function") out = base;
    } else {
      out = __cm_join(ctx, items, base, braces, depth, kind === "Array" || kind === "TypedArray", value);
    }
    const index = ctx.circular.get(value);
    if (index !== undefined) out = `<ref *${index}> ${out}`;
    return out;
  }

  function __cm_inspect(value) {
    const ctx = { seen: [], circular: new Map(), indent: 0, currentDepth: 0 };
    try {
      return __cm_value(ctx, value, 0, true);
    } catch (e) {
      try { return String(value); } catch (e2) { return "[object]"; }
    }
  }

  // console.log's arguments as Node joins them: strings as they are, everything else
  // inspected; a first string with %s %d %i %f %j %o %O %c %% is a format.
  function __cm_format(args) {
    const parts = [];
    let rest = 0;
    if (typeof args[0] === "string" && args.length > 1 && args[0].includes("%")) {
      const fmt = args[0];
      let next = 1;
      let out = "";
      for (let i = 0; i < fmt.length; i++) {
        const c = fmt[i];
        if (c !== "%" || i + 1 >= fmt.length) { out += c; continue; }
        const spec = fmt[i + 1];
        if (spec === "%") { out += "%"; i++; continue; }
        if (!"sdifjoOc".includes(spec) || next >= args.length) { out += c; continue; }
        const arg = args[next++];
        i++;
        if (spec === "s") {
          out += typeof arg === "string" ? arg : typeof arg === "bigint" ? `${arg}n`
            : typeof arg === "object" && arg !== null ? __cm_inspect(arg) : __cm_value({}, arg, 0, false);
        } else if (spec === "d") {
          out += typeof arg === "bigint" ? `${arg}n` : typeof arg === "object" ? "NaN" : __cm_number(Number(arg));
        } else if (spec === "i") {
          out += typeof arg === "bigint" ? `${arg}n` : __cm_number(parseInt(arg, 10));
        } else if (spec === "f") {
          out += __cm_number(parseFloat(arg));
        } else if (spec === "j") {
          try { out += JSON.stringify(arg); } catch (e) { out += "[Circular]"; }
        } else if (spec === "o" || spec === "O") {
          out += __cm_inspect(arg);
        }  // %c: CSS, consumed and not shown
      }
      parts.push(out);
      rest = next;
    }
    for (let i = rest; i < args.length; i++) {
      parts.push(typeof args[i] === "string" ? args[i] : __cm_inspect(args[i]));
    }
    return parts.join(" ");
  }

  Object.defineProperty(global, "__cm_inspect", {
    value: { inspect: __cm_inspect, format: __cm_format },
    writable: true,
    configurable: true,
    enumerable: false,
  });
})(globalThis);
