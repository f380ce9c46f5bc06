// data_prep/oracle_gpt2.js: independent GPT-2 BPE oracle for the tests.
//   node data_prep/oracle_gpt2.js MODULE_DIR FILE  > ids.txt
// Prints the token ids of FILE (read as UTF-8) one per line, computed by the npm package
// gpt-3-encoder's encode() (MODULE_DIR = .../node_modules/gpt-3-encoder). No EOT is added.
// encode() concatenates arrays in a loop (quadratic on big inputs), so the text is fed to it
// in pieces cut only where GPT-2's pre-tokeniser always cuts: before a space or newline that
// follows a printable non-space ASCII character. This does not change the result.
'use strict';
const fs = require('fs');
const path = require('path');

if (process.argv.length !== 4) {
  process.stderr.write('usage: node oracle_gpt2.js MODULE_DIR FILE\n');
  process.exit(2);
}
const { encode } = require(path.resolve(process.argv[2]));
const text = fs.readFileSync(process.argv[3], 'utf8');

const out = [];
const piece = 4096;
let start = 0;
while (start < text.length) {
  let end = Math.min(start + piece, text.length);
  // move end forward to a safe cut (or the end of the text)
  while (end < text.length) {
    const c = text[end], p = text.charCodeAt(end - 1);
    if ((c === ' ' || c === '\n') && p > 0x20 && p < 0x7f) break;
    end++;
  }
  for (const id of encode(text.slice(start, end))) out.push(id);
  start = end;
}
process.stdout.write(out.length ? out.join('\n') + '\n' : '');
