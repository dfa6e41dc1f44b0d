// @program
const run = await tools.Bash({command: 'python3 test_calc.py'});
console.log(run.exit_code, run.output.split('\n').slice(-3).join('\n'));
const hits = await tools.Grep({pattern: 'def add', path: 'calc.py', output_mode: 'content'});
const src = await tools.Read({file_path: 'calc.py', limit: 3});
console.log(src.content);
// @program
await tools.Edit({file_path: 'calc.py', old_string: 'return a - b', new_string: 'return a + b'});
const run = await tools.Bash({command: 'python3 test_calc.py'});
console.log(run.exit_code, run.output.trim());
