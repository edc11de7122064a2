//! `katalog serve`, assembled from one [`ServeConfig`]: the serving
//! certificate (files, a development CA, or kept in a Secret), the server,
//! and the housekeeper that keeps the cluster registered with the served
//! Katalog (its `caBundle` following the certificate's CA).
//!
//! Two steps, so that the caller can say what happened in between:
//! [`Serve::new_from_config`] makes the certificate to serve (it may write
//! the Secret), [`Serve::run`] checks the registration, starts everything
//! and serves until SIGTERM / SIGINT.
//!
//! ```no_run
//! use katalog_runtime::serve::{Certificate, Serve, ServeConfig};
//! let config = ServeConfig::new(
//!     "katalogs/crontab.yaml".into(),
//!     Certificate::Development { dir: "/tmp/katalog-dev".into() },
//! );
//! Serve::new_from_config(config)?.run(|listening| {
//!     eprintln!("listening on {}", listening.addr);
//! })?;
//! # Ok::<(), katalog_runtime::serve::ServeError>(())
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::certs::selfsigned::{Applied, Policy, Prepared, SecretRef, SelfSigned, SelfSignedError};
use crate::certs::tls::TlsError;
use crate::cluster::housekeeper::Housekeeper;
use crate::cluster::leader::LeaderElection;
use crate::cluster::registration::{Registration, SharedCaBundle, Target};
use crate::http::server::StartError;
use crate::serving::config::Config;

/// Everything `katalog serve` is told.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The HTTPS server. Its `tls_cert` and `tls_key` are not read: they
    /// are set from [`ServeConfig::certificate`].
    pub server: Config,
    /// Where the serving certificate comes from.
    pub certificate: Certificate,
    /// The Service in front of the engine: generated certificates cover its
    /// names, and the registration points the webhooks at it.
    pub service: Service,
    /// Keep the cluster registered (the housekeeper); default: not.
    pub register: Option<Register>,
    /// For the Secret and the registration: the kubeconfig file (default:
    /// `KUBECONFIG`, `~/.kube/config`, or in-cluster).
    pub kubeconfig: Option<PathBuf>,
}

impl ServeConfig {
    /// Serve `katalog` with `certificate` and the server defaults
    /// ([`Config::new`]); no registration.
    pub fn new(katalog: PathBuf, certificate: Certificate) -> Self {
        ServeConfig {
            server: Config::new(katalog, PathBuf::new(), PathBuf::new()),
            certificate,
            service: Service::default(),
            register: None,
            kubeconfig: None,
        }
    }
}

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum Certificate {
    /// PEM files, watched for rotation.
    Files { cert: PathBuf, key: PathBuf },
    /// A development CA and certificate for the Service's names, written to
    /// `dir` (reused when a valid pair is already there).
    Development { dir: PathBuf },
    /// A CA and certificate kept in a Secret, shared by the replicas and
    /// rotated before they expire (see [`crate::certs::selfsigned`]).
    Secret {
        secret: SecretRef,
        policy: Policy,
        /// How often expiry is checked (the Secret is also watched).
        check_interval: Duration,
    },
}

/// The Service in front of the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    pub name: String,
    pub namespace: String,
    /// The port the webhooks are registered at.
    pub port: i32,
}

impl Default for Service {
    fn default() -> Self {
        Service {
            name: "katalog".into(),
            namespace: "katalog-system".into(),
            port: 443,
        }
    }
}

impl Service {
    /// The names a generated certificate is valid for: `NAME`,
    /// `NAME.NAMESPACE`, `NAME.NAMESPACE.svc` and its `.cluster.local` form.
    pub fn dns_names(&self) -> Vec<String> {
        let svc = format!("{}.{}.svc", self.name, self.namespace);
        vec![
            self.name.clone(),
            format!("{}.{}", self.name, self.namespace),
            svc.clone(),
            format!("{svc}.cluster.local"),
        ]
    }
}

/// What the housekeeper registers and how.
#[derive(Clone, Debug)]
pub struct Register {
    /// Base name of the configurations (`<name>-validating`, ...).
    pub name: String,
    /// Reach the engine at this base URL instead of the [`Service`].
    pub url: Option<String>,
    /// PEM of the CA that signed the serving certificate, watched (a
    /// mounted cert-manager `ca.crt`). Default: the development CA or the
    /// Secret's; required with [`Certificate::Files`].
    pub ca_bundle: Option<PathBuf>,
    /// Full re-registration period.
    pub resync: Duration,
    /// Elect a leader through a Lease in this namespace, so that only one
    /// replica reconciles; default: no election.
    pub leader_election_namespace: Option<String>,
}

