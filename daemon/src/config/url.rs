//! The one check every URL in the config passes (provider and embedder
//! base URLs, MCP servers, plugins' servers): http or https, nothing else,
//! so a typo fails at load time with the same sentence everywhere.

/// A URL of another scheme, or no URL at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an http:// or https:// URL")]
pub(super) struct NotHttpUrl(String);

/// `Ok` for an http:// or https:// URL.
pub(super) fn check_http_url(value: &str) -> Result<(), NotHttpUrl> {
    if value.starts_with("http://") || value.starts_with("https://") {
        Ok(())
    } else {
        Err(NotHttpUrl(value.to_string()))
    }
}
