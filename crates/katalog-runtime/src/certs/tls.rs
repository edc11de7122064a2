//! TLS: certificate loading, live rotation, and development certificates.
//!
//! New handshakes ask [`ReloadingCert`] for the current certificate, which
//! the watcher swaps when the mounted files change; connections already
//! open keep the one they started with.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate pair could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("failed to parse {path}: {message}")]
    Parse { path: String, message: String },
    #[error("failed to use the certificate and key: {0}")]
    Key(String),
    #[error("failed to generate a development certificate: {0}")]
    Generate(String),
    /// A development certificate directory someone else could have put a
    /// key into.
    #[error(
        "failed to use the development certificate directory {path}: {problem}; a certificate and key planted there would be served: remove it, or name a private directory with --dev-cert-dir"
    )]
    DevDirNotPrivate { path: String, problem: String },
}

/// Install ring as the process-wide crypto provider (once; later calls are no-ops).
pub fn install_crypto_provider() {
    let _ = ring::default_provider().install_default();
}

/// Parse a PEM certificate chain and private key into a signing key.
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_name: &str,
    key_name: &str,
) -> Result<CertifiedKey, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Parse {
            path: cert_name.into(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Parse {
            path: cert_name.into(),
            message: "no CERTIFICATE block".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Parse {
        path: key_name.into(),
        message: e.to_string(),
    })?;
    let provider = ring::default_provider();
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::Key(e.to_string()))?;
    let ck = CertifiedKey::new(certs, signing_key);
    // Refuse a key that does not belong to the certificate.
    ck.keys_match().map_err(|e| TlsError::Key(e.to_string()))?;
    Ok(ck)
}

/// When the leaf certificate of a pair expires (Unix seconds).
pub fn not_after(key: &CertifiedKey) -> Option<i64> {
    let leaf = key.cert.first()?;
    x509_parser::parse_x509_certificate(leaf.as_ref())
        .ok()
        .map(|(_, x)| x.validity().not_after.timestamp())
}

/// Read a certificate and key pair from files.
pub fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| TlsError::Read {
            path: p.display().to_string(),
            source,
        })
    };
    certified_key_from_pem(
        &read(cert)?,
        &read(key)?,
        &cert.display().to_string(),
        &key.display().to_string(),
    )
}

/// The serving certificate, swappable while the server runs.
#[derive(Debug)]
pub struct ReloadingCert {
    current: ArcSwap<CertifiedKey>,
}

impl ReloadingCert {
    pub fn new(key: CertifiedKey) -> Self {
        Self {
            current: ArcSwap::from_pointee(key),
        }
    }
    pub fn swap(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// A rustls server configuration: TLS 1.2 and 1.3 with ring, HTTP/1.1 only
/// (the apiserver speaks HTTP/1.1 to webhooks).
pub fn server_config(cert: Arc<ReloadingCert>) -> Result<rustls::ServerConfig, TlsError> {
    server_config_with_client_ca(cert, None)
}

/// [`server_config`], and with `client_ca` a client that presents a
/// certificate must present one the CA signed, or its handshake fails. A
/// client may also present none (the apiserver presents none to conversion
/// webhooks): the server then answers only what needs no client
/// certificate (see `server.rs`).
pub fn server_config_with_client_ca(
    cert: Arc<ReloadingCert>,
    client_ca: Option<Arc<ReloadingClientCa>>,
) -> Result<rustls::ServerConfig, TlsError> {
    server_config_with_min_version(cert, client_ca, TlsMinVersion::Tls12)
}

/// The oldest TLS version the server accepts (`--tls-min-version`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMinVersion {
    /// TLS 1.2 (AEAD suites only) and 1.3: what every supported apiserver speaks.
    #[default]
    Tls12,
    /// TLS 1.3 only: a TLS 1.2 ClientHello fails the handshake.
    Tls13,
}

/// [`server_config_with_client_ca`], accepting TLS `min` and newer.
pub fn server_config_with_min_version(
    cert: Arc<ReloadingCert>,
    client_ca: Option<Arc<ReloadingClientCa>>,
    min: TlsMinVersion,
) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match min {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| TlsError::Key(e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(verifier) => builder.with_client_cert_verifier(verifier),
    };
    let mut config = builder.with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The client CA of `--client-ca` (PEM, one or more CA certificates), which
/// the watcher swaps when the file changes: new handshakes are verified
/// against the current CA, connections already open keep theirs. It sends
/// clients no list of acceptable CAs (a client with one certificate, as
/// the apiserver's kubeconfig gives it, presents it anyway), so the hint
/// never goes stale across a rotation.
pub struct ReloadingClientCa {
    verifier: ArcSwap<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    pem: std::sync::Mutex<Vec<u8>>,
    name: String,
    /// `--client-name`: a certificate must carry one of these as its
    /// common name or a DNS name; empty: any name the CA signed.
    names: Vec<String>,
}

impl std::fmt::Debug for ReloadingClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingClientCa")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ReloadingClientCa {
    /// The CA certificates of `pem`, read from the file `name`.
    pub fn from_pem(pem: &[u8], name: &str) -> Result<ReloadingClientCa, TlsError> {
        Ok(ReloadingClientCa {
            verifier: ArcSwap::from_pointee(client_verifier(pem, name)?),
            pem: std::sync::Mutex::new(pem.to_vec()),
            name: name.to_string(),
            names: Vec::new(),
        })
    }

    /// Accept only certificates whose common name or one of whose DNS
    /// names is in `names` (as Gatekeeper's `--client-cn-to-verify`; a CA
    /// may sign certificates for others than the apiserver).
    pub fn with_names(mut self, names: Vec<String>) -> Self {
        self.names = names;
        self
    }

    /// Verify clients against `pem` from now on: `Ok(false)` when it is the
    /// CA already in use; an error (the current CA stays) when it holds no
    /// usable certificate.
    pub fn swap_pem(&self, pem: &[u8]) -> Result<bool, TlsError> {
        let mut current = self.pem.lock().unwrap_or_else(|p| p.into_inner());
        if *current == pem {
            return Ok(false);
        }
        self.verifier
            .store(Arc::new(client_verifier(pem, &self.name)?));
        *current = pem.to_vec();
        Ok(true)
    }

    fn current(&self) -> Arc<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
        self.verifier.load_full()
    }
}

