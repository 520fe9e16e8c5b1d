//! The full-text leg's text handling (SPEC §10): how chunk text is fed to
//! FTS5 and how a user's query becomes an FTS5 query.
//!
//! FTS5's `unicode61` tokenizer keeps a run of Chinese or Japanese
//! characters as one token, so "猫" would never match "我的猫叫米索". The
//! indexed text therefore puts every CJK character on its own, and a CJK
//! query becomes phrases of adjacent characters. Query expansion keeps
//! only keywords (English and Chinese stop words dropped) and quotes every
//! one: the query is built from letters and digits only, so nothing a user
//! types can be an FTS5 syntax error.

/// Most keywords one query turns into; the rest of a long query is ignored.
const MAX_TERMS: usize = 32;
/// Longest keyword kept, in characters.
const MAX_TERM_CHARS: usize = 48;

/// Characters that FTS5 should see one at a time.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // Extensions B–F and supplements
}

/// The text stored in `chunks_fts` for a chunk: the chunk with spaces
/// around every CJK character.
pub fn index_text(text: &str) -> String {
    if !text.chars().any(is_cjk) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The keywords of a query: lower-cased words without stop words, and
/// CJK runs split at function characters.
pub fn keywords(query: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut all_words = Vec::new();
    let mut word = String::new();
    let mut cjk = String::new();
    let flush_word = |word: &mut String, words: &mut Vec<String>, all: &mut Vec<String>| {
        if !word.is_empty() {
            let w: String = word.chars().take(MAX_TERM_CHARS).collect();
            if !ENGLISH_STOP_WORDS.contains(&w.as_str()) && w.chars().count() > 1 {
                words.push(w.clone());
            }
            all.push(w);
            word.clear();
        }
    };
    for c in query.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut words, &mut all_words);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            if !cjk.is_empty() {
                words.extend(cjk_terms(&cjk));
                cjk.clear();
            }
            word.extend(c.to_lowercase());
        } else {
            flush_word(&mut word, &mut words, &mut all_words);
            if !cjk.is_empty() {
                words.extend(cjk_terms(&cjk));
                cjk.clear();
            }
        }
        if words.len() >= MAX_TERMS * 2 {
            break;
        }
    }
    flush_word(&mut word, &mut words, &mut all_words);
    if !cjk.is_empty() {
        words.extend(cjk_terms(&cjk));
    }
    // A query made only of stop words still searches for them.
    let mut chosen = if words.is_empty() { all_words } else { words };
    let mut seen = std::collections::HashSet::new();
    chosen.retain(|w| seen.insert(w.clone()));
    chosen.truncate(MAX_TERMS);
    chosen
}

/// Terms of a CJK run: split at function characters, then single
/// characters for one-character pieces and adjacent pairs otherwise (a
/// bigram matches a two-character word and every longer word it is in).
fn cjk_terms(run: &str) -> Vec<String> {
    let mut terms = Vec::new();
    for piece in run.split(|c: char| CHINESE_STOP_CHARS.contains(&c)) {
        let chars: Vec<char> = piece.chars().collect();
        match chars.len() {
            0 => {}
            1 => terms.push(chars[0].to_string()),
            _ => terms.extend(chars.windows(2).map(|w| format!("{}{}", w[0], w[1]))),
        }
    }
    terms
}

/// The FTS5 `MATCH` expression for a query, or `None` when it has no
/// searchable words. Every term is a quoted string or phrase joined by OR.
pub fn match_expression(query: &str) -> Option<String> {
    terms_expression(&keywords(query))
}

/// The `MATCH` expression for terms from [`keywords`].
pub fn terms_expression(terms: &[String]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<String> = terms
        .iter()
        .map(|t| {
            let spaced = index_text(t);
            let words: Vec<&str> = spaced.split_whitespace().collect();
            format!("\"{}\"", words.join(" ").replace('"', "\"\""))
        })
        .collect();
    Some(quoted.join(" OR "))
}

const ENGLISH_STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "know",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "remember",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "tell",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

const CHINESE_STOP_CHARS: &[char] = &[
    '的', '了', '是', '在', '吗', '呢', '吧', '啊', '和', '与', '或', '也', '都', '就', '还', '又',
    '把', '被', '给', '让', '从', '向', '对', '于', '为', '以', '之', '其', '这', '那', '哪', '什',
    '么', '怎', '谁', '我', '你', '他', '她', '它', '们', '个', '有', '没', '不', '很', '吗', '请',
    '告', '诉', '记', '得', '过', '着', '要', '会', '能', '可',
];

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn fts() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');",
        )
        .unwrap();
        for text in [
            "The cat is called Miso and likes tuna.",
            "我的猫叫米索，它喜欢吃金枪鱼。",
            "NEAR the river we keep a boat (blue).",
        ] {
            conn.execute("INSERT INTO t (text) VALUES (?1)", [index_text(text)])
                .unwrap();
        }
        conn
    }

    fn search(conn: &Connection, query: &str) -> rusqlite::Result<Vec<i64>> {
        let Some(expr) = match_expression(query) else {
            return Ok(vec![]);
        };
        let mut stmt = conn.prepare("SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY rank")?;
        stmt.query_map([expr], |r| r.get(0))?.collect()
    }

    #[test]
    fn hostile_queries_are_never_fts_syntax_errors() {
        let conn = fts();
        let long = "x(\"".repeat(3500);
        let hostile = [
            "\"",
            "\"\"\"",
            "NEAR(cat tuna, 2)",
            "cat NEAR tuna",
            "*",
            "cat*",
            "-cat",
            "- -",
            "((((",
            "cat)",
            "AND OR NOT",
            "col:cat",
            "text:cat",
            "^cat",
            "{text}: cat",
            "🐈‍⬛ 🐟",
            "😀",
            "'; DROP TABLE t; --",
            "\u{0}",
            "a\u{202e}b",
            long.as_str(),
            "NOT",
            "+",
        ];
        for q in hostile {
            let result = search(&conn, q);
            assert!(result.is_ok(), "{q:?}: {result:?}");
        }
        assert_eq!(search(&conn, "NEAR(cat tuna, 2)").unwrap()[0], 1);
        assert_eq!(search(&conn, "-cat").unwrap(), vec![1]);
    }

    #[test]
    fn ten_kilobyte_queries_are_bounded() {
        let q = "word ".repeat(2048) + &"猫".repeat(2000);
        let terms = keywords(&q);
        assert!(terms.len() <= MAX_TERMS);
        assert!(search(&fts(), &q).is_ok());
    }

    #[test]
    fn chinese_is_found_by_the_full_text_leg() {
        let conn = fts();
        assert_eq!(search(&conn, "我的猫叫什么名字？").unwrap(), vec![2]);
        assert_eq!(search(&conn, "金枪鱼").unwrap(), vec![2]);
        assert_eq!(search(&conn, "猫").unwrap(), vec![2]);
    }

    #[test]
    fn english_stop_words_are_dropped_but_a_stop_word_query_still_searches() {
        assert_eq!(keywords("What is my cat called?"), vec!["cat", "called"]);
        assert_eq!(keywords("the"), vec!["the"]);
        assert_eq!(keywords("Miso's TUNA"), vec!["miso", "tuna"]);
        assert_eq!(search(&fts(), "what does the cat like").unwrap(), vec![1]);
    }

    #[test]
    fn cjk_terms_are_bigrams_split_at_function_characters() {
        assert_eq!(keywords("我的猫叫什么名字"), vec!["猫叫", "名字"]);
        assert_eq!(
            match_expression("金枪鱼").unwrap(),
            "\"金 枪\" OR \"枪 鱼\""
        );
    }
}
