// @program
const hits = await tools.Grep({pattern: '\\.warn\\(', output_mode: 'content'});
const files = [...new Set(hits.matches.map((m) => m.path))];
await Promise.all(files.map((f) => tools.Edit({file_path: f, old_string: 'log.warn(', new_string: 'log.warning(', replace_all: true})));
const check = await tools.Bash({command:
  'python3 -m compileall -q svc && echo ok'});
console.log(files.length, check.output.trim());
