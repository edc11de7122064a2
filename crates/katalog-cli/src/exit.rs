//! The exit codes of every `katalog` command, defined once. `docs/cli.md`
//! lists them in one table; keep the two in step.

use katalog_lang::{Diagnostics, ErrorKind};

/// Done; the answer is yes (valid, allowed, converted, every test passed).
pub const SUCCESS: u8 = 0;
/// The command's negative answer: an object denied, an invalid Katalog for
/// `check`, a failed test, an object that failed to convert, objects that
/// `migrate-storage` could not rewrite.
pub const NO: u8 = 1;
/// Usage error: bad flags, an unreadable or unparsable input file, a
/// kubeconfig that cannot be loaded.
pub const USAGE: u8 = 2;
/// The Katalog given to the command does not compile (for every command
/// but `check`, where that is its answer, [`NO`]).
pub const KATALOG: u8 = 3;
/// The cluster or the runtime failed: the apiserver refused or could not be
/// reached, the server could not start or stopped on an error.
pub const RUNTIME: u8 = 4;

/// An error that ends the command: its message and exit code.
pub struct Exit(pub String, pub u8);

impl Exit {
    /// Ends with `code` and nothing more to say (the output said it).
    pub fn quiet(code: u8) -> Self {
        Exit(String::new(), code)
    }

    /// The same message with another code.
    pub fn with_code(self, code: u8) -> Self {
        Exit(self.0, code)
    }
}

/// A Katalog that failed to load: unreadable files are a usage error; any
/// other mistake means it does not compile.
impl From<Diagnostics> for Exit {
    fn from(d: Diagnostics) -> Self {
        let io = d.iter().any(|x| x.kind == ErrorKind::Io);
        Exit(d.render(), if io { USAGE } else { KATALOG })
    }
}
