// @program
await tools.Edit({file_path: 'net/client.py', old_string: 'def request(url):\n    return (\'GET\', url)', new_string: 'def request(url, timeout):\n    return (\'GET\', url, timeout)'});
const hits = await tools.Grep({pattern: "request\\('/api",
  output_mode: 'content'});
for (const m of hits.matches) {
  const call = m.text.trim().replace('return ', '');
  await tools.Edit({file_path: m.path, old_string: call, new_string: call.replace(')', ', timeout=30)')});
}
const run = await tools.Bash({command: "python3 -c 'import jobs.job_0 as j; print(j.run())'"});
console.log(hits.matches.length, run.output.trim());
