//! `katalog serve`: the flags mapped to the runtime's configuration.

use crate::args::*;
use crate::exit::{Exit, RUNTIME, USAGE};

/// `katalog serve`: the flags mapped to a [`katalog_runtime::ServeConfig`],
/// which the runtime builds and runs.
pub(crate) fn serve(args: ServeArgs) -> Result<(), Exit> {
    use katalog_runtime::serve::{Certificate, Register, Serve, ServeConfig, Service};
    katalog_runtime::init_tracing(match args.log_format {
        LogFormatArg::Text => katalog_runtime::LogFormat::Text,
        LogFormatArg::Json => katalog_runtime::LogFormat::Json,
    });
    let seconds = |s: f64, flag: &str| {
        match std::time::Duration::try_from_secs_f64(s) {
            // Finite, positive and within a Duration (`1e20` is not).
            Ok(d) if s > 0.0 => Ok(d),
            _ => Err(Exit(
                format!("error: --{flag} must be a positive number of seconds"),
                USAGE,
            )),
        }
    };
    let certificate = match (&args.self_signed_secret, args.tls_cert, args.tls_key) {
        (Some(secret), _, _) => Certificate::Secret {
            secret: secret
                .parse()
                .map_err(|e| Exit(format!("error: {e}"), USAGE))?,
            policy: katalog_runtime::certs::selfsigned::Policy {
                cert_validity: args.cert_validity,
                cert_rotate_before: args.cert_rotate_before,
                ca_validity: args.ca_validity,
                ca_rotate_before: args.ca_rotate_before,
                propagation: args.ca_propagation,
            },
            check_interval: args.cert_check_interval,
        },
        (None, Some(cert), Some(key)) => Certificate::Files { cert, key },
        _ => Certificate::Development {
            dir: args
                .dev_cert_dir
                .unwrap_or_else(|| std::env::temp_dir().join("katalog-dev")),
        },
    };
    let mut config = ServeConfig::new(args.katalog, certificate);
    let server = &mut config.server;
    server.listen = args.listen;
    server.metrics_listen = args.metrics_listen;
    server.client_ca = args.client_ca;
    server.client_names = args.client_name;
    server.body_limit = args.body_limit;
    server.max_reviews_in_flight = args.max_reviews_in_flight as usize;
    server.max_bytes_in_flight = args.max_bytes_in_flight;
    server.request_timeout = seconds(args.request_timeout, "request-timeout")?;
    server.cel_cost_limit = args.cel_cost_limit;
    server.inline_limit = if args.inline_limit == 0.0 {
        std::time::Duration::ZERO
    } else {
        seconds(args.inline_limit, "inline-limit").map_err(|_| {
            Exit(
                "error: --inline-limit must be 0 or a positive number of seconds".into(),
                USAGE,
            )
        })?
    };
    server.client_timeout = seconds(args.client_timeout, "client-timeout")?;
    server.tls_handshake_timeout = seconds(args.tls_handshake_timeout, "tls-handshake-timeout")?;
    server.max_pending_handshakes = args.max_pending_handshakes as usize;
    server.shutdown_grace = std::time::Duration::from_secs(args.shutdown_grace);
    if let Some(w) = args.workers {
        server.workers = w;
    }
    server.ceiling = args.ceiling.build()?;
    server.tls_min_version = match args.tls_min_version.as_str() {
        "1.3" => katalog_runtime::certs::tls::TlsMinVersion::Tls13,
        _ => katalog_runtime::certs::tls::TlsMinVersion::Tls12,
    };
    server.engine_namespace = Some(args.service_namespace.clone());
    config.service = Service {
        name: args.service_name,
        namespace: args.service_namespace,
        port: args.service_port,
    };
    config.kubeconfig = args.kubeconfig;
    if args.register {
        config.register = Some(Register {
            url: args.register_url,
            ca_bundle: args.ca_bundle,
            resync: seconds(args.resync, "resync")?,
            leader_election_namespace: args.leader_election_namespace,
            ..Register::new(args.register_name)
        });
    }
    let serve = Serve::new_from_config(config).map_err(serve_exit)?;
    if let Some((secret, applied)) = serve.secret_applied() {
        errln!(
            "certificate: Secret {secret} {}{}",
            applied.action,
            if applied.reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", applied.reasons.join("; "))
            }
        );
    }
    serve
        .run(|listening| {
            if let Some(ca) = &listening.development_ca {
                let port = listening.addr.port();
                let ca = std::fs::canonicalize(ca).unwrap_or_else(|_| ca.clone());
                errln!("development CA: {}", ca.display());
                let example = std::fs::canonicalize(
                    "crates/katalog-lang/src/conversion/testdata/conversion-review-v1.json",
                )
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "review.json".into());
                errln!(
                    "try: curl --cacert {} -H 'Content-Type: application/json' https://127.0.0.1:{port}/convert -d @{example}",
                    ca.display()
                );
            }
        })
        .map_err(serve_exit)
}

/// A configuration the runtime cannot use is a usage error (as for
/// `register`, a kubeconfig that cannot be loaded); anything the cluster,
/// the files or the server refuse a runtime error.
pub(crate) fn serve_exit(e: katalog_runtime::ServeError) -> Exit {
    match e {
        katalog_runtime::ServeError::NoCaBundle => Exit(
            "error: --register needs --ca-bundle when --tls-cert is given".into(),
            USAGE,
        ),
        e => {
            let code = if e.is_config() { USAGE } else { RUNTIME };
            Exit(format!("error: {e}"), code)
        }
    }
}

/// The allocator setting the server is measured and deployed with:
/// mimalloc returns freed memory to the system after 50 ms instead of its
/// default 1 s (`MIMALLOC_PURGE_DELAY`, read when the allocator starts,
/// before `main`), which keeps the peak RSS of large reviews under load
/// about a third lower for about a quarter more CPU on them
/// (docs/benchmarks.md). Unless the operator set the delay (mimalloc reads
/// the variable's name in any case, and its older name
/// `MIMALLOC_RESET_DELAY`), `katalog serve` runs itself again with it, in
/// the same process (exec); where that cannot be done it says so and goes
/// on with the allocator's default.
pub(crate) fn serve_allocator_defaults() {
    #[cfg(unix)]
    {
        const PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";
        let set = std::env::vars_os().any(|(name, _)| {
            let name = name.to_string_lossy().to_ascii_uppercase();
            name == PURGE_DELAY || name == "MIMALLOC_RESET_DELAY"
        });
        if set {
            return;
        }
        use std::os::unix::process::CommandExt;
        // The running binary even if its file was replaced since.
        let exe = if cfg!(target_os = "linux") {
            Ok(std::path::PathBuf::from("/proc/self/exe"))
        } else {
            std::env::current_exe()
        };
        let err = match exe {
            Ok(exe) => {
                let mut args = std::env::args_os();
                let argv0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
                std::process::Command::new(&exe)
                    .arg0(argv0)
                    .args(args)
                    .env(PURGE_DELAY, "50")
                    .exec()
            }
            Err(e) => e,
        };
        errln!(
            "katalog serve: could not run again with {PURGE_DELAY}=50 ({err}); \
             going on with the allocator's default"
        );
    }
}
