//! The subcommands, one file each.

pub(crate) mod batch;
pub(crate) mod test;
