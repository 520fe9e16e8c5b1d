//! The TLS setup of pincerd's HTTP clients (the providers', the `openai`
//! embedder's): reqwest's own choice — rustls with ring, the platform's
//! root certificates through rustls-platform-verifier, HTTP/2 or 1.1 by
//! ALPN — with the roots loaded once per process, on the first HTTPS
//! handshake, instead of once per client when it is built.
//!
//! Loading the roots reads and parses every certificate of the system's
//! store (`/etc/ssl/certs`: the bundle and some 300 files): about 3 ms of
//! CPU each time, and reqwest did it for every client it built, at start,
//! before the socket answered (twice with one provider and the `openai`
//! embedder; issue 28). A daemon that only talks to models over plain
//! HTTP on loopback never loads them, and never holds them in memory.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A client TLS config for reqwest's `use_preconfigured_tls`, as reqwest
/// builds its own by default, sharing one root store for the process.
pub fn client_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(rustls::ALL_VERSIONS)?
        .dangerous()
        .with_custom_certificate_verifier(verifier())
        .with_no_client_auth();
    // What reqwest offers when it builds the config (its `http2` feature).
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Installs rustls' ring provider once (reqwest is built without a default
/// provider so that aws-lc is not compiled).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The process's crypto provider: ring, installed once.
fn provider() -> Arc<CryptoProvider> {
    install_crypto_provider();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The process's verifier: one root store, loaded when first needed.
fn verifier() -> Arc<LazyVerifier> {
    static VERIFIER: OnceLock<Arc<LazyVerifier>> = OnceLock::new();
    VERIFIER
        .get_or_init(|| Arc::new(LazyVerifier::default()))
        .clone()
}

/// rustls-platform-verifier's verifier, built on its first use.
#[derive(Debug, Default)]
struct LazyVerifier {
    inner: OnceLock<Result<rustls_platform_verifier::Verifier, rustls::Error>>,
}

impl LazyVerifier {
    fn get(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.inner
            .get_or_init(|| rustls_platform_verifier::Verifier::new(provider()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.get()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls13_signature(message, cert, dss)
    }

    /// Asked for the ClientHello, before any certificate: the provider's
    /// schemes, which are the platform verifier's, without the roots.
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Building configs and clients loads no roots; the schemes offered are
    /// the platform verifier's.
    #[test]
    fn roots_are_loaded_on_first_use_only() {
        let config = client_config().unwrap();
        assert_eq!(
            config.alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let _client = reqwest::Client::builder()
            .use_preconfigured_tls(client_config().unwrap())
            .build()
            .unwrap();
        let lazy = LazyVerifier::default();
        assert!(!lazy.supported_verify_schemes().is_empty());
        assert!(lazy.inner.get().is_none(), "the roots were loaded early");
        // A machine without a certificate store cannot say more.
        if let Ok(platform) = lazy.get() {
            assert_eq!(
                platform.supported_verify_schemes(),
                lazy.supported_verify_schemes()
            );
        }
    }
}
