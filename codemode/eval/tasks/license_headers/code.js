// @program
const all = (await tools.Glob({pattern: '**/*.py'})).matches;
const files = await Promise.all(all.map((f) => tools.Read({file_path: f})));
const missing = files.filter((f) => !f.content.startsWith('# SPDX'));
for (const f of missing) await tools.Write({file_path: f.path, content: '# SPDX-License-Identifier: MIT\n' + f.content});
console.log('added to', missing.length, 'of', all.length);
