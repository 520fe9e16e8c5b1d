//! The one check every URL in the config passes (provider and embedder
//! base URLs, MCP servers, plugins' servers): http or https, nothing else,
//! so a typo fails at load time with the same sentence everywhere.

/// `Ok` for an http:// or https:// URL; otherwise the sentence for the user.
pub(super) fn check_http_url(value: &str) -> Result<(), String> {
    if value.starts_with("http://") || value.starts_with("https://") {
        Ok(())
    } else {
        Err(format!("`{value}` is not an http:// or https:// URL"))
    }
}
