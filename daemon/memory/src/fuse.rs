//! Ranking for hybrid search (SPEC §10), as pure functions over candidate
//! lists: normalising each leg, merging them by weights or by reciprocal
//! rank fusion, temporal decay of dated notes, and MMR re-ranking.

use std::collections::HashMap;

/// How the two legs are merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fusion {
    /// `vector_weight · cosine + text_weight · normalised BM25`.
    #[default]
    Weighted,
    /// Reciprocal rank fusion (k = 60), scaled so that a chunk first in
    /// both legs scores 1.
    Rrf,
}

/// One candidate after merging.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub id: i64,
    pub score: f64,
    /// Cosine similarity, when the vector leg found it.
    pub vector: Option<f64>,
    /// Normalised BM25, when the full-text leg found it.
    pub text: Option<f64>,
}

/// Normalises BM25 by rank: FTS5's `bm25()` is negative and unbounded, so
/// each value is taken relative to the best one of this query (the best
/// hit scores 1, a hit half as relevant 0.5).
pub fn normalise_bm25(hits: &[(i64, f64)]) -> Vec<(i64, f64)> {
    let best = hits.iter().map(|(_, b)| -b).fold(0.0f64, f64::max);
    hits.iter()
        .map(|&(id, b)| {
            (
                id,
                if best > 0.0 {
                    (-b / best).clamp(0.0, 1.0)
                } else {
                    0.0
                },
            )
        })
        .collect()
}

/// Merges the vector leg (id, cosine) and the text leg (id, normalised
/// score), both ordered best first. With one leg missing the other has the
/// whole weight, so a text-only index still reaches the minimum score.
pub fn merge(
    vector: Option<&[(i64, f64)]>,
    text: &[(i64, f64)],
    fusion: Fusion,
    vector_weight: f64,
    text_weight: f64,
) -> Vec<Scored> {
    let mut by_id: HashMap<i64, Scored> = HashMap::new();
    let (vw, tw) = match vector {
        None => (0.0, 1.0),
        Some(_) => {
            let sum = vector_weight + text_weight;
            if sum > 0.0 {
                (vector_weight / sum, text_weight / sum)
            } else {
                (0.5, 0.5)
            }
        }
    };
    const RRF_K: f64 = 60.0;
    let rrf_max = (vw + tw) / (RRF_K + 1.0);
    for (rank, &(id, sim)) in vector.unwrap_or_default().iter().enumerate() {
        let entry = by_id.entry(id).or_insert(Scored {
            id,
            score: 0.0,
            vector: None,
            text: None,
        });
        entry.vector = Some(sim);
        entry.score += match fusion {
            Fusion::Weighted => vw * sim.max(0.0),
            Fusion::Rrf => vw / (RRF_K + 1.0 + rank as f64) / rrf_max,
        };
    }
    for (rank, &(id, score)) in text.iter().enumerate() {
        let entry = by_id.entry(id).or_insert(Scored {
            id,
            score: 0.0,
            vector: None,
            text: None,
        });
        entry.text = Some(score);
        entry.score += match fusion {
            Fusion::Weighted => tw * score,
            Fusion::Rrf => tw / (RRF_K + 1.0 + rank as f64) / rrf_max,
        };
    }
    let mut merged: Vec<Scored> = by_id.into_values().collect();
    sort_best_first(&mut merged);
    merged
}

pub fn sort_best_first(list: &mut [Scored]) {
    list.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
}

/// The factor for a note dated `age_days` ago: halves every `half_life`
/// days; 1 for undated notes, future dates and a half-life of 0 (off).
pub fn decay(age_days: Option<f64>, half_life_days: f64) -> f64 {
    match age_days {
        Some(age) if age > 0.0 && half_life_days > 0.0 => 0.5f64.powf(age / half_life_days),
        _ => 1.0,
    }
}

/// The date in a dated note's name, `memory/YYYY-MM-DD.md` (or any file
/// whose name starts with the date), as days since the Unix epoch.
pub fn dated_note_day(path: &str) -> Option<i64> {
    let name = path.rsplit('/').next()?;
    let date = name.get(..10)?;
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let date = time::Date::parse(date, &format).ok()?;
    Some((date - time::Date::from_calendar_date(1970, time::Month::January, 1).ok()?).whole_days())
}

