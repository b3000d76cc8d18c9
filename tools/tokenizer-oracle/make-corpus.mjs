// Writes src/test/resources/tokenizer/corpus-generated.txt: LINES lines of generated text that oracle.mjs encodes
// after corpus.txt (the hand-written part), so that the tokenizer tests cover far more than a hand-written file
// can: words of 40 scripts, every kind of whitespace run, code, numbers in many digit systems, emoji sequences
// (skin tones, ZWJ families, flags, keycaps), decomposed and compatibility characters (NFC at work), contractions
// and special-token look-alikes. Deterministic (a seeded generator): `node make-corpus.mjs` rewrites the same file.
// Every line is valid UTF-8 without "\n"; a "\r" may occur inside a line, as in corpus.txt.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const LINES = 1200;
const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "..", "src", "test", "resources", "tokenizer", "corpus-generated.txt");

// mulberry32: a small seeded generator, so the file is the same on every run and every node version
let state = 20261123;
function random() {
  state = (state + 0x6d2b79f5) | 0;
  let t = Math.imul(state ^ (state >>> 15), 1 | state);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1)); // lo..hi inclusive
const pick = (items) => items[Math.floor(random() * items.length)];
const cp = (code) => String.fromCodePoint(code);
const fromRange = ([lo, hi]) => cp(int(lo, hi));

// letters of each script (assigned code points only, so that every character is a real letter or mark)
const SCRIPTS = {
  latin: [[0x61, 0x7a]], latinUpper: [[0x41, 0x5a]], latinExtended: [[0xe0, 0xff], [0x100, 0x17f]],
  vietnamese: [[0x1ea0, 0x1ef9]], greek: [[0x3b1, 0x3c9]], greekUpper: [[0x391, 0x3a9]], cyrillic: [[0x430, 0x44f]],
  cyrillicUpper: [[0x410, 0x42f]], armenian: [[0x561, 0x586]], hebrew: [[0x5d0, 0x5ea]], arabic: [[0x627, 0x64a]],
  persianUrdu: [[0x67e, 0x67e], [0x686, 0x686], [0x6a9, 0x6a9], [0x6af, 0x6af], [0x6cc, 0x6cc], [0x6ba, 0x6ba]],
  syriac: [[0x710, 0x72c]], thaana: [[0x780, 0x7a5]], devanagari: [[0x905, 0x939], [0x93e, 0x94c]],
  bengali: [[0x985, 0x9b9]], gurmukhi: [[0xa05, 0xa0a], [0xa15, 0xa28]], gujarati: [[0xa85, 0xa8d], [0xa95, 0xaa8]],
  tamil: [[0xb85, 0xb8a], [0xb95, 0xb95], [0xba4, 0xba4], [0xbae, 0xbb9]], telugu: [[0xc05, 0xc0c], [0xc15, 0xc28]],
  kannada: [[0xc85, 0xc8c], [0xc95, 0xca8]], malayalam: [[0xd05, 0xd0c], [0xd15, 0xd28]], sinhala: [[0xd85, 0xd96]],
  thai: [[0xe01, 0xe2e], [0xe30, 0xe39]], lao: [[0xe81, 0xe82], [0xe94, 0xe97], [0xea1, 0xea3]],
  tibetan: [[0xf40, 0xf47], [0xf49, 0xf6a]], myanmar: [[0x1000, 0x102a]], georgian: [[0x10d0, 0x10f0]],
  hangulJamo: [[0x1100, 0x1112], [0x1161, 0x1175]], ethiopic: [[0x1200, 0x1248]], cherokee: [[0x13a0, 0x13f4]],
  khmer: [[0x1780, 0x17a2]], mongolian: [[0x1820, 0x1842]], hiragana: [[0x3041, 0x3096]],
  katakana: [[0x30a1, 0x30fa]], bopomofo: [[0x3105, 0x312f]], cjk: [[0x4e00, 0x9fa5]], hangul: [[0xac00, 0xd7a3]],
  yi: [[0xa000, 0xa48c]], runic: [[0x16a0, 0x16ea]], ogham: [[0x1681, 0x169a]], canadian: [[0x1401, 0x166c]],
  gothic: [[0x10330, 0x1034a]], cuneiform: [[0x12000, 0x1206f]], mathBold: [[0x1d400, 0x1d433]],
  fullwidth: [[0xff21, 0xff3a], [0xff41, 0xff5a]],
};
const COMBINING = [[0x300, 0x36f]]; // accents that NFC composes onto their base where a composed letter exists
const DIGITS = [0x30, 0x660, 0x6f0, 0x966, 0x9e6, 0xe50, 0xff10, 0x1d7ce, 0x0f20, 0x1040]; // zero of each system
const SPACES = [" ", "  ", "   ", "    ", "        ", "\t", "\t\t", " \t ", "\u00a0", "\u2002", "\u2003", "\u2009",
  "\u3000", "\u200b", " \r ", "\r", "\u202f", "\u2028"];
