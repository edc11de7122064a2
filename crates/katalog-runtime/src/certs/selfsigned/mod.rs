//! Self-signed serving certificates kept in a Secret
//! (`katalog serve --self-signed-secret NAMESPACE/NAME`).
//!
//! The Secret is the source of truth, shared by every replica:
//!
//! | key      | what                                                          |
//! |----------|---------------------------------------------------------------|
//! | `ca.crt` | every CA a serving certificate may be signed by, newest first: the `caBundle` |
//! | `ca.key` | the key of the newest CA, which signs new serving certificates |
//! | `tls.crt`, `tls.key` | the serving certificate and its key                |
//!
//! [`plan`] is pure: given what the Secret holds and the time, it keeps it,
//! or says what to write and why. A missing or unusable Secret gets a new CA
//! and certificate; a CA within `ca-rotate-before` of its expiry gets a
//! successor that is added to the bundle (the old CA stays in it until it
//! expires, so certificates it signed keep being trusted); a serving
//! certificate within `cert-rotate-before` of its expiry, or not valid for the
//! names the engine is reached at, is re-issued. A new CA signs no serving
//! certificate before it has been in the bundle for `ca-propagation`, so the
//! apiserver is given the new `caBundle` before it meets a certificate that
//! needs it.
//!
//! [`SelfSigned::ensure`] applies the plan once (at start, before the server
//! listens); [`SelfSigned::spawn`] keeps applying it: on a watch of the
//! Secret (a deleted or damaged Secret is restored with the certificate being
//! served, not a new one) and every `check_interval` (rotation). Writes carry
//! the resourceVersion they read, so replicas racing to rotate agree on the
//! winner's certificate. What changed is handed to a callback: the server
//! reloads the certificate, the housekeeper registers the new `caBundle`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use rcgen::PublicKeyData as _;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::sync::{mpsc, watch};

use crate::certs::tls::serving_names;
use crate::cluster::registration::{MANAGED_BY_LABEL, MANAGER, SharedCaBundle};

pub const CA_CRT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// How far back `notBefore` is set, so a peer whose clock is behind accepts
/// a certificate at once. The age of a CA this module made is counted from
/// `notBefore + BACKDATE`.
pub const BACKDATE: Duration = Duration::from_secs(3600);

/// How many times [`SelfSigned::ensure`] reads and writes again after losing
/// a race with another writer.
const WRITE_ATTEMPTS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum SelfSignedError {
    #[error("failed to parse --self-signed-secret {0:?}: expected NAMESPACE/NAME")]
    SecretRef(String),
    #[error("failed to accept the certificate policy: {0}")]
    Policy(String),
    #[error("failed to generate a certificate: {0}")]
    Generate(String),
    #[error("failed to create the Kubernetes client: {0}")]
    Client(String),
    #[error("failed to read Secret {secret}: {source}")]
    Read {
        secret: SecretRef,
        #[source]
        source: kube::Error,
    },
    #[error("failed to write Secret {secret}: {source}")]
    Write {
        secret: SecretRef,
        #[source]
        source: kube::Error,
    },
    #[error("failed to write Secret {0}: other writers kept changing it")]
    Contended(SecretRef),
    #[error(
        "failed to use Secret {secret}: it exists, is not labelled {MANAGED_BY_LABEL}={MANAGER}, and {why}; katalog does not overwrite it (name another Secret, or delete this one)"
    )]
    Foreign {
        secret: SecretRef,
        why: MaterialError,
    },
    #[error("failed to write the serving certificate to {path}: {source}")]
    Files {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

type Result<T, E = SelfSignedError> = std::result::Result<T, E>;

/// Why a duration (`--cert-validity 90d`) does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error("{text:?}: the unit must be s, m, h or d")]
    Unit { text: String },
    #[error("{text:?}: expected a positive duration such as 90d, 12h or 30s")]
    Value { text: String },
}

