//! A memory index of a given size for the benches that need one present
//! (`pincer-startup`, the idle-RSS bench's index): notes written into a
//! workspace as `memory/topic-NNN.md` files whose every section (a heading
//! and about 700 characters of generated prose) is one chunk, and a wait
//! until a pincerd has indexed them all with vectors (through the
//! model-free [`crate::embeddings::Embeddings`] endpoint, seconds for
//! 10,000 chunks).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::load::Daemon;

/// Sections (chunks) per notes file.
pub const SECTIONS_PER_FILE: usize = 100;

/// Prose for the notes: words from a fixed syllable set, seeded.
pub struct Prose(pub u64);

impl Prose {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn word(&mut self) -> String {
        const SYLLABLES: [&str; 24] = [
            "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "ba", "di", "fo", "gu", "ha",
            "je", "pa", "qui", "ro", "su", "te", "ul", "ver", "wo", "yan",
        ];
        let n = 1 + self.next() % 3;
        (0..n)
            .map(|_| SYLLABLES[(self.next() % SYLLABLES.len() as u64) as usize])
            .collect()
    }

    /// About `chars` characters of sentences.
    pub fn paragraph(&mut self, chars: usize) -> String {
        let mut out = String::new();
        while out.len() < chars {
            let words = 6 + self.next() % 10;
            let sentence: Vec<String> = (0..words).map(|_| self.word()).collect();
            let mut sentence = sentence.join(" ");
            if let Some(first) = sentence.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            out.push_str(&sentence);
            out.push_str(". ");
        }
        out.trim_end().to_string()
    }
}

/// Writes `chunks` sections into `workspace/memory/topic-NNN.md`.
pub fn write_notes(workspace: &Path, chunks: usize) -> Result<(), String> {
    let dir = workspace.join("memory");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut prose = Prose(0x2545_F491_4F6C_DD1D);
    let files = chunks.div_ceil(SECTIONS_PER_FILE);
    for f in 0..files {
        let mut text = format!("# Topic {f}\n\n");
        let sections = SECTIONS_PER_FILE.min(chunks - f * SECTIONS_PER_FILE);
        for s in 0..sections {
            // The file's first section is its title's: one chunk.
            if s > 0 {
                text.push_str(&format!("## Note {f}.{s}\n\n"));
            }
            text.push_str(&prose.paragraph(700));
            text.push_str("\n\n");
        }
        let path = dir.join(format!("topic-{f:03}.md"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// (chunks, chunks with a vector) in an agent's memory index.
pub fn index_size(db: &Path) -> Option<(u64, u64)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .ok()?;
    conn.query_row(
        "SELECT count(*), coalesce(sum(embedded != 0), 0) FROM chunks",
        [],
        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
    )
    .ok()
}

/// Waits until `daemon` has indexed at least `chunks` chunks into `db`,
/// each with its vector; answers how long that took.
pub async fn wait_indexed(
    daemon: &mut Daemon,
    db: &Path,
    chunks: usize,
    limit: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    let mut last = (0, 0);
    loop {
        if let Some(size) = index_size(db) {
            last = size;
            if size.0 >= chunks as u64 && size.1 == size.0 {
                return Ok(start.elapsed());
            }
        }
        daemon.alive()?;
        if start.elapsed() > limit {
            return Err(format!(
                "the index holds {} chunks ({} with vectors) of {chunks} after {} s: {}",
                last.0,
                last.1,
                limit.as_secs(),
                daemon.log_tail()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