const PUNCT = [".", ",", "!", "?", ";", ":", "...", "…", "—", "–", "-", "«", "»", "“", "”", "„", "‘", "’", "'", "\"",
  "(", ")", "[", "]", "{", "}", "¿", "¡", "。", "、", "！", "？", "：", "「", "」", "『", "』", "《", "》", "؟", "،", "।",
  "॥", "·", "•", "※", "§", "¶", "†", "‡", "©", "®", "™", "°", "%", "‰", "&", "@", "#", "*", "/", "\\", "|", "~", "^"];
const SYMBOLS = ["€", "$", "£", "¥", "₹", "₩", "₿", "∑", "∫", "√", "∞", "≈", "≠", "≤", "≥", "±", "×", "÷", "→", "⇒",
  "↔", "∀", "∃", "∈", "∅", "∇", "ℝ", "ℕ", "½", "¾", "⅓", "²", "³", "ⁿ", "₀", "₁", "①", "②", "Ⅻ", "ﬁ", "ﬂ", "Å", "K",
  "µ", "ſ", "ß", "ẞ", "İ", "ı", "ǅ", "♠", "♥", "★", "☆", "✓", "✗", "█", "░", "─", "│", "┌", "┘", "⠁", "⠃"];
const EMOJI = ["😀", "😂", "🥲", "🤔", "🙏", "👍", "👎", "🔥", "🎉", "💯", "🚀", "🌍", "🍕", "🐍", "🦀", "☕", "❤", "✨",
  "⭐", "⚡", "☀", "❄", "✈", "⌚", "🧑‍💻", "👩‍👩‍👧‍👦", "👨‍❤️‍👨", "🏳️‍🌈", "🏴‍☠️", "👋🏽", "👍🏿", "🤝🏻", "🧔🏾‍♂️",
  "❤️", "☺️", "✌️", "1️⃣", "#️⃣", "*️⃣", "🇫🇷", "🇯🇵", "🇧🇷", "🇺🇳", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🫠", "🪿"];
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "’s",
  "n't", "N'T", "'"];
const SPECIAL_LOOKALIKES = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>", "<|eot_id|>",
  "<|begin_of_text|>", "<think>", "</think>", "<|fim_prefix|>", "< s >", "<|im_start|", "[INST]", "[/INST]", "<<SYS>>",
  "<0x0A>", "▁", "Ġ", "Ċ", "<|reserved_special_token_5|>"];
const KEYWORDS = ["def", "class", "return", "import", "from", "public", "static", "void", "fn", "let", "mut", "const",
  "function", "async", "await", "if", "else", "for", "while", "match", "struct", "impl", "SELECT", "FROM", "WHERE",
  "lambda", "yield", "#include", "#define", "template", "typename", "nullptr", "None", "True", "undefined"];
const OPERATORS = ["==", "!=", "===", "!==", "<=", ">=", "=>", "->", "::", "&&", "||", "<<", ">>", ">>>", ">>=", "+=",
  "-=", "*=", "/=", "**", "//", "%", "&", "|", "^", "~", "!", "?", "?.", "??", "..", "...", "..=", "@", "$", "#{", "}}",
  "/*", "*/", "<!--", "-->", "\\n", "\\t", "\\\\", "\\\"", "0x", "0b", "1e-9", "f32", "u8"];

function word(script) {
  const ranges = SCRIPTS[script];
  let w = "";
  const n = int(1, random() < 0.05 ? 40 : 8);
  for (let i = 0; i < n; i++) {
    w += fromRange(pick(ranges));
    if (script.startsWith("latin") && random() < 0.08) w += fromRange(COMBINING[0]); // decomposed accents
  }
  return w;
}