/// The common names and DNS names of a certificate (none when it cannot
/// be parsed; rustls has verified it already).
fn names_of(cert: &CertificateDer<'_>) -> Vec<String> {
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = parsed
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = parsed.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(dns) = name {
                names.push((*dns).to_string());
            }
        }
    }
    names
}

/// A verifier of client certificates signed by the CAs of `pem`, which also
/// lets a client present none.
fn client_verifier(
    pem: &[u8],
    name: &str,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let parse = |message: String| TlsError::Parse {
        path: name.into(),
        message,
    };
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(pem) {
        let ca = ca.map_err(|e| parse(e.to_string()))?;
        roots.add(ca).map_err(|e| parse(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(parse("no CERTIFICATE block".into()));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(ring::default_provider()),
    )
    .allow_unauthenticated()
    .clear_root_hint_subjects()
    .build()
    .map_err(|e| parse(e.to_string()))
}

impl rustls::server::danger::ClientCertVerifier for ReloadingClientCa {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        let verified = self
            .current()
            .verify_client_cert(end_entity, intermediates, now)?;
        if self.names.is_empty() || names_of(end_entity).iter().any(|n| self.names.contains(n)) {
            return Ok(verified);
        }
        tracing::debug!(
            names = ?names_of(end_entity),
            "a client certificate signed by the --client-ca has none of the --client-name names: handshake refused"
        );
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::ApplicationVerificationFailure,
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

/// A development CA and a serving certificate signed by it.
pub struct DevCertificates {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A development certificate authority that can issue serving certificates.
pub struct DevCa {
    key: rcgen::KeyPair,
    params: rcgen::CertificateParams,
    pem: String,
}

impl DevCa {
    pub fn generate() -> Result<DevCa, TlsError> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let err = |e: rcgen::Error| TlsError::Generate(e.to_string());
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, "katalog development CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let pem = params.self_signed(&key).map_err(err)?.pem();
        Ok(DevCa { key, params, pem })
    }

    pub fn ca_pem(&self) -> &str {
        &self.pem
    }

    /// A client certificate (PEM) and its key (PEM) for `common_name`,
    /// usable for TLS client authentication only (e.g. to try `--client-ca`).
    pub fn issue_client(&self, common_name: &str) -> Result<(String, String), TlsError> {
        self.issue_client_with_dns(common_name, &[])
    }

    /// [`DevCa::issue_client`], also for the DNS names `dns_names`.
    pub fn issue_client_with_dns(
        &self,
        common_name: &str,
        dns_names: &[String],
    ) -> Result<(String, String), TlsError> {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair};
        let err = |e: rcgen::Error| TlsError::Generate(e.to_string());
        let issuer = Issuer::new(self.params.clone(), &self.key);
        let mut params = CertificateParams::new(dns_names.to_vec()).map_err(err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// A serving certificate (PEM) and its key (PEM) for `localhost`,
    /// `127.0.0.1`, `::1` and the given DNS names.
    pub fn issue(&self, dns_names: &[String]) -> Result<(String, String), TlsError> {
        use rcgen::{Issuer, KeyPair};
        let err = |e: rcgen::Error| TlsError::Generate(e.to_string());
        let issuer = Issuer::new(self.params.clone(), &self.key);
        let params = serving_params(&serving_names(dns_names)).map_err(err)?;
        let key = KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The names every serving certificate covers: `localhost`, `127.0.0.1`,
/// `::1`, then `extra` (e.g. the Service's DNS names).
pub fn serving_names(extra: &[String]) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    for n in extra {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names
}

/// What every serving certificate of the engine is: for `names`, CN
/// `katalog webhook`, usable for TLS server authentication only.
pub(crate) fn serving_params(names: &[String]) -> Result<rcgen::CertificateParams, rcgen::Error> {
    use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyUsagePurpose};
    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "katalog webhook");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    Ok(params)
}

/// Generate a CA and a serving certificate for `localhost`, `127.0.0.1`,
/// `::1` and the given DNS names.
pub fn generate_dev_certificates(dns_names: &[String]) -> Result<DevCertificates, TlsError> {
    let ca = DevCa::generate()?;
    let (cert_pem, key_pem) = ca.issue(dns_names)?;
    Ok(DevCertificates {
        ca_pem: ca.pem,
        cert_pem,
        key_pem,
    })
}

/// Paths of development certificates written to disk.
#[derive(Debug)]
pub struct DevCertificateFiles {
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// Make `dir` a private directory of the user `uid`, or refuse it. A new
/// one is created with mode 0700; one that exists must be a directory (not
/// a symlink) owned by `uid` that neither group nor others may write, and
/// so must its certificate files: the default is under the shared temporary
/// directory, where anyone could otherwise have planted a key the server
/// would serve. One that only others may read or enter is tightened to 0700.
pub fn private_dir(dir: &Path, uid: u32) -> Result<(), TlsError> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    let refuse = |problem: String| TlsError::DevDirNotPrivate {
        path: dir.display().to_string(),
        problem,
    };
    let io = |source| TlsError::Read {
        path: dir.display().to_string(),
        source,
    };
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io);
        }
        Err(e) => return Err(io(e)),
        Ok(meta) => {
            if meta.file_type().is_symlink() {
                return Err(refuse("it is a symbolic link".into()));
            }
            if !meta.is_dir() {
                return Err(refuse("it is not a directory".into()));
            }
            if meta.uid() != uid {
                return Err(refuse(format!(
                    "it is owned by uid {}, not by this user (uid {uid})",
                    meta.uid()
                )));
            }
            let mode = meta.mode() & 0o7777;
            if mode & 0o022 != 0 {
                return Err(refuse(format!(
                    "group or others may write to it (mode {mode:04o}; it must be 0700)"
                )));
            }
            if mode & 0o077 != 0 {
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(io)?;
            }
        }
    }
    for name in ["ca.crt", "tls.crt", "tls.key"] {
        let path = dir.join(name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(e)),
        };
        if !meta.file_type().is_file() {
            return Err(refuse(format!("{name} is not a regular file")));
        }
        if meta.uid() != uid {
            return Err(refuse(format!(
                "{name} is owned by uid {}, not by this user (uid {uid})",
                meta.uid()
            )));
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(refuse(format!(
                "group or others may write to {name} (mode {mode:04o})"
            )));
        }
    }
    Ok(())
}

