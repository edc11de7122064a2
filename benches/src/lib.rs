//! Fixtures and a dependency-free timing harness for the Katalog benchmarks,
//! and the load driver of `katalog-load` (`load`, `peer`).
//!
//! The benchmarks themselves live in `benches/*.rs` (`harness = false`); run
//! them with `cargo bench -p katalog-benches`. Built and run by
//! `cargo test --all-targets` they see no `--bench` argument and run every
//! case once, unmeasured, as a smoke test.

/// The allocator the `katalog` binary uses (see `crates/katalog-cli`), so
/// that the benchmarks and the load tool measure what ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod fixtures;
pub mod harness;
pub mod load;
pub mod peer;
