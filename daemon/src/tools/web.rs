//! `web_fetch` (SPEC §8.2): a URL as readable text. Private, loopback and
//! link-local addresses (judged by [`super::address`], IPv6 forms that
//! carry an IPv4 address included) are refused unless `[tools.web_fetch]`
//! allows them; every address a name resolves to and every redirect (at
//! most 3) is checked again, and the connection goes to the address that
//! was checked, so DNS cannot swap it in between.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::address::is_private;
use super::{ToolContext, ToolDef, ToolFlags, ToolOutput};

const MAX_REDIRECTS: usize = 3;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest body read; longer pages are cut (the result cap applies after).
const MAX_BODY: usize = 5 * 1024 * 1024;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    /// The http:// or https:// URL to fetch.
    pub url: String,
    /// Return the raw body instead of readable text.
    #[serde(default)]
    pub raw: bool,
}

pub fn tool() -> ToolDef {
    ToolDef::typed(
        "web_fetch",
        "Fetch a web page or file over HTTP(S) and return it as readable text (HTML converted to plain text).",
        &["web"],
        ToolFlags {
            dedupe: true,
            ..Default::default()
        },
        web_fetch,
    )
    .with_aliases(&[("link", "url"), ("uri", "url")])
}

/// Resolves `url`'s host and checks every address; returns one to use.
async fn vet(
    url: &reqwest::Url,
    allow_private: bool,
    allow_hosts: &[String],
) -> Result<SocketAddr, String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https URLs can be fetched, not `{}`",
            url.scheme()
        ));
    }
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port_or_known_default().ok_or("the URL has no port")?;
    let host_allowed = allow_hosts.iter().any(|h| h.eq_ignore_ascii_case(host));
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
            .collect(),
    };
    let first = *addrs
        .first()
        .ok_or_else(|| format!("`{host}` has no address"))?;
    if !allow_private
        && !host_allowed
        && let Some(bad) = addrs.iter().find(|a| is_private(a.ip()))
    {
        return Err(format!(
            "refused: `{host}` resolves to {}, a private or local address. Fetching those is off unless [tools.web_fetch] allow_private = true or allow_hosts names the host.",
            bad.ip()
        ));
    }
    Ok(first)
}

async fn web_fetch(args: WebFetchArgs, ctx: ToolContext) -> ToolOutput {
    let settings = &ctx.settings.web_fetch;
    let mut url = match reqwest::Url::parse(args.url.trim()) {
        Ok(u) => u,
        Err(e) => return ToolOutput::error(format!("`{}` is not a URL: {e}", args.url)),
    };
    crate::llm::tls::install_crypto_provider();
    for hop in 0..=MAX_REDIRECTS {
        let addr = match vet(&url, settings.allow_private, &settings.allow_hosts).await {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(e),
        };
        let host = url.host_str().unwrap_or_default().to_string();
        let mut builder = reqwest::Client::builder();
        if !settings.use_env_proxy {
            // A proxy would resolve the name itself: the address vetted
            // above would not be the one fetched (DNS rebinding).
            builder = builder.no_proxy();
        }
        let client = match builder
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .resolve(&host, addr)
            .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
            .build()
        {
            Ok(c) => c,
            Err(e) => return ToolOutput::error(format!("cannot build the HTTP client: {e}")),
        };
        let response = tokio::select! {
            r = client.get(url.clone()).send() => r,
            _ = ctx.cancel.cancelled() => return ToolOutput::error("aborted"),
        };
        let response = match response {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(format!("cannot fetch {url}: {e}")),
        };
        let status = response.status();
        if status.is_redirection() {
            let Some(location) = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
            else {
                return ToolOutput::error(format!("{url} answered {status} without a Location"));
            };
            url = match url.join(location) {
                Ok(next) => next,
                Err(e) => return ToolOutput::error(format!("bad redirect to `{location}`: {e}")),
            };
            if hop == MAX_REDIRECTS {
                return ToolOutput::error(format!(
                    "more than {MAX_REDIRECTS} redirects; stopped at {url}"
                ));
            }
            continue;
        }
        let is_html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.contains("html"));
        let body = match read_capped(response, &ctx).await {
            Ok(b) => b,
            Err(e) => return ToolOutput::error(e),
        };
        let text = if is_html && !args.raw {
            html2text::from_read(body.as_slice(), 100)
                .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned())
        } else {
            String::from_utf8_lossy(&body).into_owned()
        };
        let out = format!("{status} {url}\n\n{text}");
        return if status.is_success() {
            ToolOutput::ok(out)
        } else {
            ToolOutput::error(out)
        };
    }
    ToolOutput::error("too many redirects")
}

async fn read_capped(
    mut response: reqwest::Response,
    ctx: &ToolContext,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let chunk = tokio::select! {
            c = response.chunk() => c,
            _ = ctx.cancel.cancelled() => return Err("aborted".into()),
        };
        match chunk {
            Ok(Some(bytes)) => {
                body.extend_from_slice(&bytes);
                if body.len() >= MAX_BODY {
                    body.truncate(MAX_BODY);
                    return Ok(body);
                }
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(format!("the download broke off: {e}")),
        }
    }
}
