//! `katalog migrate-storage`.

use std::path::PathBuf;

use crate::cmd::*;
use crate::exit::{Exit, NO, RUNTIME, USAGE};

pub(crate) fn migrate_storage(
    crd: String,
    kubeconfig: Option<PathBuf>,
    page_size: u32,
    rate: f64,
    resume_from: Option<String>,
) -> Result<(), Exit> {
    use katalog_runtime::cluster::migrate::{MigrateError, MigrateOptions, migrate_storage};
    if !(rate.is_finite() && rate > 0.0) {
        return Err(Exit(
            "error: --rate must be a positive number of objects per second".into(),
            USAGE,
        ));
    }
    let opts = MigrateOptions {
        page_size,
        rate,
        resume_from,
        ..MigrateOptions::new(crd)
    };
    let rt = cluster_runtime()?;
    let client = rt
        .block_on(katalog_runtime::cluster::client(kubeconfig.as_deref()))
        .map_err(cluster_exit)?;
    let result = rt.block_on(migrate_storage(client, &opts, |p| errln!("{p}")));
    match result {
        Ok(report) => {
            outln!("{report}");
            Ok(())
        }
        Err(MigrateError::Incomplete { report }) => {
            outln!("{report}");
            Err(Exit(
                format!("error: {}", MigrateError::Incomplete { report }),
                NO,
            ))
        }
        Err(e) => Err(Exit(format!("error: {e}"), RUNTIME)),
    }
}
