//! The answers of fires waiting to be delivered: queued before the first
//! attempt to send them, retried from their row (without running the fire
//! again) until sent or given up.

use jiff::Timestamp;
use rusqlite::params;

use super::{ScheduleStore, StoreError, ms, ts};

/// An answer waiting to be delivered (or given up on).
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRow {
    pub id: i64,
    pub fire: i64,
    pub schedule: String,
    pub to: String,
    pub text: String,
    pub tries: u32,
    pub next_try_at: Option<Timestamp>,
}

impl ScheduleStore {
    /// Queues the answer of fire `id` for `to`. The caller sends it now;
    /// the scheduler's retries look at it from `retry_from` on (when the
    /// caller's attempt recorded no outcome: a crash).
    pub async fn queue_delivery(
        &self,
        fire: i64,
        schedule: &str,
        to: &str,
        text: &str,
        retry_from: Timestamp,
    ) -> Result<i64, StoreError> {
        let (schedule, to, text) = (schedule.to_string(), to.to_string(), text.to_string());
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "INSERT INTO deliveries (fire, schedule, to_addr, text, state, next_try_at) VALUES (?1, ?2, ?3, ?4, 'pending', ?5)",
                    params![fire, schedule, to, text, ms(retry_from)],
                )?;
                Ok(c.last_insert_rowid())
            })
            .await?)
    }

    /// Delivery `id` arrived.
    pub async fn delivered(&self, id: i64) -> Result<(), StoreError> {
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE deliveries SET state = 'sent', tries = tries + 1, error = NULL WHERE id = ?1",
                    [id],
                )?;
                Ok(())
            })
            .await?)
    }

    /// Delivery `id` failed with `why`: tried again at `next_try` or, with
    /// none, given up.
    pub async fn delivery_failed(
        &self,
        id: i64,
        why: String,
        next_try: Option<Timestamp>,
    ) -> Result<(), StoreError> {
        Ok(self
            .db
            .call(move |c| {
                c.execute(
                    "UPDATE deliveries SET tries = tries + 1, error = ?2, next_try_at = ?3,
                     state = CASE WHEN ?3 IS NULL THEN 'failed' ELSE 'pending' END WHERE id = ?1",
                    params![id, why, next_try.map(ms)],
                )?;
                Ok(())
            })
            .await?)
    }

    /// The deliveries still pending, soonest first.
    pub async fn pending_deliveries(&self) -> Result<Vec<DeliveryRow>, StoreError> {
        Ok(self
            .db
            .call(|c| {
                let mut st = c.prepare(
                    "SELECT id, fire, schedule, to_addr, text, tries, next_try_at FROM deliveries
                     WHERE state = 'pending' ORDER BY COALESCE(next_try_at, 0), id",
                )?;
                st.query_map([], |r| {
                    Ok(DeliveryRow {
                        id: r.get(0)?,
                        fire: r.get(1)?,
                        schedule: r.get(2)?,
                        to: r.get(3)?,
                        text: r.get(4)?,
                        tries: r.get(5)?,
                        next_try_at: r.get::<_, Option<i64>>(6)?.map(ts),
                    })
                })?
                .collect()
            })
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::plan::Missed;
    use crate::schedule::store::FireState;
    use crate::schedule::store::fixtures::{at, row};

    #[tokio::test]
    async fn missed_fires_are_one_row_and_deliveries_retry_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = ScheduleStore::open(&dir.path().join("s.db")).unwrap();
        store.add(row("m")).await.unwrap();
        let now = at("2026-11-27T10:00:00Z");
        let missed = Missed {
            count: 5,
            first: at("2026-11-22T08:00:00Z"),
            last: at("2026-11-26T08:00:00Z"),
            why: "asleep".into(),
        };
        store
            .skip("m", missed, Some(at("2026-11-28T08:00:00Z")), now)
            .await
            .unwrap();
        let h = store.history("m", 10).await.unwrap();
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].state, FireState::Skipped);
        assert_eq!(h[0].missed, Some((5, at("2026-11-26T08:00:00Z"))));
        let d = store
            .queue_delivery(7, "m", "telegram:owner", "hi", at("2026-11-27T10:00:30Z"))
            .await
            .unwrap();
        // While its first attempt is made it is not the retries' yet.
        assert_eq!(
            store.pending_deliveries().await.unwrap()[0].next_try_at,
            Some(at("2026-11-27T10:00:30Z"))
        );
        store
            .delivery_failed(
                d,
                "telegram is down".into(),
                Some(at("2026-11-27T10:01:00Z")),
            )
            .await
            .unwrap();
        let pending = store.pending_deliveries().await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(
            (pending[0].tries, pending[0].next_try_at),
            (1, Some(at("2026-11-27T10:01:00Z")))
        );
        store.delivered(d).await.unwrap();
        assert!(store.pending_deliveries().await.unwrap().is_empty());
    }
}