/// Why what a Secret holds cannot be served: a new CA replaces it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MaterialError {
    /// One of the four keys is missing.
    #[error("it has no {key}")]
    Missing { key: &'static str },
    /// A key holds something else than UTF-8 text.
    #[error("its {key} is not PEM text")]
    NotText { key: &'static str },
    /// `ca.crt` is not a sequence of PEM blocks.
    #[error("ca.crt is not PEM: {0}")]
    CaNotPem(String),
    /// A certificate of `ca.crt` does not parse as X.509.
    #[error("ca.crt holds an unreadable certificate: {0}")]
    CaUnreadable(String),
    /// `ca.crt` holds no certificate at all.
    #[error("ca.crt holds no certificate")]
    NoCa,
}

/// Why the serving certificate must be issued again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertificateError {
    /// The certificate and key do not load as a pair.
    #[error(transparent)]
    Pair(#[from] crate::certs::tls::TlsError),
    #[error("tls.crt holds no certificate")]
    NoCertificate,
    #[error("tls.crt is unreadable: {0}")]
    Unreadable(String),
    /// A CA of the bundle is refused as a trust anchor.
    #[error("ca.crt: {0}")]
    Anchor(rustls::Error),
    /// No verifier could be built from the bundle.
    #[error(transparent)]
    Verifier(#[from] rustls::client::VerifierBuilderError),
    /// One of the names to serve is not a DNS name or an IP address.
    #[error("{name}: {source}")]
    Name {
        name: String,
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// A client trusting the bundle would refuse the certificate for `name`.
    #[error("it is not valid for {name}: {source}")]
    NotValidFor { name: String, source: rustls::Error },
}

/// Why a change of what is served could not be served (the keeper hands it
/// over again at the next check).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeError {
    /// The serving files could not be written.
    #[error(transparent)]
    Files(#[from] SelfSignedError),
    /// The server did not load the new certificate.
    #[error(transparent)]
    Reload(#[from] crate::serving::state::Error),
}

/// Why the Secret gives nothing to serve.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum Stored {
    #[error("the Secret does not exist")]
    Missing,
    #[error("the Secret is unusable: {0}")]
    Unusable(MaterialError),
}

/// `NAMESPACE/NAME` of the Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

impl FromStr for SecretRef {
    type Err = SelfSignedError;
    fn from_str(s: &str) -> Result<Self> {
        let valid = |p: &str| {
            !p.is_empty()
                && p.len() <= 253
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                && p.starts_with(|c: char| c.is_ascii_alphanumeric())
                && p.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        match s.split_once('/') {
            Some((namespace, name)) if valid(namespace) && valid(name) => Ok(SecretRef {
                namespace: namespace.into(),
                name: name.into(),
            }),
            _ => Err(SelfSignedError::SecretRef(s.into())),
        }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Lifetimes and rotation thresholds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Lifetime of a serving certificate (default 90 days); never past its CA's.
    pub cert_validity: Duration,
    /// Re-issue the serving certificate this long before it expires (30 days).
    pub cert_rotate_before: Duration,
    /// Lifetime of a CA (default 10 years).
    pub ca_validity: Duration,
    /// Add a successor CA this long before the CA expires (1 year).
    pub ca_rotate_before: Duration,
    /// How long a new CA is in the bundle before it signs (default 1 minute).
    pub propagation: Duration,
}

const DAY: u64 = 24 * 3600;

impl Default for Policy {
    fn default() -> Self {
        Policy {
            cert_validity: Duration::from_secs(90 * DAY),
            cert_rotate_before: Duration::from_secs(30 * DAY),
            ca_validity: Duration::from_secs(3650 * DAY),
            ca_rotate_before: Duration::from_secs(365 * DAY),
            propagation: Duration::from_secs(60),
        }
    }
}

impl Policy {
    /// Refuses thresholds under which a certificate would be renewed
    /// forever or a new CA would sign before it is registered.
    pub fn check(&self) -> Result<()> {
        let err = |m: String| Err(SelfSignedError::Policy(m));
        let d = |d: Duration| format_duration(d);
        if self.cert_rotate_before + self.propagation >= self.cert_validity {
            return err(format!(
                "cert-rotate-before ({}) + ca-propagation ({}) must be shorter than cert-validity ({})",
                d(self.cert_rotate_before),
                d(self.propagation),
                d(self.cert_validity)
            ));
        }
        if self.ca_rotate_before >= self.ca_validity {
            return err(format!(
                "ca-rotate-before ({}) must be shorter than ca-validity ({})",
                d(self.ca_rotate_before),
                d(self.ca_validity)
            ));
        }
        if self.ca_rotate_before < self.cert_rotate_before + self.propagation {
            return err(format!(
                "ca-rotate-before ({}) must be at least cert-rotate-before ({}) + ca-propagation ({}), so certificates signed by the old CA are replaced in time",
                d(self.ca_rotate_before),
                d(self.cert_rotate_before),
                d(self.propagation)
            ));
        }
        Ok(())
    }
}

/// `90d`, `36h`, `15m`, `45s`, `1.5s`, or plain seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, DurationError> {
    let t = s.trim();
    let (number, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => DAY as f64,
        _ => {
            return Err(DurationError::Unit {
                text: s.to_string(),
            });
        }
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n * scale >= 0.001 && n * scale < 1e11 => {
            Ok(Duration::from_secs_f64(n * scale))
        }
        _ => Err(DurationError::Value {
            text: s.to_string(),
        }),
    }
}

/// The shortest exact rendering of [`parse_duration`]'s forms.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    if d.subsec_nanos() != 0 {
        format!("{}s", d.as_secs_f64())
    } else if s >= DAY && s.is_multiple_of(DAY) {
        format!("{}d", s / DAY)
    } else if s >= 3600 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The PEM texts the Secret holds.
#[derive(Clone, PartialEq, Eq)]
pub struct Material {
    /// Every trusted CA, newest first: the `caBundle`.
    pub ca_bundle: String,
    /// The key of the newest CA.
    pub ca_key: String,
    pub cert: String,
    pub key: String,
}

/// Certificates in full, keys redacted: a Debug print never leaks a key.
impl fmt::Debug for Material {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Material")
            .field("ca_bundle", &self.ca_bundle)
            .field("ca_key", &"<redacted>")
            .field("cert", &self.cert)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl Material {
    /// The four keys of a Secret; `Err` names what is missing.
    pub fn from_secret(secret: &Secret) -> std::result::Result<Material, MaterialError> {
        let data = secret.data.as_ref();
        let get = |key: &'static str| -> std::result::Result<String, MaterialError> {
            let bytes = data
                .and_then(|d| d.get(key))
                .ok_or(MaterialError::Missing { key })?;
            String::from_utf8(bytes.0.clone()).map_err(|_| MaterialError::NotText { key })
        };
        Ok(Material {
            ca_bundle: get(CA_CRT)?,
            ca_key: get(CA_KEY)?,
            cert: get(TLS_CRT)?,
            key: get(TLS_KEY)?,
        })
    }

    fn data(&self) -> BTreeMap<String, ByteString> {
        [
            (CA_CRT, &self.ca_bundle),
            (CA_KEY, &self.ca_key),
            (TLS_CRT, &self.cert),
            (TLS_KEY, &self.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect()
    }

    /// Certificate and key in one PEM text: one file, so a rename swaps both
    /// at once (the server reads the pair from it).
    pub fn serving_pem(&self) -> String {
        let mut pem = self.cert.clone();
        if !pem.ends_with('\n') {
            pem.push('\n');
        }
        pem.push_str(&self.key);
        pem
    }

    /// The number of CAs in the bundle.
    pub fn ca_count(&self) -> usize {
        CertificateDer::pem_slice_iter(self.ca_bundle.as_bytes()).count()
    }
}

/// What [`plan`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    Keep,
    Write {
        material: Material,
        /// Why, one entry per change ("a new CA: ...", "re-issued the serving
        /// certificate: ...").
        reasons: Vec<String>,
    },
}

/// A CA of the bundle.
struct Ca {
    pem: String,
    der: CertificateDer<'static>,
    not_before: i64,
    not_after: i64,
    public_key: Vec<u8>,
}

fn ca_from_der(der: CertificateDer<'static>) -> std::result::Result<Ca, MaterialError> {
    let (not_before, not_after, public_key) = {
        let (_, x509) = x509_parser::parse_x509_certificate(&der)
            .map_err(|e| MaterialError::CaUnreadable(e.to_string()))?;
        (
            x509.validity().not_before.timestamp(),
            x509.validity().not_after.timestamp(),
            x509.public_key().subject_public_key.data.to_vec(),
        )
    };
    Ok(Ca {
        pem: pem_encode("CERTIFICATE", &der),
        der,
        not_before,
        not_after,
        public_key,
    })
}

fn parse_ca_bundle(pem: &str) -> std::result::Result<Vec<Ca>, MaterialError> {
    let cas = CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|der| ca_from_der(der.map_err(|e| MaterialError::CaNotPem(e.to_string()))?))
        .collect::<std::result::Result<Vec<Ca>, MaterialError>>()?;
    if cas.is_empty() {
        return Err(MaterialError::NoCa);
    }
    Ok(cas)
}

/// RFC 7468 PEM, 64 columns.
fn pem_encode(tag: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {tag}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {tag}-----\n"));
    out
}

fn unix(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

fn at(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| secs.to_string())
}

fn offset(secs: i64) -> Result<time::OffsetDateTime> {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .map_err(|e| SelfSignedError::Generate(e.to_string()))
}

fn gen_err(e: rcgen::Error) -> SelfSignedError {
    SelfSignedError::Generate(e.to_string())
}

/// A new CA valid from `now` for `validity`: (certificate PEM, key PEM).
fn new_ca(label: &str, now: i64, validity: Duration) -> Result<(String, String)> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate().map_err(gen_err)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
    // Each CA has its own subject, so a bundle of two is unambiguous.
    params.distinguished_name.push(
        DnType::CommonName,
        format!("katalog CA {label} {}", at(now)),
    );
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = offset(now - BACKDATE.as_secs() as i64)?;
    params.not_after = offset(now + validity.as_secs() as i64)?;
    let cert = params.self_signed(&key).map_err(gen_err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate for `names`, signed by the CA, valid from `now`
/// until `not_after`: (certificate PEM, key PEM).
fn issue(
    ca_pem: &str,
    ca_key_pem: &str,
    names: &[String],
    now: i64,
    not_after: i64,
) -> Result<(String, String)> {
    use rcgen::{Issuer, KeyPair};
    let ca_key = KeyPair::from_pem(ca_key_pem).map_err(gen_err)?;
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key).map_err(gen_err)?;
    let mut params = crate::certs::tls::serving_params(names).map_err(gen_err)?;
    params.not_before = offset(now - BACKDATE.as_secs() as i64)?;
    params.not_after = offset(not_after)?;
    let key = KeyPair::generate().map_err(gen_err)?;
    let cert = params.signed_by(&key, &issuer).map_err(gen_err)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The serving certificate's expiry if a client trusting `cas` accepts it,
/// now, for every one of `names`, and its key belongs to it.
fn serving_expiry(
    material: &Material,
    cas: &[Ca],
    names: &[String],
    now: i64,
) -> std::result::Result<i64, CertificateError> {
    crate::certs::tls::certified_key_from_pem(
        material.cert.as_bytes(),
        material.key.as_bytes(),
        TLS_CRT,
        TLS_KEY,
    )?;
    let leaf = CertificateDer::pem_slice_iter(material.cert.as_bytes())
        .next()
        .and_then(Result::ok)
        .ok_or(CertificateError::NoCertificate)?;
    let not_after = x509_parser::parse_x509_certificate(&leaf)
        .map(|(_, x)| x.validity().not_after.timestamp())
        .map_err(|e| CertificateError::Unreadable(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots
            .add(ca.der.clone())
            .map_err(CertificateError::Anchor)?;
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()?;
    let when = UnixTime::since_unix_epoch(Duration::from_secs(now.max(0) as u64));
    for name in names {
        let server_name =
            ServerName::try_from(name.clone()).map_err(|source| CertificateError::Name {
                name: name.clone(),
                source,
            })?;
        verifier
            .verify_server_cert(&leaf, &[], &server_name, &[], when)
            .map_err(|source| CertificateError::NotValidFor {
                name: name.clone(),
                source,
            })?;
    }
    Ok(not_after)
}

/// The DNS names and IP addresses a certificate covers (none when unreadable).
fn subject_alt_names(cert_pem: &str) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Some(der) = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .next()
        .and_then(Result::ok)
    else {
        return Vec::new();
    };
    let Ok((_, x509)) = x509_parser::parse_x509_certificate(&der) else {
        return Vec::new();
    };
    let Ok(Some(san)) = x509.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some(d.to_string()),
            GeneralName::IPAddress(b) => match <[u8; 4]>::try_from(*b) {
                Ok(v4) => Some(std::net::Ipv4Addr::from(v4).to_string()),
                Err(_) => <[u8; 16]>::try_from(*b)
                    .ok()
                    .map(|v6| std::net::Ipv6Addr::from(v6).to_string()),
            },
            _ => None,
        })
        .collect()
}

/// A new CA and a serving certificate it signs, valid from `now` (seconds).
fn fresh(
    label: &str,
    names: &[String],
    policy: &Policy,
    now: i64,
    why: &str,
) -> Result<(Material, Vec<String>)> {
    let secs = |d: Duration| d.as_secs() as i64;
    let (ca_pem, ca_key) = new_ca(label, now, policy.ca_validity)?;
    let ca_expiry = now + secs(policy.ca_validity);
    let (cert, key) = issue(
        &ca_pem,
        &ca_key,
        names,
        now,
        (now + secs(policy.cert_validity)).min(ca_expiry),
    )?;
    Ok((
        Material {
            ca_bundle: ca_pem,
            ca_key,
            cert,
            key,
        },
        vec![format!("a new CA and serving certificate: {why}")],
    ))
}

/// Decide what the Secret should hold at `now`; `label` names the new CAs.
pub fn plan(
    existing: std::result::Result<&Material, &str>,
    label: &str,
    names: &[String],
    policy: &Policy,
    now: SystemTime,
) -> Result<Plan> {
    let now = unix(now);
    let secs = |d: Duration| d.as_secs() as i64;
    let fresh = |why: String| -> Result<Plan> {
        let (material, reasons) = fresh(label, names, policy, now, &why)?;
        Ok(Plan::Write { material, reasons })
    };
    let m = match existing {
        Ok(m) => m,
        Err(why) => return fresh(why.to_string()),
    };
    let cas = match parse_ca_bundle(&m.ca_bundle) {
        Ok(cas) => cas,
        Err(e) => return fresh(e.to_string()),
    };
    let Ok(ca_key) = rcgen::KeyPair::from_pem(&m.ca_key) else {
        return fresh("ca.key is not a private key".into());
    };
    let Some(signer) = cas.iter().position(|c| c.public_key == ca_key.der_bytes()) else {
        return fresh("ca.key belongs to no CA of ca.crt".into());
    };
    if cas[signer].not_after <= now {
        return fresh(format!("the CA expired at {}", at(cas[signer].not_after)));
    }

    let mut reasons = Vec::new();
    let mut trusted: Vec<Ca> = Vec::with_capacity(cas.len() + 1);
    for (i, ca) in cas.into_iter().enumerate() {
        if ca.not_after <= now {
            reasons.push(format!(
                "dropped a CA that expired at {} from ca.crt",
                at(ca.not_after)
            ));
        } else if i == signer {
            trusted.insert(0, ca);
        } else {
            trusted.push(ca);
        }
    }
    // What signs a certificate issued now: the newest CA, except in the
    // step that adds a successor, which is not in any caBundle yet (the
    // previous CA signs, and its certificates are renewed before the step
    // adding the CA is `propagation` old).
    let signing = (
        trusted[0].pem.clone(),
        m.ca_key.clone(),
        trusted[0].not_after,
    );
    // A CA added by a recent step (this replica's or another's) is not in
    // every caBundle yet either: while it is younger than `propagation`, a
    // certificate that is still valid is kept rather than re-issued by it.
    let newest_is_young = trusted.len() > 1
        && now - (trusted[0].not_before + secs(BACKDATE)) < secs(policy.propagation);
    let mut ca_key_pem = m.ca_key.clone();
    let mut new_ca_added = false;
    if trusted[0].not_after - now < secs(policy.ca_rotate_before) {
        let (pem, key) = new_ca(label, now, policy.ca_validity)?;
        let der = CertificateDer::from_pem_slice(pem.as_bytes())
            .map_err(|e| SelfSignedError::Generate(e.to_string()))?;
        let ca = ca_from_der(der).map_err(|e| SelfSignedError::Generate(e.to_string()))?;
        reasons.push(format!(
            "a new CA: the CA expires at {}, within ca-rotate-before ({})",
            at(trusted[0].not_after),
            format_duration(policy.ca_rotate_before)
        ));
        trusted.insert(0, ca);
        ca_key_pem = key;
        new_ca_added = true;
    }

    // Renew early enough that, after a CA rotation, the next renewal comes
    // no sooner than `propagation` later.
    let margin = secs(policy.cert_rotate_before)
        + if new_ca_added {
            secs(policy.propagation)
        } else {
            0
        };
    let (cert, key) = match serving_expiry(m, &trusted, names, now) {
        Ok(expiry) if expiry - now >= margin => (m.cert.clone(), m.key.clone()),
        Ok(_) if newest_is_young && !new_ca_added => (m.cert.clone(), m.key.clone()),
        verdict => {
            let why = match verdict {
                Ok(expiry) => format!(
                    "it expires at {}, within cert-rotate-before ({})",
                    at(expiry),
                    format_duration(policy.cert_rotate_before)
                ),
                Err(e) => e.to_string(),
            };
            let (ca_pem, ca_key, ca_expiry) = &signing;
            let not_after = (now + secs(policy.cert_validity)).min(*ca_expiry);
            // Keep covering what the certificate covered: replicas started
            // with other names (a rolling update that renames the Service)
            // then accept it instead of re-issuing it for themselves in turn.
            let mut covered = names.to_vec();
            for name in subject_alt_names(&m.cert) {
                if !covered.contains(&name) {
                    covered.push(name);
                }
            }
            reasons.push(format!("re-issued the serving certificate: {why}"));
            issue(ca_pem, ca_key, &covered, now, not_after)?
        }
    };
    let material = Material {
        ca_bundle: trusted.iter().map(|c| c.pem.as_str()).collect(),
        ca_key: ca_key_pem,
        cert,
        key,
    };
    if reasons.is_empty() && material == *m {
        Ok(Plan::Keep)
    } else {
        if reasons.is_empty() {
            reasons.push("normalized ca.crt".into());
        }
        Ok(Plan::Write { material, reasons })
    }
}

/// The private directory a replica serves from: `tls.pem` (certificate and
/// key, one file so a rename swaps both) and `ca.crt`. Removed when dropped.
#[derive(Debug)]
pub struct ServingFiles {
    dir: PathBuf,
}

impl ServingFiles {
    /// Creates `dir` (mode 0700). It must not exist yet: a directory made
    /// by someone else beforehand is refused, not trusted with the key.
    pub fn create(dir: PathBuf) -> Result<ServingFiles> {
        use std::os::unix::fs::DirBuilderExt as _;
        let io = |source| SelfSignedError::Files {
            path: dir.display().to_string(),
            source,
        };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        Ok(ServingFiles { dir })
    }

    /// A new directory in the temporary directory whose name starts with
    /// `prefix`, followed by the process id and a random part.
    pub fn create_private(prefix: &str) -> Result<ServingFiles> {
        use std::hash::{BuildHasher as _, Hasher as _};
        let mut last = None;
        for _ in 0..8 {
            let random = std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish();
            let dir =
                std::env::temp_dir().join(format!("{prefix}-{}-{random:016x}", std::process::id()));
            match ServingFiles::create(dir) {
                Ok(files) => return Ok(files),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| SelfSignedError::Files {
            path: prefix.into(),
            source: std::io::Error::other("no directory could be created"),
        }))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Certificate chain and key (PEM): the server's `tls_cert` and `tls_key`.
    pub fn pair(&self) -> PathBuf {
        self.dir.join("tls.pem")
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join(CA_CRT)
    }

    /// Writes both files, each by a rename.
    pub fn write(&self, material: &Material) -> Result<()> {
        write_atomically(&self.pair(), material.serving_pem().as_bytes(), 0o600)?;
        write_atomically(&self.ca(), material.ca_bundle.as_bytes(), 0o644)
    }
}

impl Drop for ServingFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let io = |source| SelfSignedError::Files {
        path: path.display().to_string(),
        source,
    };
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// What one [`SelfSigned::ensure`] did to the Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The Secret holds what is served and needs nothing.
    Unchanged,
    /// The Secret holds another usable certificate (another replica
    /// rotated, or it was replaced by hand): it is served from now on.
    Adopted,
    Created,
    Updated,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Unchanged => "unchanged",
            Action::Adopted => "adopted",
            Action::Created => "created",
            Action::Updated => "updated",
        })
    }
}

