//! The one rustls [`CryptoProvider`] of lookout: *ring*'s cipher suites, key
//! exchange groups, signature algorithms, random numbers and key loading.
//!
//! rustls 0.23.48 deprecates `rustls::crypto::ring::default_provider()`
//! (it has no post-quantum key exchange) while keeping every piece it is
//! made of public. This is the same provider, assembled here from those
//! pieces and from rustls-webpki's *ring* algorithms, so lookout builds
//! without warnings on every rustls 0.23 and keeps one C-free crypto crate
//! (aws-lc-rs, rustls's recommendation for post-quantum groups, needs a C
//! build of AWS-LC: see ARCHITECTURE.md's dependency table).

use std::sync::Arc;

use rustls_pki_types::PrivateKeyDer;
use tokio_rustls::rustls::crypto::ring::{
    DEFAULT_CIPHER_SUITES, DEFAULT_KX_GROUPS, sign::any_supported_type,
};
use tokio_rustls::rustls::crypto::{
    CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom, WebPkiSupportedAlgorithms,
};
use tokio_rustls::rustls::sign::SigningKey;
use tokio_rustls::rustls::{Error, SignatureScheme};
use webpki::ring as alg;

/// lookout's rustls provider (*ring*): TLS 1.3's AES-GCM and ChaCha20-Poly1305
/// suites, TLS 1.2's ECDHE ones, the P-384, X25519 and P-256 groups, and ECDSA,
/// Ed25519 and RSA (PKCS#1 and PSS, 2048–8192 bits) signatures.
///
/// Every TLS configuration lookout builds (client, server, and the process
/// default that kube's client takes) is built on it.
#[must_use]
pub fn crypto_provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: DEFAULT_CIPHER_SUITES.to_vec(),
        kx_groups: DEFAULT_KX_GROUPS.to_vec(),
        signature_verification_algorithms: SIGNATURE_ALGORITHMS,
        secure_random: &Ring,
        key_provider: &Ring,
    }
}

/// [`crypto_provider`] in an `Arc`, as rustls's builders take it.
#[must_use]
pub fn shared_crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(crypto_provider())
}

/// Random numbers from the system's generator, private keys loaded by
/// rustls's *ring* signer (RSA, ECDSA P-256/P-384, Ed25519).
#[derive(Debug)]
struct Ring;

impl SecureRandom for Ring {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        use ring::rand::SecureRandom as _;
        ring::rand::SystemRandom::new()
            .fill(buf)
            .map_err(|_| GetRandomFailed)
    }
}

impl KeyProvider for Ring {
    fn load_private_key(&self, key: PrivateKeyDer<'static>) -> Result<Arc<dyn SigningKey>, Error> {
        any_supported_type(&key)
    }
}

/// What webpki verifies with *ring*: every algorithm for certificate chains,
/// and which of them each TLS signature scheme may use (TLS 1.2 does not fix
/// an ECDSA curve by its scheme, so both curves serve either hash).
static SIGNATURE_ALGORITHMS: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[
        alg::ECDSA_P256_SHA256,
        alg::ECDSA_P256_SHA384,
        alg::ECDSA_P384_SHA256,
        alg::ECDSA_P384_SHA384,
        alg::ED25519,
        alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
        alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
        alg::RSA_PKCS1_2048_8192_SHA256,
        alg::RSA_PKCS1_2048_8192_SHA384,
        alg::RSA_PKCS1_2048_8192_SHA512,
        alg::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
        alg::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
        alg::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
    ],
    mapping: &[
        (
            SignatureScheme::ECDSA_NISTP384_SHA384,
            &[alg::ECDSA_P384_SHA384, alg::ECDSA_P256_SHA384],
        ),
        (
            SignatureScheme::ECDSA_NISTP256_SHA256,
            &[alg::ECDSA_P256_SHA256, alg::ECDSA_P384_SHA256],
        ),
        (SignatureScheme::ED25519, &[alg::ED25519]),
        (
            SignatureScheme::RSA_PSS_SHA512,
            &[alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA384,
            &[alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PSS_SHA256,
            &[alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA512,
            &[alg::RSA_PKCS1_2048_8192_SHA512],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA384,
            &[alg::RSA_PKCS1_2048_8192_SHA384],
        ),
        (
            SignatureScheme::RSA_PKCS1_SHA256,
            &[alg::RSA_PKCS1_2048_8192_SHA256],
        ),
    ],
};
