//! `katalog register` and `katalog unregister`.

use std::path::PathBuf;

use crate::args::*;
use crate::cmd::*;
use crate::exit::Exit;

pub(crate) fn print_report(report: &katalog_runtime::cluster::RegisterReport) {
    for change in &report.changes {
        outln!("{change}");
    }
    if !report.changed() {
        outln!("nothing changed");
    }
}

pub(crate) fn register(args: RegisterArgs) -> Result<(), Exit> {
    let (ir, reg) = args.target.load()?;
    let report = cluster_runtime()?.block_on(async {
        let client = katalog_runtime::cluster::client(args.kubeconfig.as_deref()).await?;
        katalog_runtime::cluster::register(client, &ir, &reg).await
    });
    let report = report.map_err(cluster_exit)?;
    print_report(&report);
    Ok(())
}

pub(crate) fn unregister(name: String, kubeconfig: Option<PathBuf>) -> Result<(), Exit> {
    use katalog_runtime::cluster::registration::{Registration, Target};
    // Only the name matters to unregistration.
    let reg = Registration {
        name,
        target: Target::Url(String::new()),
        ca_bundle: Vec::new(),
    };
    let report = cluster_runtime()?.block_on(async {
        let client = katalog_runtime::cluster::client(kubeconfig.as_deref()).await?;
        katalog_runtime::cluster::unregister(client, &reg).await
    });
    let report = report.map_err(cluster_exit)?;
    print_report(&report);
    Ok(())
}