/// The outcome of [`SelfSigned::ensure`].
#[derive(Clone, Debug)]
pub struct Applied {
    pub action: Action,
    /// Why it was written (empty when nothing was).
    pub reasons: Vec<String>,
    /// What to serve now.
    pub material: Material,
}

/// A certificate kept in a Secret; see the module documentation.
#[derive(Clone, Debug)]
pub struct SelfSigned {
    pub secret: SecretRef,
    /// The names the serving certificate must be valid for
    /// ([`serving_names`](crate::certs::tls::serving_names)).
    pub names: Vec<String>,
    pub policy: Policy,
    /// How often expiry is checked (default 1 minute); a watch on the
    /// Secret catches deletions and edits at once.
    pub check_interval: Duration,
    /// First and longest wait before a failed watch is restarted.
    pub backoff: (Duration, Duration),
}

impl SelfSigned {
    /// The Secret `secret`, for `localhost`, `127.0.0.1`, `::1` and `extra_names`.
    pub fn new(secret: SecretRef, extra_names: &[String]) -> SelfSigned {
        SelfSigned {
            secret,
            names: serving_names(extra_names),
            policy: Policy::default(),
            check_interval: Duration::from_secs(60),
            backoff: (Duration::from_millis(200), Duration::from_secs(10)),
        }
    }

