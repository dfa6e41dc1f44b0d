// @program
const run = await tools.Bash({command: 'python3 tests/test_cart.py'});
console.log(run.exit_code, run.output.split('\n').slice(-3).join('\n'));
const hits = await tools.Grep({pattern: 'def apply_discount', output_mode: 'content'});
const file = hits.matches[0].path;
const src = await tools.Read({file_path: file});
console.log(file, src.content);
// @program
await tools.Edit({file_path: 'shop/pricing.py', old_string: 'percent / 10)', new_string: 'percent / 100)'});
const run = await tools.Bash({command: 'python3 tests/test_cart.py'});
console.log(run.exit_code, run.output.trim());
