// @program
const run = await tools.Bash({command: 'python3 tests/test_app.py'});
console.log(run.exit_code, run.output.split('\n').slice(-2).join('\n'));
const hits = await tools.Grep({pattern: 'max_items', output_mode: 'content'});
console.log(hits.matches.map((m) => `${m.path}:${m.line}`).join('\n'));
// @program
const hits = await tools.Grep({pattern: 'max_items', output_mode: 'files_with_matches'});
const files = hits.files ?? [...new Set(hits.matches.map((m) => m.path))];
await Promise.all(files.map((f) => tools.Edit({file_path: f, old_string: 'settings["max_items"]', new_string: 'settings["limit"]', replace_all: true})));
const run = await tools.Bash({command: 'python3 tests/test_app.py'});
console.log(files.length, run.exit_code, run.output.trim());