    fn api(&self, client: &Client) -> Api<Secret> {
        Api::namespaced(client.clone(), &self.secret.namespace)
    }

    /// Make the Secret hold a usable certificate, once. `serving` is what
    /// this replica serves now (none at start): a Secret that was deleted or
    /// damaged is restored from it rather than replaced by a new CA.
    pub async fn ensure(&self, client: &Client, serving: Option<&Material>) -> Result<Applied> {
        self.policy.check()?;
        let api = self.api(client);
        let label = self.secret.to_string();
        for _ in 0..WRITE_ATTEMPTS {
            let existing =
                api.get_opt(&self.secret.name)
                    .await
                    .map_err(|source| SelfSignedError::Read {
                        secret: self.secret.clone(),
                        source,
                    })?;
            let stored = match &existing {
                Some(s) => Material::from_secret(s).map_err(Stored::Unusable),
                None => Err(Stored::Missing),
            };
            // A Secret katalog did not write is used only when it holds the
            // four keys (made by hand for katalog); anything else, such as
            // another tool's TLS Secret, is left alone.
            if let (Some(secret), Err(Stored::Unusable(why))) = (&existing, &stored) {
                let ours = secret
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(MANAGED_BY_LABEL))
                    .is_some_and(|v| v == MANAGER);
                if !ours {
                    return Err(SelfSignedError::Foreign {
                        secret: self.secret.clone(),
                        why: why.clone(),
                    });
                }
            }
            let now = SystemTime::now();
            let stored_plan = match &stored {
                Ok(m) => Some(plan(Ok(m), &label, &self.names, &self.policy, now)?),
                Err(_) => None,
            };
            if let (Ok(m), Some(Plan::Keep)) = (&stored, &stored_plan) {
                let action = match serving {
                    Some(s) if s != m => Action::Adopted,
                    _ => Action::Unchanged,
                };
                return Ok(Applied {
                    action,
                    reasons: Vec::new(),
                    material: m.clone(),
                });
            }
            // The Secret needs a change. When this replica serves something
            // else that needs none, that is restored: a deleted or damaged
            // Secret does not cost a new CA.
            let elsewhere = serving.filter(|s| Ok(*s) != stored.as_ref());
            let (material, reasons) = match (elsewhere, stored_plan) {
                (Some(s), stored_plan) => {
                    let why = match (&stored, &stored_plan) {
                        (Err(e), _) => e.to_string(),
                        (Ok(_), Some(Plan::Write { reasons, .. })) => {
                            format!("the Secret's own would need {}", reasons.join("; "))
                        }
                        (Ok(_), _) => "the Secret differs".into(),
                    };
                    let restored = format!("restored what is served: {why}");
                    match (
                        plan(Ok(s), &label, &self.names, &self.policy, now)?,
                        stored_plan,
                    ) {
                        (Plan::Keep, _) => (s.clone(), vec![restored]),
                        // Both need a change: renew the Secret's own.
                        (_, Some(Plan::Write { material, reasons })) => (material, reasons),
                        (Plan::Write { material, reasons }, _) => {
                            (material, std::iter::once(restored).chain(reasons).collect())
                        }
                    }
                }
                (None, Some(Plan::Write { material, reasons })) => (material, reasons),
                (None, _) => {
                    let why = stored
                        .as_ref()
                        .err()
                        .map_or_else(String::new, ToString::to_string);
                    fresh(&label, &self.names, &self.policy, unix(now), &why)?
                }
            };
            match self.write(&api, existing.as_ref(), &material).await {
                Ok(action) => {
                    tracing::info!(
                        secret = %self.secret,
                        %action,
                        reasons = %reasons.join("; "),
                        "self-signed certificate written"
                    );
                    return Ok(Applied {
                        action,
                        reasons,
                        material,
                    });
                }
                // Another writer got there first (or deleted the Secret
                // being replaced): read again. A 404 on create is a missing
                // namespace, which no retry fixes.
                Err(kube::Error::Api(s))
                    if s.code == 409 || (s.code == 404 && existing.is_some()) =>
                {
                    continue;
                }
                Err(source) => {
                    return Err(SelfSignedError::Write {
                        secret: self.secret.clone(),
                        source,
                    });
                }
            }
        }
        Err(SelfSignedError::Contended(self.secret.clone()))
    }

    async fn write(
        &self,
        api: &Api<Secret>,
        existing: Option<&Secret>,
        material: &Material,
    ) -> std::result::Result<Action, kube::Error> {
        let mut metadata = existing.map(|s| s.metadata.clone()).unwrap_or(ObjectMeta {
            name: Some(self.secret.name.clone()),
            namespace: Some(self.secret.namespace.clone()),
            ..ObjectMeta::default()
        });
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(MANAGED_BY_LABEL.into(), MANAGER.into());
        metadata.managed_fields = None;
        // Other keys someone added are kept.
        let mut data = existing.and_then(|s| s.data.clone()).unwrap_or_default();
        data.extend(material.data());
        let secret = Secret {
            metadata,
            // The type of a Secret cannot change: keep the existing one.
            type_: existing
                .and_then(|s| s.type_.clone())
                .or_else(|| Some("kubernetes.io/tls".into())),
            data: Some(data),
            ..Secret::default()
        };
        match existing {
            None => {
                api.create(&PostParams::default(), &secret).await?;
                Ok(Action::Created)
            }
            Some(_) => {
                api.replace(&self.secret.name, &PostParams::default(), &secret)
                    .await?;
                Ok(Action::Updated)
            }
        }
    }

    /// At start, before the server listens: ensure the Secret (a client from
    /// `kubeconfig`, or inferred as kubectl does) and write what to serve
    /// into `files`.
    pub fn prepare(&self, kubeconfig: Option<&Path>, files: ServingFiles) -> Result<Prepared> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SelfSignedError::Client(e.to_string()))?;
        let applied = rt.block_on(async {
            let client = crate::cluster::client(kubeconfig)
                .await
                .map_err(|e| SelfSignedError::Client(e.to_string()))?;
            self.ensure(&client, None).await
        })?;
        files.write(&applied.material)?;
        Ok(Prepared {
            ca_bundle: Arc::new(ArcSwap::from_pointee(
                applied.material.ca_bundle.as_bytes().to_vec(),
            )),
            files,
            applied,
        })
    }
}

