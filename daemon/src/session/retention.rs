//! The audit table's retention: every tool call adds a row to the session
//! registry (SPEC §8.4), so without this `state/pincer.db` grows for as
//! long as the daemon is used. Rows older than `[tools] audit_days` leave
//! once at start and then every hour; the setting is read at each round,
//! so a reload takes effect at the next.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::registry::Registry;

/// How often old rows are looked for.
const EVERY: Duration = Duration::from_secs(60 * 60);

/// Prunes the audit table of `registry` at once and every hour until
/// `stop`; `retention` says, at each round, how long a row stays (`None`:
/// for ever).
pub fn keep_audit(
    registry: Registry,
    retention: impl Fn() -> Option<Duration> + Send + 'static,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = stop.cancelled() => return,
            }
            let Some(keep) = retention() else { continue };
            let before = time::OffsetDateTime::now_utc() - keep;
            match registry.prune_audit(before).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    "tool audit: {n} rows older than {} days let go",
                    keep.as_secs() / 86_400
                ),
                Err(e) => tracing::warn!("tool audit: could not prune it: {e}"),
            }
        }
    });
}
