// Rename an identifier across a repository, whole words only.
//
//   interpreter run examples/rename_identifier.js --cwd REPO OLD_NAME NEW_NAME [GLOB]
//
// Files ignored by .gitignore are left alone. Prints each file it changed.

const [oldName = "calc_total", newName = "compute_total", fileGlob = null] = argv;
if (!/^[A-Za-z_$][\w$]*$/.test(oldName) || !/^[A-Za-z_$][\w$]*$/.test(newName)) {
  throw new Error(`both names must be identifiers, got "${oldName}" and "${newName}"`);
}

// `$` is legal in JS identifiers and special in regexes and replacement strings.
const escaped = oldName.replace(/\$/g, "\\$");
const word = new RegExp(`(?<![\\w$])${escaped}(?![\\w$])`, "g");
const hits = await tools.grep({ pattern: escaped, glob: fileGlob, max_results: 100000 });
const files = [...new Set(hits.matches.map((m) => m.path))];

let total = 0;
const changed = [];
await Promise.all(files.map(async (path) => {
  const { content } = await tools.read_file({ path });
  const count = (content.match(word) || []).length;
  if (count === 0) return;
  await tools.write_file({ path, content: content.replace(word, () => newName) });
  total += count;
  changed.push({ path, count });
}));

changed.sort((a, b) => a.path.localeCompare(b.path));
for (const { path, count } of changed) console.log(`${path}: ${count} replaced`);
console.log(`renamed ${oldName} -> ${newName}: ${total} occurrences in ${changed.length} files`);
return { files: changed.length, occurrences: total };