/// What [`SelfSigned::prepare`] made: the files the server is started from
/// and the `caBundle` to register.
pub struct Prepared {
    pub files: ServingFiles,
    pub ca_bundle: SharedCaBundle,
    pub applied: Applied,
}

impl Prepared {
    /// Keep the certificate (see [`SelfSigned::spawn`]) for a running server:
    /// a change is written to the files, loaded by the server at once, and
    /// handed to the housekeeper as the new `caBundle`.
    pub fn keep(
        self,
        selfsigned: SelfSigned,
        kubeconfig: Option<PathBuf>,
        state: Arc<crate::serving::state::State>,
    ) -> KeeperHandle {
        let Prepared {
            files,
            ca_bundle,
            applied,
        } = self;
        let files = Arc::new(files);
        let on_change = {
            let files = files.clone();
            move |m: &Material| -> std::result::Result<(), ChangeError> {
                files.write(m)?;
                state.reload_cert()?;
                ca_bundle.store(Arc::new(m.ca_bundle.as_bytes().to_vec()));
                Ok(())
            }
        };
        let mut handle = selfsigned.spawn(kubeconfig, applied.material, on_change);
        handle.files = Some(files);
        handle
    }
}

/// What the keeper has done so far.
#[derive(Clone, Debug, Default)]
pub struct KeeperStatus {
    /// Times the Secret was checked.
    pub checks: u64,
    /// Checks that changed what is served (rotation or adoption).
    pub changes: u64,
    /// Checks that wrote the Secret.
    pub writes: u64,
    pub errors: u64,
    pub last_error: Option<String>,
    /// The last check that wrote or adopted something.
    pub last_change: Option<(Action, Vec<String>)>,
}