/// Development certificates in `dir` (ca.crt, tls.crt, tls.key): reused when
/// a valid pair is already there (so clients keep trusting the CA across
/// restarts, and two servers sharing the directory agree), else generated.
/// The key is written readable by its owner only.
pub fn write_dev_certificates(
    dir: &Path,
    dns_names: &[String],
) -> Result<DevCertificateFiles, TlsError> {
    let files = DevCertificateFiles {
        ca: dir.join("ca.crt"),
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    private_dir(dir, rustix::process::geteuid().as_raw())?;
    if files.ca.is_file() && load_pair(&files.cert, &files.key).is_ok() {
        return Ok(files);
    }
    let generated = generate_dev_certificates(dns_names)?;
    for (path, text, mode) in [
        (&files.ca, &generated.ca_pem, 0o644),
        (&files.cert, &generated.cert_pem, 0o644),
        (&files.key, &generated.key_pem, 0o600),
    ] {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let io = |source| TlsError::Read {
            path: path.display().to_string(),
            source,
        };
        let _ = std::fs::remove_file(path);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("katalog-tls-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    /// Issue 31 item 10: a development certificate directory others could
    /// write to is refused, never served from.
    #[test]
    fn the_development_directory_is_created_private_or_refused() {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        install_crypto_provider();
        let uid = rustix::process::geteuid().as_raw();
        // Created 0700, the key 0600; reused as it is.
        let parent = scratch("dev");
        let dir = parent.join("katalog-dev");
        let files = write_dev_certificates(&dir, &[]).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&files.key), 0o600);
        let key = std::fs::read(&files.key).unwrap();
        write_dev_certificates(&dir, &[]).unwrap();
        assert_eq!(std::fs::read(&files.key).unwrap(), key, "reused");
        // Anyone may write to it: refused, with what and why.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = write_dev_certificates(&dir, &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "failed to use the development certificate directory {}: group or others may write to it (mode 0777; it must be 0700); a certificate and key planted there would be served: remove it, or name a private directory with --dev-cert-dir",
                dir.display()
            )
        );
        // Only readable by others: tightened, then used.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        write_dev_certificates(&dir, &[]).unwrap();
        assert_eq!(mode(&dir), 0o700);
        // A file others may write to.
        std::fs::set_permissions(&files.cert, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = write_dev_certificates(&dir, &[]).unwrap_err().to_string();
        assert!(
            err.contains("group or others may write to tls.crt (mode 0666)"),
            "{err}"
        );
        std::fs::set_permissions(&files.cert, std::fs::Permissions::from_mode(0o644)).unwrap();
        // Another owner's directory and files (as seen by another user).
        let owner = std::fs::metadata(&dir).unwrap().uid();
        assert_eq!(owner, uid);
        let err = private_dir(&dir, uid + 1).unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "it is owned by uid {uid}, not by this user (uid {})",
                uid + 1
            )),
            "{err}"
        );
        // A symlink to a directory elsewhere.
        let link = parent.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let err = write_dev_certificates(&link, &[]).unwrap_err().to_string();
        assert!(err.contains("it is a symbolic link"), "{err}");
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn a_client_ca_swaps_only_for_a_new_usable_pem() {
        let first = DevCa::generate().unwrap();
        let second = DevCa::generate().unwrap();
        let ca = ReloadingClientCa::from_pem(first.ca_pem().as_bytes(), "ca.crt").unwrap();
        let before = ca.current();
        assert!(!ca.swap_pem(first.ca_pem().as_bytes()).unwrap(), "same CA");
        let err = ca.swap_pem(b"not a certificate").unwrap_err();
        assert!(err.to_string().contains("ca.crt"), "{err}");
        assert!(
            Arc::ptr_eq(&before, &ca.current()),
            "a bad file keeps the CA"
        );
        assert!(ca.swap_pem(second.ca_pem().as_bytes()).unwrap());
        assert!(!Arc::ptr_eq(&before, &ca.current()));
        assert!(ReloadingClientCa::from_pem(b"", "empty.crt").is_err());
    }

    #[test]
    fn generated_certificates_load_and_a_wrong_key_is_refused() {
        install_crypto_provider();
        let a = generate_dev_certificates(&["katalog.katalog-system.svc".into()]).unwrap();
        let b = generate_dev_certificates(&[]).unwrap();
        certified_key_from_pem(
            a.cert_pem.as_bytes(),
            a.key_pem.as_bytes(),
            "a.crt",
            "a.key",
        )
        .expect("a matching pair loads");
        let err = certified_key_from_pem(
            a.cert_pem.as_bytes(),
            b.key_pem.as_bytes(),
            "a.crt",
            "b.key",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to use the certificate and key"),
            "{err}"
        );
        let err =
            certified_key_from_pem(b"junk", a.key_pem.as_bytes(), "junk.crt", "a.key").unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to parse junk.crt: no CERTIFICATE block"
        );
    }
}
