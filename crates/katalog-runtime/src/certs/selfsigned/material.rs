//! The certificates and keys ([`Material`]), and [`plan`]: given what the
//! Secret holds and the time, keep it or say what to write and why. Pure.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use rcgen::PublicKeyData as _;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::policy::*;

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

    pub(super) fn data(&self) -> BTreeMap<String, ByteString> {
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
pub(super) struct Ca {
    pub(super) pem: String,
    pub(super) der: CertificateDer<'static>,
    pub(super) not_before: i64,
    pub(super) not_after: i64,
    pub(super) public_key: Vec<u8>,
}

pub(super) fn ca_from_der(der: CertificateDer<'static>) -> std::result::Result<Ca, MaterialError> {
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

pub(super) fn parse_ca_bundle(pem: &str) -> std::result::Result<Vec<Ca>, MaterialError> {
    let cas = CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|der| ca_from_der(der.map_err(|e| MaterialError::CaNotPem(e.to_string()))?))
        .collect::<std::result::Result<Vec<Ca>, MaterialError>>()?;
    if cas.is_empty() {
        return Err(MaterialError::NoCa);
    }
    Ok(cas)
}

/// RFC 7468 PEM, 64 columns.
pub(super) fn pem_encode(tag: &str, der: &[u8]) -> String {
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

pub(super) fn unix(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

pub(super) fn at(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| secs.to_string())
}

pub(super) fn offset(secs: i64) -> Result<time::OffsetDateTime> {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .map_err(|e| SelfSignedError::Generate(e.to_string()))
}

pub(super) fn gen_err(e: rcgen::Error) -> SelfSignedError {
    SelfSignedError::Generate(e.to_string())
}

/// A new CA valid from `now` for `validity`: (certificate PEM, key PEM).
pub(super) fn new_ca(label: &str, now: i64, validity: Duration) -> Result<(String, String)> {
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
pub(super) fn issue(
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
pub(super) fn serving_expiry(
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
pub(super) fn subject_alt_names(cert_pem: &str) -> Vec<String> {
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
pub(super) fn fresh(
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
