//! What the Secret holds (its keys), where it is ([`SecretRef`]), when
//! certificates are renewed ([`Policy`], durations), and the errors.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::cluster::registration::{MANAGED_BY_LABEL, MANAGER};

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
pub(super) const WRITE_ATTEMPTS: usize = 5;

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

pub(super) type Result<T, E = SelfSignedError> = std::result::Result<T, E>;

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
pub(super) enum Stored {
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

pub(super) const DAY: u64 = 24 * 3600;

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