impl Register {
    /// Register as `name`, resyncing every 30 s, without leader election.
    pub fn new(name: String) -> Self {
        Register {
            name,
            url: None,
            ca_bundle: None,
            resync: Duration::from_secs(30),
            leader_election_namespace: None,
        }
    }
}

/// Why `serve` did not start, or stopped on an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The Secret's certificate could not be made (its name, the policy,
    /// the client, the cluster or the files).
    #[error(transparent)]
    Secret(#[from] SelfSignedError),
    #[error(transparent)]
    Development(TlsError),
    #[error(transparent)]
    CaBundle(crate::serving::reload::Error),
    #[error("failed to register: no caBundle for certificate files (give the CA that signed them)")]
    NoCaBundle,
    /// What the apiserver would refuse: the webhook URL or the caBundle.
    #[error(transparent)]
    Registration(#[from] crate::cluster::registration::Error),
    #[error(transparent)]
    Start(#[from] StartError),
}

impl ServeError {
    /// Whether the configuration is at fault (a Secret name, policy,
    /// kubeconfig, caBundle or webhook URL that cannot be used), rather
    /// than the cluster or the machine.
    pub fn is_config(&self) -> bool {
        match self {
            ServeError::Secret(e) => matches!(
                e,
                SelfSignedError::SecretRef(_)
                    | SelfSignedError::Policy(_)
                    | SelfSignedError::Client(_)
            ),
            ServeError::CaBundle(_) | ServeError::NoCaBundle | ServeError::Registration(_) => true,
            ServeError::Development(_) | ServeError::Start(_) => false,
        }
    }
}

pub type Result<T, E = ServeError> = std::result::Result<T, E>;

/// The certificate made, before the server starts.
enum Made {
    Files,
    Development { ca: PathBuf },
    Secret(Box<(SelfSigned, Prepared)>),
}

/// `serve` with its certificate made; [`Serve::run`] serves.
pub struct Serve {
    config: ServeConfig,
    made: Made,
}

/// Told to [`Serve::run`]'s caller once the server listens.
#[derive(Clone, Debug)]
pub struct Listening {
    pub addr: SocketAddr,
    /// The development CA file, with [`Certificate::Development`].
    pub development_ca: Option<PathBuf>,
}

impl Serve {
    /// Make the certificate to serve: check the policy and ensure the
    /// Secret, or write the development certificates, or take the files.
    pub fn new_from_config(mut config: ServeConfig) -> Result<Serve> {
        let names = config.service.dns_names();
        let made = match &config.certificate {
            Certificate::Files { cert, key } => {
                config.server.tls_cert = cert.clone();
                config.server.tls_key = key.clone();
                Made::Files
            }
            Certificate::Development { dir } => {
                let files = crate::certs::tls::write_dev_certificates(dir, &names)
                    .map_err(ServeError::Development)?;
                config.server.tls_cert = files.cert;
                config.server.tls_key = files.key;
                Made::Development { ca: files.ca }
            }
            Certificate::Secret {
                secret,
                policy,
                check_interval,
            } => {
                let mut selfsigned = SelfSigned::new(secret.clone(), &names);
                selfsigned.policy = policy.clone();
                selfsigned.policy.check()?;
                selfsigned.check_interval = *check_interval;
                let files = crate::certs::selfsigned::ServingFiles::create_private(&format!(
                    "katalog-{}-{}",
                    secret.namespace, secret.name
                ))?;
                let prepared = selfsigned.prepare(config.kubeconfig.as_deref(), files)?;
                config.server.tls_cert = prepared.files.pair();
                config.server.tls_key = prepared.files.pair();
                Made::Secret(Box::new((selfsigned, prepared)))
            }
        };
        Ok(Serve { config, made })
    }

    /// With [`Certificate::Secret`]: the Secret and what was done to it.
    pub fn secret_applied(&self) -> Option<(&SecretRef, &Applied)> {
        match &self.made {
            Made::Secret(s) => Some((&s.0.secret, &s.1.applied)),
            _ => None,
        }
    }

    /// Check the registration, start the server, then the certificate
    /// keeper and the housekeeper; `on_listening` is told where the server
    /// listens. Serves until SIGTERM / SIGINT; the housekeeper stops first
    /// (it may still be registering a caBundle), then the keeper.
    pub fn run(self, on_listening: impl FnOnce(&Listening) + Send + 'static) -> Result<()> {
        let Serve { config, made } = self;
        let housekeeping = match &config.register {
            Some(register) => Some(housekeeping(register, &config, &made)?),
            None => None,
        };
        let kubeconfig = config.kubeconfig;
        crate::http::server::run(config.server, move |addr, state| {
            let mut development_ca = None;
            let keeper = match made {
                Made::Secret(s) => {
                    let (selfsigned, prepared) = *s;
                    Some(prepared.keep(selfsigned, kubeconfig.clone(), state.clone()))
                }
                Made::Development { ca } => {
                    development_ca = Some(ca);
                    None
                }
                Made::Files => None,
            };
            let mut ca_watch = None;
            let housekeeper = housekeeping.map(|h| {
                ca_watch = h.ca_watch;
                h.housekeeper
                    .spawn_with_kubeconfig(kubeconfig, state, h.registration)
            });
            on_listening(&Listening {
                addr,
                development_ca,
            });
            // The housekeeper stops first: it may still register the caBundle.
            (housekeeper, keeper, ca_watch)
        })?;
        Ok(())
    }
}

/// The housekeeper to start, what it registers, and the watch of the
/// `caBundle` file it follows.
struct Housekeeping {
    housekeeper: Housekeeper,
    registration: Registration,
    ca_watch: Option<crate::serving::reload::Watchers>,
}

fn housekeeping(register: &Register, config: &ServeConfig, made: &Made) -> Result<Housekeeping> {
    // The caBundle follows its source: the Secret's CA, or the file
    // (a mounted cert-manager ca.crt is rewritten when its CA rotates).
    let ca_path = match made {
        Made::Development { ca } => register.ca_bundle.clone().or_else(|| Some(ca.clone())),
        _ => register.ca_bundle.clone(),
    };
    let (source, ca_watch): (SharedCaBundle, _) = match (made, ca_path) {
        (Made::Secret(s), _) => (s.1.ca_bundle.clone(), None),
        (_, Some(path)) => {
            let (bundle, watch) = crate::serving::reload::watch_ca_bundle(
                &path,
                config.server.reload_debounce,
                config.server.reload_poll,
            )
            .map_err(ServeError::CaBundle)?;
            (bundle, Some(watch))
        }
        (_, None) => return Err(ServeError::NoCaBundle),
    };
    let ca_bundle = source.load().as_ref().clone();
    let target = match register.url.clone() {
        Some(u) => Target::Url(u),
        None => Target::Service {
            namespace: config.service.namespace.clone(),
            name: config.service.name.clone(),
            port: config.service.port,
        },
    };
    let registration = Registration {
        name: register.name.clone(),
        target,
        ca_bundle,
    };
    registration.check().map_err(ServeError::Registration)?;
    let housekeeper = Housekeeper {
        resync: register.resync,
        ca_bundle: Some(source),
        leader_election: register.leader_election_namespace.clone().map(|namespace| {
            LeaderElection {
                namespace,
                ..Default::default()
            }
        }),
        ..Default::default()
    };
    Ok(Housekeeping {
        housekeeper,
        registration,
        ca_watch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_names_cover_every_way_it_is_reached() {
        let service = Service {
            name: "web".into(),
            namespace: "hooks".into(),
            port: 443,
        };
        assert_eq!(
            service.dns_names(),
            [
                "web",
                "web.hooks",
                "web.hooks.svc",
                "web.hooks.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn files_without_a_ca_bundle_cannot_be_registered() {
        let mut config = ServeConfig::new(
            "k.yaml".into(),
            Certificate::Files {
                cert: "tls.crt".into(),
                key: "tls.key".into(),
            },
        );
        config.register = Some(Register::new("katalog".into()));
        let serve = Serve::new_from_config(config).unwrap();
        let e = serve.run(|_| {}).unwrap_err();
        assert!(matches!(e, ServeError::NoCaBundle), "{e}");
        assert!(e.is_config());
    }
}
