// @program
const files = (await tools.Glob({pattern: 'mods/*.py'})).matches;
const sizes = await Promise.all(files.map(async (f) => [f, (await tools.Read({file_path: f})).total_lines]));
sizes.sort((a, b) => b[1] - a[1]);
const top = sizes.slice(0, 3).map(([f]) => f);
await tools.Write({file_path: 'LARGEST.txt', content: top.join('\n') + '\n'});
console.log(top);
