// Add a license header to every file of one type that lacks it.
//
//   interpreter run examples/add_license_header.js --cwd REPO [EXTENSION] [LICENSE]
//
// Idempotent: a file whose first lines already carry the header is skipped. A
// shebang line stays first. Comment syntax follows the extension.

const [extension = "py", license = "SPDX-License-Identifier: MIT"] = argv;
const ext = extension.replace(/^\./, "");
const styles = {
  py: ["# ", ""], sh: ["# ", ""], rb: ["# ", ""], toml: ["# ", ""], yaml: ["# ", ""],
  js: ["// ", ""], ts: ["// ", ""], go: ["// ", ""], rs: ["// ", ""], java: ["// ", ""],
  c: ["/* ", " */"], h: ["/* ", " */"], css: ["/* ", " */"],
};
const style = styles[ext];
if (!style) throw new Error(`no comment style known for .${ext} (known: ${Object.keys(styles).join(", ")})`);
const header = `${style[0]}${license}${style[1]}`;

const { matches } = await tools.glob({ pattern: `**/*.${ext}` });
const added = [];
for (const path of matches) {
  const { content } = await tools.read_file({ path });
  const lines = content.split("\n");
  if (lines.slice(0, 3).some((line) => line.trim() === header)) continue;
  const at = lines[0]?.startsWith("#!") ? 1 : 0;
  lines.splice(at, 0, header);
  await tools.write_file({ path, content: lines.join("\n") });
  added.push(path);
}

for (const path of added) console.log(`${path}: header added`);
console.log(`${added.length} of ${matches.length} .${ext} files changed`);
return { changed: added.length, total: matches.length };
