// @program
const hits = await tools.Grep({pattern: '1\\.4\\.2', output_mode: 'content'});
const files = [...new Set(hits.matches.map((m) => m.path))];
for (const f of files) await tools.Edit({file_path: f, old_string: '1.4.2', new_string: '1.5.0'});
console.log('bumped', files);
