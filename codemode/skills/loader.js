// Skill helpers for code-mode programs: `const h = await skills.require("skill", "helper")`.
// A helper is a CommonJS-style file: it assigns to `module.exports` (or `exports.x`) and
// may use `tools`. Its source comes through the load_skill tool, so loading is a normal,
// reported tool call; the module is then evaluated with `new Function` in this isolate,
// with the same (lack of) authority as the program. Loaded modules are cached per isolate.
(function __cm_skills_install(global) {
  "use strict";
  const cache = new Map();
  async function __cm_skill_require(skill, helper) {
    if (typeof skill !== "string" || typeof helper !== "string") {
      throw new TypeError("skills.require(skill, helper): both must be strings");
    }
    const key = `${skill}/${helper.replace(/\.js$/, "")}`;
    if (!cache.has(key)) {
      const loaded = await tools.load_skill({ name: skill, helper });
      const module = { exports: {} };
      const body = `${loaded.source}\n//# sourceURL=${loaded.path}`;
      new Function("module", "exports", "tools", body)(module, module.exports, tools);
      cache.set(key, module.exports);
    }
    return cache.get(key);
  }
  Object.defineProperty(global, "skills", {
    value: Object.freeze({ require: __cm_skill_require }),
    writable: false,
    configurable: true,
  });
})(globalThis);
