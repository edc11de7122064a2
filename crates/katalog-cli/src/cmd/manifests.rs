//! `katalog manifests`: the webhook configurations (or RBAC) to apply.

use crate::args::*;
use crate::exit::{Exit, USAGE};
use crate::output::print_objects;

pub(crate) fn run(args: ManifestsArgs) -> Result<(), Exit> {
    let ManifestsArgs {
        target,
        output,
        rbac,
        service_account,
        self_signed_secret,
        leader_election_namespace,
    } = args;
    let namespace = target.service_namespace.clone();
    let (ir, reg) = target.load()?;
    if !rbac {
        let manifests = katalog_runtime::cluster::registration::manifests;
        print_objects(&manifests(&ir, &reg), &output)?;
        return Ok(());
    }
    let secret = match self_signed_secret {
        None => None,
        Some(s) => match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                Some((ns.to_string(), name.to_string()))
            }
            _ => {
                return Err(Exit(
                    format!("error: --self-signed-secret {s:?} is not NAMESPACE/NAME"),
                    USAGE,
                ));
            }
        },
    };
    let options = katalog_runtime::cluster::registration::RbacOptions {
        service_account: (namespace, service_account),
        secret,
        leader_election_namespace,
    };
    let rbac = katalog_runtime::cluster::registration::rbac;
    print_objects(&rbac(&ir, &reg, &options), &output)?;
    Ok(())
}