function number() {
  const zero = random() < 0.7 ? 0x30 : pick(DIGITS);
  let s = "";
  const n = pick([1, 1, 2, 3, 4, 5, 7, 10, 16]);
  for (let i = 0; i < n; i++) s += cp(zero + int(0, 9));
  if (random() < 0.2) s += pick([".", ",", "'", "_"]) + cp(zero + int(0, 9)) + cp(zero + int(0, 9));
  if (random() < 0.1) s = pick(["-", "+", "−", "$", "€", "#", "v", "x"]) + s;
  if (random() < 0.1) s += pick(["%", "px", "ms", "GiB", "th", "e10", "k", "°C", "€"]);
  return s;
}

function identifier() {
  const parts = [];
  for (let i = int(1, 4); i > 0; i--) parts.push(word("latin").slice(0, int(1, 8)));
  const style = pick(["snake", "camel", "pascal", "kebab", "screaming", "dotted"]);
  const cap = (p) => p.charAt(0).toUpperCase() + p.slice(1);
  switch (style) {
    case "snake": return parts.join("_");
    case "camel": return parts[0] + parts.slice(1).map(cap).join("");
    case "pascal": return parts.map(cap).join("");
    case "kebab": return parts.join("-");
    case "screaming": return parts.join("_").toUpperCase();
    default: return parts.join(".") + (random() < 0.5 ? "()" : "");
  }
}

function code() {
  const pieces = [];
  const indent = pick(["", "    ", "        ", "\t", "\t\t", "  "]);
  for (let i = int(3, 10); i > 0; i--) {
    const r = random();
    if (r < 0.25) pieces.push(pick(KEYWORDS));
    else if (r < 0.5) pieces.push(identifier());
    else if (r < 0.7) pieces.push(pick(OPERATORS));
    else if (r < 0.8) pieces.push(number());
    else if (r < 0.9) pieces.push(JSON.stringify(word(pick(Object.keys(SCRIPTS)))));
    else pieces.push(pick(["(", ")", "{", "}", "[", "]", ";", ",", ":", "<", ">", "`", "'", "\""]));
  }
  const glue = pick(["", " ", " ", " ", "  "]);
  return indent + pieces.join(glue) + (random() < 0.3 ? pick([";", " {", ":", " // " + word("latin"), " # TODO"]) : "");
}

function prose() {
  const script = pick(Object.keys(SCRIPTS));
  const words = [];
  for (let i = int(2, 12); i > 0; i--) {
    let w = random() < 0.85 ? word(script) : word(pick(Object.keys(SCRIPTS)));
    if (random() < 0.1) w += pick(CONTRACTIONS);
    if (random() < 0.08) w = w.toUpperCase();
    if (random() < 0.12) w += pick(PUNCT);
    words.push(w);
  }
  const sep = pick([" ", " ", " ", "", "\u3000", "  "]);
  return words.join(sep);
}

function mixed() {
  const pieces = [];
  for (let i = int(3, 14); i > 0; i--) {
    const r = random();
    if (r < 0.3) pieces.push(word(pick(Object.keys(SCRIPTS))));
    else if (r < 0.45) pieces.push(number());
    else if (r < 0.58) pieces.push(pick(EMOJI) + (random() < 0.3 ? pick(EMOJI) : ""));
    else if (r < 0.68) pieces.push(pick(SYMBOLS));
    else if (r < 0.78) pieces.push(pick(PUNCT));
    else if (r < 0.86) pieces.push(pick(SPACES));
    else if (r < 0.92) pieces.push(pick(SPECIAL_LOOKALIKES));
    else pieces.push(pick(CONTRACTIONS));
  }
  return pieces.join(pick(["", " ", " ", pick(SPACES)]));
}

function whitespace() {
  let s = "";
  for (let i = int(1, 6); i > 0; i--) s += pick(SPACES) + (random() < 0.6 ? word(pick(["latin", "cjk", "arabic"])) : "");
  return random() < 0.3 ? s + pick(SPACES) : s;
}

const kinds = [prose, prose, prose, code, code, mixed, mixed, whitespace];
const lines = [];
for (let i = 0; i < LINES; i++) {
  let line = pick(kinds)();
  if (random() < 0.05) line = line.repeat(int(2, 4)); // repeated text: long merges
  lines.push(line.replaceAll("\n", " "));
}
writeFileSync(out, lines.join("\n") + "\n");
console.log(`${LINES} lines, ${lines.reduce((n, l) => n + [...l].length, 0)} characters written to ${out}`);
