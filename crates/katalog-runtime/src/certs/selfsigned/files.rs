//! The serving certificate written to files for the server to load
//! ([`ServingFiles`]), atomically, key readable by the owner only.

use std::path::{Path, PathBuf};

use super::material::*;
use super::policy::*;

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

pub(super) fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
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