/// Maximal marginal relevance: picks `limit` items, each maximising
/// `λ · relevance − (1 − λ) · (highest similarity to an item already
/// picked)`, ties to the earlier item; similarity is the Jaccard overlap of
/// the items' word sets. λ = 1 keeps the order by relevance.
///
/// An item's value is at most `λ · relevance`, so each round goes down the
/// items by relevance and stops at the first whose bound is below the best
/// value found: word sets are made for the items a round reaches (about a
/// quarter of 48 candidates, where making all of them was most of MMR's
/// time), and the picks are the same as comparing every item.
pub fn mmr(candidates: Vec<(Scored, &str)>, lambda: f64, limit: usize) -> Vec<Scored> {
    if lambda >= 1.0 || candidates.len() <= 1 {
        return candidates.into_iter().take(limit).map(|(s, _)| s).collect();
    }
    let n = candidates.len();
    let mut by_relevance: Vec<usize> = (0..n).collect();
    by_relevance.sort_by(|&a, &b| {
        candidates[b]
            .0
            .score
            .total_cmp(&candidates[a].0.score)
            .then(a.cmp(&b))
    });
    let mut words: Vec<Option<Vec<u64>>> = vec![None; n];
    // The highest similarity of each item to the picks it was compared
    // with, and how many picks that was.
    let mut redundancy = vec![0.0f64; n];
    let mut compared = vec![0usize; n];
    let mut taken = vec![false; n];
    let mut picked: Vec<usize> = Vec::new();
    while picked.len() < limit.min(n) {
        let mut best: Option<(f64, usize)> = None;
        for &i in &by_relevance {
            if taken[i] {
                continue;
            }
            let bound = lambda * candidates[i].0.score;
            // Only a positive λ keeps the bounds in relevance order.
            if lambda > 0.0 && best.is_some_and(|(value, _)| bound.total_cmp(&value).is_lt()) {
                break;
            }
            for &p in &picked[compared[i]..] {
                for k in [i, p] {
                    if words[k].is_none() {
                        words[k] = Some(word_set(candidates[k].1));
                    }
                }
                if let (Some(a), Some(b)) = (&words[i], &words[p]) {
                    redundancy[i] = redundancy[i].max(jaccard(a, b));
                }
            }
            compared[i] = picked.len();
            let value = lambda * candidates[i].0.score - (1.0 - lambda) * redundancy[i];
            let better = best.is_none_or(|(v, j)| value.total_cmp(&v).then(j.cmp(&i)).is_gt());
            if better {
                best = Some((value, i));
            }
        }
        let Some((_, i)) = best else { break };
        taken[i] = true;
        picked.push(i);
    }
    let mut candidates: Vec<Option<Scored>> =
        candidates.into_iter().map(|(s, _)| Some(s)).collect();
    picked
        .into_iter()
        .filter_map(|i| candidates[i].take())
        .collect()
}

/// The distinct lower-cased words of `text`, as sorted hashes (comparing
/// hashes instead of strings keeps MMR well under a millisecond).
fn word_set(text: &str) -> Vec<u64> {
    let mut set: Vec<u64> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let step = |h: u64, c: u64| (h ^ c).wrapping_mul(0x100_0000_01b3);
            if w.is_ascii() {
                // The same hash without decoding and case-mapping each char
                // (an ASCII char's code is its byte): half of MMR's time.
                w.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    step(h, u64::from(b.to_ascii_lowercase()))
                })
            } else {
                w.chars()
                    .flat_map(char::to_lowercase)
                    .fold(0xcbf2_9ce4_8422_2325u64, |h, c| step(h, u64::from(c)))
            }
        })
        .collect();
    set.sort_unstable();
    set.dedup();
    set
}

