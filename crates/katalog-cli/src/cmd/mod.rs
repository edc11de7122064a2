//! The subcommands, one file each (`katalog check` is `check.rs`), and
//! what several of them share: loading a Katalog, the `--live` CRDs, the
//! ceiling flags, the registration target, the cluster's async runtime.

pub(crate) mod admit;
pub(crate) mod analyze;
pub(crate) mod batch;
pub(crate) mod check;
pub(crate) mod convert;
pub(crate) mod diff;
pub(crate) mod init;
pub(crate) mod manifests;
pub(crate) mod migrate;
pub(crate) mod register;
pub(crate) mod review;
pub(crate) mod serve;
pub(crate) mod suggest;
pub(crate) mod test;

use std::path::Path;

use katalog_lang::Ir;
use katalog_runtime::serving::files;

use crate::args::{CeilingArgs, LiveArgs, TargetArgs};
use crate::exit::{Exit, RUNTIME, USAGE};

impl LiveArgs {
    /// The cluster's CRDs when `--live`; an unreachable cluster ends the
    /// command (exit 4; an unloadable kubeconfig exit 2).
    pub(crate) fn fetch(&self) -> Result<Option<katalog_runtime::cluster::live::LiveCrds>, Exit> {
        if !self.live {
            return Ok(None);
        }
        let crds = cluster_runtime()?.block_on(async {
            let client = katalog_runtime::cluster::live::client(
                self.kubeconfig.as_deref(),
                self.context.as_deref(),
            )
            .await?;
            katalog_runtime::cluster::live::LiveCrds::list(client).await
        });
        Ok(Some(crds.map_err(cluster_exit)?))
    }
}

/// Analyse with the `crd:` files, or with the cluster's CRDs (`--live`).
pub(crate) fn analyze_sources(
    sources: &[katalog_lang::Source],
    live: Option<&katalog_runtime::cluster::live::LiveCrds>,
) -> Result<(Ir, katalog_lang::analysis::Analysis), katalog_lang::Diagnostics> {
    match live {
        Some(crds) => katalog_lang::analyze_with_live_crds(sources, |r| crds.read(r)),
        None => katalog_lang::analyze_with_crds(sources, files::read_crd),
    }
}

impl CeilingArgs {
    /// The ceiling these flags set, if any is given.
    pub(crate) fn build(&self) -> Result<Option<katalog_lang::ceiling::Ceiling>, Exit> {
        use katalog_lang::ceiling::{Ceiling, GroupResource, Mutations};
        let on = self.ceiling
            || self.protected_namespaces.is_some()
            || self.protected_resources.is_some()
            || self.allow_register.is_some()
            || self.allow_convert.is_some()
            || self.allow_mutations.is_some();
        if !on {
            return Ok(None);
        }
        let parse = |list: &[String], flag: &str| -> Result<Vec<GroupResource>, Exit> {
            list.iter()
                .filter(|s| !s.is_empty())
                .map(|s| GroupResource::parse(s))
                .collect::<Result<_, _>>()
                .map_err(|e| Exit(format!("error: --{flag}: {e}"), USAGE))
        };
        let mut ceiling = Ceiling::default();
        if let Some(list) = &self.protected_namespaces {
            ceiling.protected_namespaces = list.iter().filter(|s| !s.is_empty()).cloned().collect();
        }
        if let Some(list) = &self.protected_resources {
            ceiling.protected_resources = parse(list, "protected-resources")?;
        }
        if let Some(list) = &self.allow_register {
            ceiling.register = Some(parse(list, "allow-register")?);
        }
        if let Some(list) = &self.allow_convert {
            ceiling.convert = Some(list.iter().filter(|s| !s.is_empty()).cloned().collect());
        }
        ceiling.mutations = match self.allow_mutations.as_deref() {
            None | Some("any") => Mutations::Anywhere,
            Some("none") | Some("") => Mutations::Nowhere,
            Some(list) => Mutations::In(list.split(',').map(str::to_string).collect()),
        };
        Ok(Some(ceiling))
    }
}

impl TargetArgs {
    /// The compiled Katalog and the registration these flags describe.
    pub(crate) fn load(
        self,
    ) -> Result<(Ir, katalog_runtime::cluster::registration::Registration), Exit> {
        use katalog_runtime::cluster::registration::{Registration, Target};
        let ir = load_ir(&self.katalog)?;
        let ca_bundle = match &self.ca_bundle {
            Some(p) => std::fs::read(p)
                .map_err(|e| Exit(format!("error: failed to read {}: {e}", p.display()), USAGE))?,
            None => Vec::new(),
        };
        let target = match self.url {
            Some(u) => Target::Url(u),
            None => Target::Service {
                namespace: self.service_namespace,
                name: self.service_name,
                port: self.service_port,
            },
        };
        let reg = Registration {
            name: self.name,
            target,
            ca_bundle,
        };
        reg.check().map_err(|e| Exit(format!("error: {e}"), 2))?;
        Ok((ir, reg))
    }
}

pub(crate) fn cluster_runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Exit(
                format!("error: failed to start the async runtime: {e}"),
                RUNTIME,
            )
        })
}

/// A kubeconfig that cannot be loaded is a usage error; anything the
/// cluster refuses or fails is a runtime error.
pub(crate) fn cluster_exit(e: katalog_runtime::cluster::ClusterError) -> Exit {
    let code = match e {
        katalog_runtime::cluster::ClusterError::Config(_) => USAGE,
        _ => RUNTIME,
    };
    Exit(format!("error: {e}"), code)
}

/// The compiled Katalog; its warnings go to standard error.
pub(crate) fn load_ir(path: &Path) -> Result<Ir, Exit> {
    let ir = load_ir_quiet(path)?;
    for w in &ir.admission.warnings {
        errln!("{}", w.render());
    }
    Ok(ir)
}

/// The compiled Katalog, warnings left to the caller.
pub(crate) fn load_ir_quiet(path: &Path) -> Result<Ir, Exit> {
    load_ir_live(path, None)
}

/// As [`load_ir_quiet`], with the cluster's CRDs instead of the `crd:`
/// files when `live` (`--live`).
pub(crate) fn load_ir_live(
    path: &Path,
    live: Option<&katalog_runtime::cluster::live::LiveCrds>,
) -> Result<Ir, Exit> {
    let sources = files::read_katalog(path)?;
    Ok(match live {
        Some(crds) => katalog_lang::compile_with_live_crds(&sources, |r| crds.read(r))?,
        None => files::compile_katalog(&sources)?,
    })
}
