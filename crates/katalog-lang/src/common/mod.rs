//! What every stage shares and that depends on no stage:
//!
//! - [`path`]: field paths (`spec.containers[*].image`) and their segments;
//! - [`json`]: JSON helpers (a lazily parsed node tree in [`json::node`]);
//! - [`names`]: checks of names and patterns both halves share (DNS labels,
//!   qualified names, stash annotation keys, split patterns);
//! - [`budget`]: how much work one review may cost (deadline, CEL cost).
//!
//! Imports nothing of the crate but `error`.

pub mod budget;
pub mod json;
pub mod names;
pub mod path;
