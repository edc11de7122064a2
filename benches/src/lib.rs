//! Fixtures and a dependency-free timing harness for the Katalog benchmarks,
//! and the load driver of `katalog-load` (`load`, `peer`).
//!
//! The benchmarks themselves live in `benches/*.rs` (`harness = false`); run
//! them with `cargo bench -p katalog-benches`. Built and run by
//! `cargo test --all-targets` they see no `--bench` argument and run every
//! case once, unmeasured, as a smoke test.

pub mod fixtures;
pub mod harness;
pub mod load;
pub mod peer;
