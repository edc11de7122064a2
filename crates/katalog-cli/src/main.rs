//! `katalog`: check, convert and review offline with the same IR the server runs.
//!
//! This file parses the command line ([`args`]) and hands each command to
//! its file under [`cmd`]; what they print goes through [`output`], what
//! they read through [`input`].
// Everything printed goes through `out!`/`err!` (buffered, ordered, safe on
// a closed pipe); the lints catch a `println!` or `eprint!` that would not.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use clap::Parser;

// First: its `out!`, `outln!`, `err!` and `errln!` are used by the others.
#[macro_use]
mod output;
mod args;
mod cmd;
mod exit;
mod input;
mod jsonpath;

use args::{Cli, Command, DebugCommand, VERSION};
use exit::{Exit, USAGE};
use output::flush_out;

/// The allocator of the server and of every command: the engine allocates
/// and frees many small values per review (the CEL interpreter copies what
/// it reads), where mimalloc halves the time glibc's (and musl's) malloc
/// takes; see docs/benchmarks.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    katalog_lang::yaml::Limits::set_file_max_nodes(
        usize::try_from(cli.yaml_max_nodes).unwrap_or(usize::MAX),
    );
    if matches!(cli.command, Command::Serve(_)) {
        cmd::serve::serve_allocator_defaults();
    }
    let result = run(cli);
    flush_out();
    match result {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        Err(Exit(message, code)) => {
            err!("{message}");
            if !message.is_empty() && !message.ends_with('\n') {
                errln!();
            }
            ExitCode::from(code)
        }
    }
}

/// Help, version and usage errors as clap prints them (wrapped by clap to
/// the terminal's width: `COLUMNS`, else the terminal, at most 100
/// columns), written without a panic when the stream is closed.
fn clap_exit(e: clap::Error) -> ExitCode {
    let text = e.render().to_string();
    if e.use_stderr() {
        err!("{text}");
    } else {
        out!("{text}");
        flush_out();
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(USAGE))
}

fn run(cli: Cli) -> Result<(), Exit> {
    match cli.command {
        Command::Check(args) => cmd::check::run(args),
        Command::Init(args) => cmd::init::run(args),
        Command::Suggest(args) => cmd::suggest::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Analyze(args) => cmd::analyze::run(args),
        Command::Convert(args) => cmd::convert::run(args),
        Command::Review(args) => cmd::review::run(args),
        Command::Admit(args) => cmd::admit::run(args),
        Command::Serve(args) => cmd::serve::serve(*args),
        Command::Manifests(args) => cmd::manifests::run(args),
        Command::Register(args) => cmd::register::register(args),
        Command::Unregister { name, kubeconfig } => cmd::register::unregister(name, kubeconfig),
        Command::MigrateStorage {
            crd,
            kubeconfig,
            page_size,
            rate,
            resume_from,
        } => cmd::migrate::migrate_storage(crd, kubeconfig, page_size, rate, resume_from),
        Command::Test(args) => cmd::test::command(args),
        Command::Debug {
            what: DebugCommand::Ir { katalog },
        } => {
            let ir = cmd::load_ir(&katalog)?;
            out!("{ir}");
            Ok(())
        }
        Command::Version => {
            outln!("katalog {VERSION}");
            Ok(())
        }
        Command::Completion { shell } => {
            use clap::CommandFactory as _;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "katalog", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
            Ok(())
        }
        Command::Schema => {
            let schema = katalog_lang::document::json_schema();
            outln!(
                "{}",
                serde_json::to_string_pretty(&schema).unwrap_or_default()
            );
            Ok(())
        }
    }
}
