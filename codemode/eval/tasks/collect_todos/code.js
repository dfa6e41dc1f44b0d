// @program
const hits = await tools.Grep({pattern: 'TODO', output_mode: 'content'});
const items = hits.matches.map((m) => `- ${m.path}:${m.line}: ${m.text.split('TODO:')[1].trim()}`);
await tools.Write({file_path: 'TODO.md', content: `# TODOs\n\n${items.join('\n')}\n`});
console.log(items.length, 'items');
