//! A workspace's own certificate authority: made for one workspace, trusted inside that
//! workspace only, and used by its proxy to terminate TLS for the one host whose traffic it
//! must read (the run's git host). Its key never leaves the proxy's memory.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Making a certificate or a TLS configuration failed.
#[derive(Debug, thiserror::Error)]
#[error("the workspace certificate authority failed: {0}")]
pub struct CaError(String);

impl CaError {
    /// The stable error code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        "EGRESS_CA_FAILED"
    }
}

/// One workspace's certificate authority (see the module docs).
pub struct WorkspaceCa {
    certificate_pem: String,
    certificate_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for WorkspaceCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceCa").finish_non_exhaustive()
    }
}

fn failed(error: impl std::fmt::Display) -> CaError {
    CaError(error.to_string())
}

impl WorkspaceCa {
    /// A new authority with a fresh key, named after `label` (the workspace).
    pub fn generate(label: &str) -> Result<Self, CaError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        params.distinguished_name.push(
            DnType::CommonName,
            format!("auto-swe workspace {label} egress CA"),
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(failed)?;
        let certificate = params.self_signed(&key).map_err(failed)?;
        Ok(Self {
            certificate_pem: certificate.pem(),
            certificate_der: certificate.der().clone(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The authority's certificate (PEM): what the workspace adds to its trusted roots.
    #[must_use]
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// What a workspace behind this authority trusts: the host's system roots and this
    /// authority, as one PEM bundle (interception is for one host; every other host's
    /// certificates are still checked against the usual roots).
    #[must_use]
    pub fn trust_bundle_pem(&self) -> String {
        let lf = pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF);
        let mut bundle: String = rustls_native_certs::load_native_certs()
            .certs
            .into_iter()
            .map(|root| pem::encode_config(&pem::Pem::new("CERTIFICATE", root.to_vec()), lf))
            .collect();
        bundle.push_str(&self.certificate_pem);
        bundle
    }

    /// The TLS server configuration presenting a new certificate for `host` signed by this
    /// authority (the proxy makes it once, when it is built).
    pub(crate) fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, CaError> {
        let mut params = CertificateParams::new(vec![host.to_owned()]).map_err(failed)?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().map_err(failed)?;
        let leaf = params.signed_by(&key, &self.issuer).map_err(failed)?;
        let chain = vec![leaf.der().clone(), self.certificate_der.clone()];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider()))
            .with_safe_default_protocol_versions()
            .map_err(failed)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(failed)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The crypto provider of both TLS ends: aws-lc-rs, the one the build already carries.
pub(crate) fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}

/// `N` bytes from the provider's secure random source (credentials, placeholders); `None` when
/// the source fails.
pub(crate) fn random_bytes<const N: usize>() -> Option<[u8; N]> {
    let mut bytes = [0_u8; N];
    provider().secure_random.fill(&mut bytes).ok()?;
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject as _;

    use super::*;

    #[test]
    fn the_trust_bundle_is_the_system_roots_and_this_authority() {
        let ca = WorkspaceCa::generate("test").unwrap();
        let bundle = ca.trust_bundle_pem();
        let parsed: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(bundle.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        let system = rustls_native_certs::load_native_certs().certs;
        assert_eq!(parsed.len(), system.len() + 1);
        assert_eq!(&parsed[..system.len()], &system[..]);
        assert_eq!(parsed.last(), Some(&ca.certificate_der));
        assert!(!bundle.contains('\r'));
    }
}
