//! When to retry a failed model call and how long to wait (SPEC §7):
//! 429, 5xx, timeouts and broken or truncated streams are retried with
//! exponential backoff (*default* 1 s doubling to 30 s, 6 attempts);
//! `Retry-After` is honoured up to a cap (*default* 60 s) — a server asking
//! for longer sends the turn to the fallback model instead of waiting.
//!
//! A provider that cannot be reached at all fails fast: a host name that
//! does not resolve and a refused connection are not retried (they do not
//! heal within a backoff, and five retries cost a turn half a minute), and a
//! connect timeout is retried once (one lost packet or a waking network
//! link is worth a second try; each try already waited `connect_timeout`).

use std::time::Duration;

use super::{LlmError, Unreachable};
use crate::config::RetrySettings;

/// Attempts at a model whose connection times out (one retry).
pub const CONNECT_TIMEOUT_ATTEMPTS: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Wait this long, then try the same model again.
    RetryAfter(Duration),
    /// Stop trying this model (go to the next fallback, if any).
    GiveUp,
}

/// Decides after `attempts_made` (≥ 1) failed attempts at one model.
pub fn decide(error: &LlmError, attempts_made: u32, policy: &RetrySettings) -> Decision {
    if !error.is_retryable() || attempts_made >= policy.max_attempts {
        return Decision::GiveUp;
    }
    if let LlmError::Unreachable {
        cause: Unreachable::TimedOut,
        ..
    } = error
        && attempts_made >= CONNECT_TIMEOUT_ATTEMPTS
    {
        return Decision::GiveUp;
    }
    if let Some(wait) = error.retry_after() {
        return if wait > policy.max_retry_after {
            Decision::GiveUp
        } else {
            Decision::RetryAfter(wait)
        };
    }
    Decision::RetryAfter(backoff(attempts_made, policy))
}

/// `initial × 2^(n-1)`, capped at `max_backoff`.
pub fn backoff(attempts_made: u32, policy: &RetrySettings) -> Duration {
    let exp = attempts_made.saturating_sub(1).min(20);
    policy
        .initial_backoff
        .saturating_mul(1u32 << exp)
        .min(policy.max_backoff)
}

/// Parses `Retry-After` as seconds (the HTTP-date form is treated as absent).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetrySettings {
        RetrySettings {
            max_attempts: 6,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }

    fn http(status: u16, retry_after: Option<u64>) -> LlmError {
        LlmError::Http {
            status,
            message: String::new(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn backoff_doubles_from_one_second_to_thirty() {
        let p = policy();
        let waits: Vec<u64> = (1..=6).map(|n| backoff(n, &p).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 16, 30]);
    }

    #[test]
    fn retryable_errors_retry_until_attempts_run_out() {
        let p = policy();
        for e in [
            http(429, None),
            http(500, None),
            http(503, None),
            LlmError::Timeout,
            LlmError::Truncated("x".into()),
            LlmError::Connect("refused".into()),
        ] {
            assert_eq!(
                decide(&e, 1, &p),
                Decision::RetryAfter(Duration::from_secs(1)),
                "{e}"
            );
            assert_eq!(decide(&e, 6, &p), Decision::GiveUp, "{e}");
        }
    }

    #[test]
    fn client_errors_and_aborts_are_not_retried() {
        let p = policy();
        for e in [
            http(400, None),
            http(401, None),
            http(404, None),
            LlmError::Aborted,
            LlmError::Protocol("bad".into()),
        ] {
            assert_eq!(decide(&e, 1, &p), Decision::GiveUp, "{e}");
        }
    }

    fn unreachable(cause: Unreachable) -> LlmError {
        LlmError::Unreachable {
            provider: "openai".into(),
            base_url: "https://api.openai.com/v1".into(),
            cause,
        }
    }

    #[test]
    fn unresolvable_or_refused_providers_are_not_retried() {
        let p = policy();
        for cause in [Unreachable::Dns, Unreachable::Refused] {
            assert_eq!(decide(&unreachable(cause), 1, &p), Decision::GiveUp);
        }
    }

    #[test]
    fn a_connect_timeout_is_retried_once() {
        let p = policy();
        let e = unreachable(Unreachable::TimedOut);
        assert_eq!(
            decide(&e, 1, &p),
            Decision::RetryAfter(Duration::from_secs(1))
        );
        assert_eq!(decide(&e, 2, &p), Decision::GiveUp);
    }

    #[test]
    fn the_unreachable_sentence_names_provider_address_and_what_to_check() {
        let text = unreachable(Unreachable::Dns).to_string();
        assert_eq!(
            text,
            "cannot connect to provider `openai` at https://api.openai.com/v1: the host name does not resolve; check base_url (`pincer doctor`)"
        );
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let p = policy();
        assert_eq!(
            decide(&http(429, Some(7)), 1, &p),
            Decision::RetryAfter(Duration::from_secs(7))
        );
        assert_eq!(
            decide(&http(429, Some(0)), 2, &p),
            Decision::RetryAfter(Duration::ZERO)
        );
        assert_eq!(decide(&http(429, Some(61)), 1, &p), Decision::GiveUp);
    }

    #[test]
    fn retry_after_parsing() {
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
