// Varied, non-empty test texts for the USE-lite port (tokenizer parity, reference vs TF.js, and
// later the ONNX graph vs both). Kinds cover what a router sees and what stresses the port:
// clipping at 128 tokens, unknown symbols (merged runs), NFKC folding, ':' pieces whose
// vocabulary score is null, whitespace runs, every script the vocabulary barely knows.

export type TestSentenceKind =
  | 'short'
  | 'prose'
  | 'long'
  | 'code'
  | 'math'
  | 'non-english'
  | 'cjk'
  | 'emoji'
  | 'whitespace'
  | 'unknown'
  | 'nfkc'
  | 'punctuation';

export interface TestSentence {
  kind: TestSentenceKind;
  text: string;
}

const lorem =
  'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. ';
const story =
  'Once upon a time, in a small village at the edge of a vast forest, there lived an old clockmaker who repaired every clock in the valley. ';

const cases: Array<[TestSentenceKind, string]> = [
  // Short
  ['short', 'a'],
  ['short', 'I'],
  ['short', 'Hi'],
  ['short', 'hello world'],
  ['short', 'Hello World!'],
  ['short', 'HELLO WORLD'],
  ['short', 'yes'],
  ['short', 'No.'],
  ['short', 'ok?'],
  ['short', '42'],
  ['short', 'x'],
  ['short', 'Why?'],
  // Prose / questions a router sees
  ['prose', 'The quick brown fox jumps over the lazy dog.'],
  ['prose', 'How do I reset my password if I no longer have access to my email?'],
  ['prose', 'Summarize the following article in three bullet points.'],
  ['prose', 'Translate "good morning" into French, Spanish and German.'],
  ['prose', 'What is the capital of Australia, and why is it not Sydney?'],
  ['prose', 'Write a haiku about autumn leaves falling on a quiet pond.'],
  ['prose', "I'm sorry, but I can't help with that request. Let's try something else."],
  ['prose', 'Patient presents with a 3-day history of fever, cough and shortness of breath.'],
  ['prose', 'The court held that the contract was void for lack of consideration.'],
  ['prose', 'Compare the time complexity of quicksort and mergesort in the worst case.'],
  ['prose', 'Explain photosynthesis to a five-year-old.'],
  ['prose', 'Which of the following is a prime number? (A) 21 (B) 27 (C) 29 (D) 33'],
  ['prose', 'She said: "Meet me at 10:30 by the station; don\'t be late!"'],
  ['prose', 'Visit https://example.com/path?query=1&lang=en or email support@example.org.'],
  ['prose', 'Smile :) or frown :( or wink ;-) or grin :-) - emoticons everywhere.'],
  ['prose', 'The meeting moved from 12:00 to 14:30 on 2024-03-15 (UTC+01:00).'],
  ['prose', 'Mr. O\'Neill paid $1,234.56 for 3½ pounds of caviar - a 15% discount!'],
  ['prose', 'e.g. i.e. etc. vs. cf. et al. - abbreviations are common in papers.'],
  ['prose', 'Rate this movie from 1 to 10: "A masterpiece of modern cinema."'],
  ['prose', 'Can you recommend a good book about the history of mathematics?'],
  // Long (more than 128 tokens, so ClipToMaxLength matters), and near the limit
  ['long', lorem.repeat(3).trim()],
  ['long', lorem.repeat(12).trim()],
  ['long', story.repeat(6).trim()],
  ['long', story.repeat(20).trim()],
  ['long', 'word '.repeat(127).trim()],
  ['long', 'word '.repeat(128).trim()],
  ['long', 'word '.repeat(129).trim()],
  ['long', 'a b c d e f g h i j k l m n o p q r s t u v w x y z '.repeat(8).trim()],
  ['long', Array.from({ length: 300 }, (_, i) => `item${i}`).join(', ')],
  ['long', 'The history of the city begins in antiquity. '.repeat(15) + 'THE END'],
  // Code
  ['code', 'function add(a, b) { return a + b; }'],
  ['code', 'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)'],
  ['code', 'SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL \'7 days\' ORDER BY id;'],
  ['code', '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }'],
  ['code', 'const xs = [1, 2, 3].map((x) => x ** 2).filter(Boolean); // => [1, 4, 9]'],
  ['code', '<div class="card"><a href="/home">Home</a></div>'],
  ['code', '{"name": "fugu", "version": "0.1.0", "private": true, "deps": {"zod": "^4"}}'],
  ['code', 'git rebase -i HEAD~3 && git push --force-with-lease origin main'],
  ['code', 'fn main() { let v: Vec<u8> = vec![0xff; 16]; println!("{:?}", v); }'],
  ['code', 'for i in range(10):\n\tif i % 2 == 0:\n\t\tprint(i)'],
  ['code', 'x = np.linalg.solve(A.T @ A + lam * np.eye(n), A.T @ b)'],
  ['code', 'curl -sSL -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/items | jq \'.[0]\''],
  ['code', '/^(?:[a-z0-9!#$%&\'*+/=?^_`{|}~-]+)@[a-z]+\\.[a-z]{2,}$/i'],
  // Math
  ['math', '2 + 2 = 4'],
  ['math', 'Solve for x: 3x^2 - 5x + 2 = 0.'],
  ['math', '∫₀^∞ e^{-x²} dx = √π / 2'],
  ['math', '∀ε>0 ∃δ>0: |x−a|<δ ⇒ |f(x)−f(a)|<ε'],
  ['math', 'The derivative of sin(x) is cos(x), and d/dx e^x = e^x.'],
  ['math', '\\frac{a}{b} + \\sqrt{c^2 + d^2} \\leq \\sum_{i=1}^{n} x_i'],
  ['math', 'Let A ∈ ℝ^{n×n} be symmetric positive definite; then λ_min(A) > 0.'],
  ['math', '1/3 ≈ 0.333…, π ≈ 3.14159, e ≈ 2.71828, φ = (1 + √5) / 2'],
  ['math', 'P(A|B) = P(B|A) · P(A) / P(B)'],
  ['math', '7 × 8 = 56; 56 ÷ 7 = 8; 2³ = 8; x₁ + x₂ = −b/a'],
  // Non-English (Latin, Cyrillic, Greek, RTL, Indic, Thai, ...)
  ['non-english', 'Où est la bibliothèque ? Je voudrais emprunter un livre.'],
  ['non-english', 'Die Straßenbahn fährt über die Brücke; Grüße aus München!'],
  ['non-english', '¿Dónde está el baño? ¡Muchas gracias, señora!'],
  ['non-english', 'Não sei se vou conseguir chegar a tempo amanhã.'],
  ['non-english', 'Dziękuję bardzo za pomoc, to było bardzo miłe.'],
  ['non-english', 'Привет, как дела? Я изучаю машинное обучение.'],
  ['non-english', 'Γειά σου κόσμε! Η φιλοσοφία ξεκίνησε στην αρχαία Ελλάδα.'],
  ['non-english', 'مرحبا بالعالم، كيف حالك اليوم؟'],
  ['non-english', 'שלום עולם, מה שלומך?'],
  ['non-english', 'नमस्ते दुनिया, आप कैसे हैं?'],
  ['non-english', 'สวัสดีครับ ยินดีที่ได้รู้จัก'],
  ['non-english', 'Xin chào thế giới, hôm nay trời đẹp quá.'],
  ['non-english', 'Merhaba dünya! Bugün hava çok güzel.'],
  ['non-english', 'Hej världen, jag heter Åsa och bor i Göteborg.'],
  // CJK
  ['cjk', '你好，世界！今天天气很好。'],
  ['cjk', '机器学习是人工智能的一个分支。'],
  ['cjk', 'こんにちは、世界。今日はいい天気ですね。'],
  ['cjk', '東京タワーは1958年に完成しました。'],
  ['cjk', '안녕하세요, 세계! 오늘 날씨가 좋네요.'],
  ['cjk', 'ｶﾀｶﾅ と ひらがな と 漢字 の 混在'],
  ['cjk', '我爱北京天安门 and I love New York too'],
  // Emoji
  ['emoji', '😀'],
  ['emoji', 'I love pizza 🍕🍕🍕 so much!'],
  ['emoji', 'Family: 👨‍👩‍👧‍👦, flags: 🇫🇷🇯🇵, skin tones: 👍🏽👋🏿'],
  ['emoji', '🚀 Launch day! ✨🎉 Thanks everyone ❤️'],
  ['emoji', '🙂🙃😉😊😇🥰😍🤩😘😗☺️😚😙🥲😋😛😜🤪😝🤑🤗🤭'],
  // Whitespace
  ['whitespace', 'two  spaces'],
  ['whitespace', '   leading and trailing   '],
  ['whitespace', 'tabs\tand\nnewlines\r\nmixed'],
  ['whitespace', 'many          spaces          between          words'],
  ['whitespace', '\n\n\nparagraph one\n\n\nparagraph two\n\n\n'],
  ['whitespace', ' '],
  ['whitespace', '\t'],
  ['whitespace', 'non\u00a0breaking\u2003em\u2009thin\u3000ideographic spaces'],
  // Unknown characters (no vocabulary piece), alone and in runs
  ['unknown', '\ue000\ue001\ue002 private use'],
  ['unknown', 'control \u0001\u0002\u0007 chars'],
  ['unknown', '𝔘𝔫𝔨𝔫𝔬𝔴𝔫 𝔉𝔯𝔞𝔨𝔱𝔲𝔯'],
  ['unknown', '⿰⿱⿲ ideographic description'],
  ['unknown', 'ᚠᚢᚦᚨᚱᚲ runes and ᠮᠣᠩᠭᠣᠯ script'],
  ['unknown', '\u{1F9EC}\u{1FAE0}\u{1F6D7} new emoji and \u{10FFFD}'],
  ['unknown', 'zero\u200bwidth\u200cjoiner\u200dchars\ufeffbom'],
  // NFKC folding
  ['nfkc', 'ﬁnancial ﬂow ﬀ'],
  ['nfkc', 'ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３'],
  ['nfkc', '① ② ③ ⅰ ⅱ Ⅻ'],
  ['nfkc', 'x² + y³ = z⁴, H₂O, ㎏ ㎞ ℃ №'],
  ['nfkc', 'cafe\u0301 vs café, e\u0301\u0301'],
  ['nfkc', '…‥ ™ ℡ ㍻'],
  // Punctuation and symbols only
  ['punctuation', '...'],
  ['punctuation', '?!?!?!'],
  ['punctuation', '-----'],
  ['punctuation', '!!! ??? ... ,,, ;;; ::: ***'],
  ['punctuation', '@#$%^&*()_+-=[]{}|;\':",./<>?`~'],
  ['punctuation', '«» „“ ‘’ ‹› 「」 『』'],
];

export const USE_LITE_TEST_SENTENCES: readonly TestSentence[] = cases.map(([kind, text]) => ({ kind, text }));

/** The texts alone, in the same order. */
export const USE_LITE_TEST_TEXTS: readonly string[] = USE_LITE_TEST_SENTENCES.map((s) => s.text);

/**
 * Tokenizer-only edge cases (the model cannot embed some of them, e.g. '' - see tokenizer.ts):
 * empty and whitespace-only text, lone surrogates, the reserved pieces' spellings, pieces with
 * a null or positive vocabulary score, a duplicated piece.
 */
export const USE_LITE_TOKENIZER_EDGE_CASES: readonly string[] = [
  '',
  ' ',
  '  ',
  '\n',
  '\u2581',
  '\u2581\u2581word',
  '\ud800',
  'a\udc00b',
  '\ufffd',
  '<s> </s> <unk> extra_token_id_1',
  ':',
  '://',
  ':)',
  ':-)',
  ':( ):',
  ':30',
  ':00',
  '10:30',
  '”5',
  '”55 ”5”5',
  'a'.repeat(1000),
  '\ue000'.repeat(50),
  '\ue000a\ue000\ue001b',
];