/// Jaccard similarity of two sorted, deduplicated sets.
fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - common;
    if union == 0 {
        return 0.0;
    }
    common as f64 / union as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[Scored]) -> Vec<i64> {
        list.iter().map(|s| s.id).collect()
    }

    #[test]
    fn bm25_is_normalised_against_the_best_hit() {
        let n = normalise_bm25(&[(1, -8.0), (2, -4.0), (3, -0.0)]);
        assert_eq!(n, vec![(1, 1.0), (2, 0.5), (3, 0.0)]);
        assert!(normalise_bm25(&[]).is_empty());
    }

    #[test]
    fn weighted_fusion_rewards_agreement_of_the_legs() {
        let vector = [(1, 0.80), (2, 0.75), (3, 0.30)];
        let text = [(3, 1.0), (2, 0.9)];
        let merged = merge(Some(&vector), &text, Fusion::Weighted, 0.7, 0.3);
        assert_eq!(ids(&merged), vec![2, 1, 3]);
        let two = &merged[0];
        assert!((two.score - (0.7 * 0.75 + 0.3 * 0.9)).abs() < 1e-9);
        assert_eq!(two.vector, Some(0.75));
        assert_eq!(two.text, Some(0.9));
    }

    #[test]
    fn without_a_vector_leg_text_has_the_whole_weight() {
        let merged = merge(None, &[(7, 1.0), (8, 0.4)], Fusion::Weighted, 0.7, 0.3);
        assert_eq!(merged[0].score, 1.0);
        assert_eq!(merged[1].score, 0.4);
    }

    #[test]
    fn rrf_scores_the_first_of_both_legs_as_one() {
        let merged = merge(
            Some(&[(1, 0.9), (2, 0.8)]),
            &[(1, 1.0), (3, 0.5)],
            Fusion::Rrf,
            0.7,
            0.3,
        );
        assert_eq!(merged[0].id, 1);
        assert!((merged[0].score - 1.0).abs() < 1e-9);
        assert!(merged[1].score < 0.7 && merged[2].score < 0.3);
    }

    #[test]
    fn decay_halves_every_half_life() {
        assert_eq!(decay(None, 30.0), 1.0);
        assert_eq!(decay(Some(0.0), 30.0), 1.0);
        assert!((decay(Some(30.0), 30.0) - 0.5).abs() < 1e-12);
        assert!((decay(Some(60.0), 30.0) - 0.25).abs() < 1e-12);
        assert_eq!(decay(Some(-3.0), 30.0), 1.0);
        assert_eq!(decay(Some(90.0), 0.0), 1.0);
    }

    #[test]
    fn only_dated_note_names_have_a_date() {
        assert_eq!(dated_note_day("memory/1970-01-11.md"), Some(10));
        assert!(dated_note_day("memory/2026-11-22-standup.md").is_some());
        assert_eq!(dated_note_day("MEMORY.md"), None);
        assert_eq!(dated_note_day("memory/2026-13-40.md"), None);
        assert_eq!(dated_note_day("memory/日本語.md"), None);
    }

    #[test]
    fn ascii_words_hash_as_any_other_word() {
        let general = |text: &str| -> Vec<u64> {
            let mut set: Vec<u64> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(|w| {
                    w.chars()
                        .flat_map(char::to_lowercase)
                        .fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
                            (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)
                        })
                })
                .collect();
            set.sort_unstable();
            set.dedup();
            set
        };
        for text in [
            "The Cat is called MISO, isn't it? 42",
            "Café au lait, ÉCOLE école",
            "猫 Straße",
        ] {
            assert_eq!(word_set(text), general(text), "{text}");
        }
    }

    /// MMR comparing every candidate in every round, as it was written
    /// before it learnt to stop early.
    fn mmr_every_candidate(candidates: Vec<(Scored, &str)>, lambda: f64, limit: usize) -> Vec<i64> {
        if lambda >= 1.0 || candidates.len() <= 1 {
            return candidates
                .into_iter()
                .take(limit)
                .map(|(s, _)| s.id)
                .collect();
        }
        let words: Vec<Vec<u64>> = candidates.iter().map(|(_, t)| word_set(t)).collect();
        let mut redundancy = vec![0.0f64; candidates.len()];
        let mut left: Vec<usize> = (0..candidates.len()).collect();
        let mut picked: Vec<usize> = Vec::new();
        while picked.len() < limit && !left.is_empty() {
            if let Some(&newest) = picked.last() {
                for &i in &left {
                    redundancy[i] = redundancy[i].max(jaccard(&words[i], &words[newest]));
                }
            }
            let (pos, _) = left
                .iter()
                .enumerate()
                .map(|(pos, &i)| {
                    (
                        pos,
                        lambda * candidates[i].0.score - (1.0 - lambda) * redundancy[i],
                    )
                })
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
                .unwrap();
            picked.push(left.remove(pos));
        }
        picked.into_iter().map(|i| candidates[i].0.id).collect()
    }

    proptest::proptest! {
        #[test]
        fn mmr_picks_what_comparing_every_candidate_picks(
            items in proptest::collection::vec((0u8..12, proptest::collection::vec(0u8..16, 0..8)), 0..40),
            lambda in proptest::sample::select(vec![-0.5, 0.0, 0.3, 0.7, 0.95, 1.0]),
            limit in 0usize..10,
        ) {
            let texts: Vec<String> = items
                .iter()
                .map(|(_, words)| words.iter().map(|w| format!("w{w}")).collect::<Vec<_>>().join(" "))
                .collect();
            let candidates: Vec<(Scored, &str)> = items
                .iter()
                .zip(&texts)
                .enumerate()
                .map(|(id, ((score, _), text))| {
                    let s = Scored { id: id as i64, score: f64::from(*score) / 8.0, vector: None, text: None };
                    (s, text.as_str())
                })
                .collect();
            let expected = mmr_every_candidate(candidates.clone(), lambda, limit);
            proptest::prop_assert_eq!(ids(&mmr(candidates, lambda, limit)), expected);
        }
    }

    #[test]
    fn mmr_skips_near_duplicates() {
        let s = |id, score| Scored {
            id,
            score,
            vector: None,
            text: None,
        };
        let candidates = vec![
            (s(1, 0.90), "the cat is called miso"),
            (s(2, 0.89), "the cat is called miso indeed"),
            (s(3, 0.80), "we keep a blue boat by the river"),
        ];
        assert_eq!(ids(&mmr(candidates.clone(), 0.7, 2)), vec![1, 3]);
        assert_eq!(ids(&mmr(candidates, 1.0, 2)), vec![1, 2]);
    }
}