/// A running keeper; [`KeeperHandle::stop`] ends it.
pub struct KeeperHandle {
    status: Arc<Mutex<KeeperStatus>>,
    current: Arc<ArcSwap<Material>>,
    stop: watch::Sender<bool>,
    done: std::sync::mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
    files: Option<Arc<ServingFiles>>,
}

impl KeeperHandle {
    pub fn status(&self) -> KeeperStatus {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// What is served now.
    pub fn current(&self) -> Arc<Material> {
        self.current.load_full()
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Stops the thread; waits at most 5 s for it (a request to the
    /// apiserver in flight is abandoned).
    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            match self.done.recv_timeout(Duration::from_secs(5)) {
                Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = t.join();
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    tracing::warn!("the certificate keeper did not stop in time; leaving it");
                }
            }
        }
    }
}

impl Drop for KeeperHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl SelfSigned {
    /// Keeps the Secret and `serving` in step on a thread of its own: at
    /// start, on every watch event on the Secret and every `check_interval`.
    /// Each change of what is served is handed to `on_change`; until that
    /// succeeds, what was served before still counts as served, so the next
    /// check hands the change over again.
    pub fn spawn<E: fmt::Display>(
        self,
        kubeconfig: Option<PathBuf>,
        serving: Material,
        on_change: impl FnMut(&Material) -> std::result::Result<(), E> + Send + 'static,
    ) -> KeeperHandle {
        let status = Arc::new(Mutex::new(KeeperStatus::default()));
        let current = Arc::new(ArcSwap::from_pointee(serving));
        let (stop_tx, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let thread = {
            let status = status.clone();
            let current = current.clone();
            std::thread::Builder::new()
                .name("katalog-certificates".into())
                .spawn(move || {
                    match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => {
                            rt.block_on(self.run(kubeconfig, current, status, on_change, stop_rx))
                        }
                        Err(e) => tracing::error!(error = %e, "the certificate keeper did not start: certificates will not rotate"),
                    }
                    let _ = done_tx.send(());
                })
        };
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(error = %e, "the certificate keeper thread did not start: certificates will not rotate");
                None
            }
        };
        KeeperHandle {
            status,
            current,
            stop: stop_tx,
            done: done_rx,
            thread,
            files: None,
        }
    }

    async fn run<E: fmt::Display>(
        self,
        kubeconfig: Option<PathBuf>,
        current: Arc<ArcSwap<Material>>,
        status: Arc<Mutex<KeeperStatus>>,
        mut on_change: impl FnMut(&Material) -> std::result::Result<(), E>,
        mut stop: watch::Receiver<bool>,
    ) {
        let client = loop {
            let made = tokio::select! {
                _ = stop.changed() => return,
                c = crate::cluster::client(kubeconfig.as_deref()) => c,
            };
            match made {
                Ok(c) => break c,
                Err(e) => {
                    tracing::warn!(error = %e, "certificates: no Kubernetes client; retrying");
                    tokio::select! {
                        _ = stop.changed() => return,
                        _ = tokio::time::sleep(self.backoff.1) => {}
                    }
                }
            }
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let name = self.secret.name.clone();
        let watcher = tokio::spawn(crate::cluster::housekeeper::watch_loop(
            self.api(&client),
            "Secret",
            crate::cluster::housekeeper::Selector {
                labels: None,
                fields: Some(format!("metadata.name={name}")),
            },
            move |n: &str| n == name,
            tx,
            self.backoff,
        ));
        // The first tick is at once: what changed since `prepare` is seen.
        let mut tick = tokio::time::interval(self.check_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                t = rx.recv() => {
                    if t.is_none() { break }
                    // A burst of events (our own write among them) is one check.
                    tokio::select! {
                        _ = stop.changed() => break,
                        _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    }
                    while rx.try_recv().is_ok() {}
                }
                _ = tick.tick() => {}
            }
            let serving = current.load_full();
            let result = tokio::select! {
                _ = stop.changed() => break,
                r = self.ensure(&client, Some(&serving)) => r,
            };
            let Ok(mut s) = status.lock().map(|s| s.clone()) else {
                break;
            };
            s.checks += 1;
            // Served only once the status counts it: whoever sees the new
            // certificate sees the change in the status too.
            let mut serve = None;
            match result {
                Ok(applied) => {
                    if applied.action != Action::Unchanged {
                        s.last_change = Some((applied.action, applied.reasons.clone()));
                    }
                    if matches!(applied.action, Action::Created | Action::Updated) {
                        s.writes += 1;
                    }
                    if applied.material != *serving {
                        match on_change(&applied.material) {
                            Ok(()) => {
                                s.changes += 1;
                                tracing::info!(
                                    secret = %self.secret,
                                    action = %applied.action,
                                    cas = applied.material.ca_count(),
                                    "serving a new self-signed certificate"
                                );
                                serve = Some(applied.material);
                            }
                            Err(e) => {
                                tracing::error!(secret = %self.secret, error = %e, "the new certificate could not be served; the previous one keeps serving; retrying at the next check");
                                s.errors += 1;
                                s.last_error = Some(e.to_string());
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(secret = %self.secret, error = %e, "certificates: check failed; retrying on the next trigger");
                    s.errors += 1;
                    s.last_error = Some(e.to_string());
                }
            }
            if let Ok(mut shared) = status.lock() {
                *shared = s;
            }
            if let Some(material) = serve {
                current.store(Arc::new(material));
            }
        }
        watcher.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            cert_validity: Duration::from_secs(100),
            cert_rotate_before: Duration::from_secs(30),
            ca_validity: Duration::from_secs(1000),
            ca_rotate_before: Duration::from_secs(200),
            propagation: Duration::from_secs(10),
        }
    }

    fn names() -> Vec<String> {
        serving_names(&["katalog.katalog-system.svc".into()])
    }

    fn written(p: Plan) -> (Material, Vec<String>) {
        match p {
            Plan::Write { material, reasons } => (material, reasons),
            Plan::Keep => panic!("expected a write, got Keep"),
        }
    }

    fn plan_at(m: std::result::Result<&Material, &str>, t: SystemTime) -> Plan {
        plan(m, "test/certs", &names(), &policy(), t).expect("a plan")
    }

    /// Which CAs of the bundle the serving certificate verifies against at `t`.
    fn signers(m: &Material, t: SystemTime) -> Vec<String> {
        parse_ca_bundle(&m.ca_bundle)
            .expect("a bundle")
            .into_iter()
            .filter(|ca| serving_expiry(m, std::slice::from_ref(ca), &names(), unix(t)).is_ok())
            .map(|ca| ca.pem)
            .collect()
    }

    #[test]
    fn a_missing_secret_gets_a_ca_and_a_certificate_that_are_then_kept() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, reasons) = written(plan_at(Err("the Secret does not exist"), t0));
        assert_eq!(
            reasons,
            ["a new CA and serving certificate: the Secret does not exist"]
        );
        assert_eq!(m.ca_count(), 1);
        assert_eq!(signers(&m, t0).len(), 1);
        // Loads as the server loads it: one file with the pair.
        let pem = m.serving_pem();
        crate::certs::tls::certified_key_from_pem(pem.as_bytes(), pem.as_bytes(), "a", "a")
            .expect("the pair loads from one file");
        assert_eq!(plan_at(Ok(&m), t0), Plan::Keep);
        assert_eq!(plan_at(Ok(&m), t0 + Duration::from_secs(69)), Plan::Keep);
    }

    #[test]
    fn the_serving_certificate_is_reissued_within_rotate_before_by_the_same_ca() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let t1 = t0 + Duration::from_secs(71);
        let (r, reasons) = written(plan_at(Ok(&m), t1));
        assert_eq!(r.ca_bundle, m.ca_bundle);
        assert_eq!(r.ca_key, m.ca_key);
        assert_ne!(r.cert, m.cert);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].starts_with("re-issued the serving certificate: it expires at ")
                && reasons[0].ends_with("within cert-rotate-before (30s)"),
            "{reasons:?}"
        );
        assert_eq!(signers(&r, t1), signers(&m, t0));
        assert_eq!(plan_at(Ok(&r), t1), Plan::Keep);
    }

    #[test]
    fn damage_is_repaired_with_the_least_change() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let (other, _) = written(plan_at(Err("none"), t0));

        // A key that is not the certificate's: a new certificate, same CA.
        let wrong_key = Material {
            key: other.key.clone(),
            ..m.clone()
        };
        let (r, reasons) = written(plan_at(Ok(&wrong_key), t0));
        assert_eq!((&r.ca_bundle, &r.ca_key), (&m.ca_bundle, &m.ca_key));
        assert!(
            reasons[0].starts_with(
                "re-issued the serving certificate: failed to use the certificate and key"
            ),
            "{reasons:?}"
        );

        // A certificate from another CA: re-issued by this one.
        let foreign = Material {
            cert: other.cert.clone(),
            key: other.key.clone(),
            ..m.clone()
        };
        let (r, reasons) = written(plan_at(Ok(&foreign), t0));
        assert_eq!(r.ca_bundle, m.ca_bundle);
        assert!(
            reasons[0].contains("it is not valid for localhost"),
            "{reasons:?}"
        );

        // Names the certificate does not cover: re-issued.
        let (r, reasons) = written(
            plan(
                Ok(&m),
                "test/certs",
                &serving_names(&["katalog.other.svc".into()]),
                &policy(),
                t0,
            )
            .unwrap(),
        );
        assert_eq!(r.ca_bundle, m.ca_bundle);
        assert!(reasons[0].contains("katalog.other.svc"), "{reasons:?}");

        // No usable CA: everything is new.
        for (broken, why) in [
            (
                Material {
                    ca_key: other.ca_key.clone(),
                    ..m.clone()
                },
                "a new CA and serving certificate: ca.key belongs to no CA of ca.crt",
            ),
            (
                Material {
                    ca_bundle: "junk".into(),
                    ..m.clone()
                },
                "a new CA and serving certificate: ca.crt holds no certificate",
            ),
            (
                Material {
                    ca_key: "junk".into(),
                    ..m.clone()
                },
                "a new CA and serving certificate: ca.key is not a private key",
            ),
        ] {
            let (r, reasons) = written(plan_at(Ok(&broken), t0));
            assert_eq!(reasons, [why]);
            assert_ne!(r.ca_bundle, m.ca_bundle);
            assert_eq!(plan_at(Ok(&r), t0), Plan::Keep);
        }

        // Past the CA's expiry: a new CA.
        let late = t0 + Duration::from_secs(1001);
        let (_, reasons) = written(plan_at(Ok(&m), late));
        assert!(reasons[0].contains("the CA expired at"), "{reasons:?}");
    }

    /// The keeper's life over 1.3 CA lifetimes, checked every second, for
    /// certificate lifetimes that put a renewal due at every distance from
    /// the CA rotation: the served certificate is always trusted by the
    /// bundle, every check after a write keeps, the bundle holds one or two
    /// CAs, and a CA signs only once it has been in the bundle for
    /// `propagation`.
    #[test]
    fn rotation_over_time_never_serves_an_untrusted_certificate() {
        crate::certs::tls::install_crypto_provider();
        for validity in [90, 91, 96, 100] {
            let p = Policy {
                cert_validity: Duration::from_secs(validity),
                ..policy()
            };
            let plan_at = |m: std::result::Result<&Material, &str>, t| {
                plan(m, "test/certs", &names(), &p, t).expect("a plan")
            };
            let t0 = SystemTime::now();
            let (mut m, _) = written(plan_at(Err("none"), t0));
            let mut first_seen: BTreeMap<String, u64> = BTreeMap::new();
            first_seen.insert(m.ca_bundle.clone(), 0);
            let (mut cert_rotations, mut ca_rotations, mut drops) = (0, 0, 0);
            for s in 1..=1300u64 {
                let t = t0 + Duration::from_secs(s);
                let at = format!("validity {validity}s, at +{s}s");
                if let Plan::Write { material, reasons } = plan_at(Ok(&m), t) {
                    for r in &reasons {
                        if r.starts_with("re-issued") {
                            cert_rotations += 1;
                        } else if r.starts_with("a new CA:") {
                            ca_rotations += 1;
                        } else if r.starts_with("dropped") {
                            drops += 1;
                        } else {
                            panic!("{at}: unexpected {r}");
                        }
                    }
                    m = material;
                    assert_eq!(plan_at(Ok(&m), t), Plan::Keep, "{at}");
                }
                let cas = parse_ca_bundle(&m.ca_bundle).unwrap();
                assert!((1..=2).contains(&cas.len()), "{at}: {} CAs", cas.len());
                for ca in &cas {
                    first_seen.entry(ca.pem.clone()).or_insert(s);
                }
                let signer = signers(&m, t);
                assert_eq!(signer.len(), 1, "{at}: the served certificate is untrusted");
                let since = s - first_seen[&signer[0]];
                assert!(
                    first_seen[&signer[0]] == 0 || since >= p.propagation.as_secs(),
                    "{at}: a CA {since}s in the bundle signs"
                );
            }
            assert!(
                cert_rotations >= 18,
                "{cert_rotations} certificate rotations"
            );
            assert_eq!(ca_rotations, 1);
            assert_eq!(drops, 1, "the old CA leaves the bundle when it expires");
        }
    }

    /// Replicas down across the CA's rotation window: the step that adds
    /// the successor must re-issue with the old CA (clamped to its expiry),
    /// and the next checks, though the certificate is due, keep it until the
    /// successor is `propagation` old.
    #[test]
    fn a_young_ca_does_not_sign_while_the_served_certificate_is_valid() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let old_ca = m.ca_bundle.clone();
        let t1 = t0 + Duration::from_secs(990);
        let (m1, reasons) = written(plan_at(Ok(&m), t1));
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].starts_with("a new CA: "), "{reasons:?}");
        assert_eq!(m1.ca_count(), 2);
        assert_eq!(signers(&m1, t1), std::slice::from_ref(&old_ca));
        for after in [1, 5, 9] {
            let t = t1 + Duration::from_secs(after);
            assert_eq!(plan_at(Ok(&m1), t), Plan::Keep, "+{after}s");
        }
        let t2 = t1 + Duration::from_secs(11);
        let (m2, reasons) = written(plan_at(Ok(&m1), t2));
        assert!(
            reasons.iter().any(|r| r.starts_with("re-issued")),
            "{reasons:?}"
        );
        assert_eq!(m2.ca_count(), 1, "the old CA expired at +1000s");
        assert_ne!(signers(&m2, t2), [old_ca]);
    }

    #[test]
    fn a_reissued_certificate_keeps_the_names_it_covered() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let renamed = serving_names(&["katalog.other-ns.svc".into()]);
        let (r, reasons) = written(plan(Ok(&m), "test/certs", &renamed, &policy(), t0).unwrap());
        assert!(reasons[0].contains("katalog.other-ns.svc"), "{reasons:?}");
        assert_eq!(
            plan(Ok(&r), "test/certs", &renamed, &policy(), t0).unwrap(),
            Plan::Keep
        );
        assert_eq!(
            plan_at(Ok(&r), t0),
            Plan::Keep,
            "the old names still verify"
        );
        let mut names = subject_alt_names(&r.cert);
        names.sort();
        assert_eq!(
            names,
            [
                "127.0.0.1",
                "::1",
                "katalog.katalog-system.svc",
                "katalog.other-ns.svc",
                "localhost"
            ]
        );
    }

    #[test]
    fn debug_output_redacts_the_keys() {
        crate::certs::tls::install_crypto_provider();
        let (m, _) = written(plan_at(Err("none"), SystemTime::now()));
        let shown = format!("{m:?}");
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
        assert!(shown.contains("BEGIN CERTIFICATE"), "{shown}");
        assert!(shown.contains(r#"ca_key: "<redacted>""#), "{shown}");
    }

    #[test]
    fn serving_files_are_private_fresh_and_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        crate::certs::tls::install_crypto_provider();
        let (m, _) = written(plan_at(Err("none"), SystemTime::now()));
        let a = ServingFiles::create_private("katalog-unit").expect("a directory");
        let b = ServingFiles::create_private("katalog-unit").expect("another directory");
        assert_ne!(a.dir(), b.dir());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(a.dir()), 0o700);
        a.write(&m).expect("writing");
        assert_eq!(mode(&a.pair()), 0o600);
        assert_eq!(std::fs::read_to_string(a.pair()).unwrap(), m.serving_pem());
        assert_eq!(std::fs::read_to_string(a.ca()).unwrap(), m.ca_bundle);
        // A directory that already exists is not trusted with the key.
        let err = ServingFiles::create(b.dir().to_path_buf()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to write the serving certificate to "),
            "{err}"
        );
        let dir = a.dir().to_path_buf();
        drop(a);
        assert!(!dir.exists(), "{} is left behind", dir.display());
    }

    #[test]
    fn policies_that_cannot_work_are_refused() {
        assert!(Policy::default().check().is_ok());
        assert!(policy().check().is_ok());
        let bad = [
            (
                Policy {
                    cert_rotate_before: Duration::from_secs(95),
                    ..policy()
                },
                "failed to accept the certificate policy: cert-rotate-before (95s) + ca-propagation (10s) must be shorter than cert-validity (100s)",
            ),
            (
                Policy {
                    ca_rotate_before: Duration::from_secs(1000),
                    ..policy()
                },
                "failed to accept the certificate policy: ca-rotate-before (1000s) must be shorter than ca-validity (1000s)",
            ),
            (
                Policy {
                    ca_rotate_before: Duration::from_secs(39),
                    ..policy()
                },
                "failed to accept the certificate policy: ca-rotate-before (39s) must be at least cert-rotate-before (30s) + ca-propagation (10s), so certificates signed by the old CA are replaced in time",
            ),
        ];
        for (p, message) in bad {
            assert_eq!(p.check().unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn an_unusable_secret_says_which_key_is_wrong() {
        let m = Material {
            ca_bundle: "a".into(),
            ca_key: "b".into(),
            cert: "c".into(),
            key: "d".into(),
        };
        let secret = |data| Secret {
            data: Some(data),
            ..Secret::default()
        };
        let mut data = m.data();
        assert_eq!(Material::from_secret(&secret(data.clone())), Ok(m));
        data.insert(TLS_KEY.into(), ByteString(vec![0xff]));
        assert_eq!(
            Material::from_secret(&secret(data.clone())),
            Err(MaterialError::NotText { key: TLS_KEY })
        );
        data.remove(CA_CRT);
        let why = Material::from_secret(&secret(data)).unwrap_err();
        assert_eq!(why, MaterialError::Missing { key: CA_CRT });
        assert_eq!(
            Stored::Unusable(why.clone()).to_string(),
            "the Secret is unusable: it has no ca.crt"
        );
        let foreign = SelfSignedError::Foreign {
            secret: "katalog-system/app-credentials".parse().unwrap(),
            why,
        };
        assert_eq!(
            foreign.to_string(),
            "failed to use Secret katalog-system/app-credentials: it exists, is not labelled app.kubernetes.io/managed-by=katalog, and it has no ca.crt; katalog does not overwrite it (name another Secret, or delete this one)"
        );
    }

    #[test]
    fn durations_and_secret_references_parse() {
        for (text, secs) in [
            ("90d", 90 * DAY),
            ("36h", 36 * 3600),
            ("15m", 900),
            ("45s", 45),
            ("7", 7),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in [
            "",
            "0s",
            "-3d",
            "5w",
            "d",
            "NaNs",
            "1e300d",
            "0.0000000001s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_duration("5w").unwrap_err().to_string(),
            "\"5w\": the unit must be s, m, h or d"
        );
        assert_eq!(
            parse_duration("-3d").unwrap_err().to_string(),
            "\"-3d\": expected a positive duration such as 90d, 12h or 30s"
        );
        for (d, text) in [(90 * DAY, "90d"), (7200, "2h"), (120, "2m"), (61, "61s")] {
            assert_eq!(format_duration(Duration::from_secs(d)), text);
        }
        assert_eq!(
            "katalog-system/katalog-certs".parse::<SecretRef>().unwrap(),
            SecretRef {
                namespace: "katalog-system".into(),
                name: "katalog-certs".into()
            }
        );
        for bad in ["katalog-certs", "/x", "x/", "a/b/c", "A/b", "a/-b"] {
            assert_eq!(
                bad.parse::<SecretRef>().unwrap_err().to_string(),
                format!("failed to parse --self-signed-secret {bad:?}: expected NAMESPACE/NAME")
            );
        }
    }
}
