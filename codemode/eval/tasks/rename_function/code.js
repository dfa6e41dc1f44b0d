// @program
const hits = await tools.Grep({pattern: 'fetch_data', output_mode: 'content'});
const files = [...new Set(hits.matches.map((m) => m.path))];
await Promise.all(files.map((f) => tools.Edit({file_path: f, old_string: 'fetch_data', new_string: 'load_data', replace_all: true})));
const left = await tools.Grep({pattern: 'fetch_data'});
console.log(`renamed in ${files.length} files; ${left.matches.length} left`);
