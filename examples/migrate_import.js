// Move callers from one module to another: Python and JavaScript import forms.
//
//   interpreter run examples/migrate_import.js --cwd REPO [OLD_MODULE] [NEW_MODULE]
//
// Python: `from OLD import x`, `import OLD`, `import OLD as y`, and `OLD.attr` uses.
// JavaScript: `from "OLD"` and `require("OLD")`. The old module's own file is untouched.

const [oldModule = "shop.legacy_utils", newModule = "shop.text"] = argv;
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const old = esc(oldModule);

const rules = [
  [new RegExp(`^(\\s*from\\s+)${old}(\\s+import\\b)`, "gm"), `$1${newModule}$2`],
  [new RegExp(`^(\\s*import\\s+)${old}(\\s+as\\b|\\s*$)`, "gm"), `$1${newModule}$2`],
  // After a plain `import OLD`, the code says OLD.attr: those uses move too.
  [new RegExp(`(?<![\\w.])${old}(\\.\\w)`, "g"), `${newModule}$1`],
  [new RegExp(`(\\bfrom\\s+["'])${old}(["'])`, "g"), `$1${newModule}$2`],
  [new RegExp(`(\\brequire\\(\\s*["'])${old}(["']\\s*\\))`, "g"), `$1${newModule}$2`],
];

const hits = await tools.grep({ pattern: old, max_results: 100000 });
const files = [...new Set(hits.matches.map((m) => m.path))];
const oldFile = oldModule.replaceAll(".", "/") + ".py";
const report = [];

for (const path of files) {
  if (path.endsWith(oldFile)) continue;
  const { content } = await tools.read_file({ path });
  let updated = content;
  let count = 0;
  for (const [pattern, replacement] of rules) {
    updated = updated.replace(pattern, (...m) => {
      count++;
      return replacement.replace(/\$(\d)/g, (_, i) => m[Number(i)]);
    });
  }
  if (count === 0) continue;
  await tools.write_file({ path, content: updated });
  report.push({ path, count });
}

for (const { path, count } of report) console.log(`${path}: ${count} import(s) migrated`);
console.log(`${oldModule} -> ${newModule}: ${report.length} files changed`);
return report;
