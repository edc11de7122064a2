//! `katalog`: check, convert and review offline with the same IR the server runs.
// Everything printed goes through `out!`/`err!` (buffered, ordered, safe on
// a closed pipe); the lints catch a `println!` or `eprint!` that would not.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use katalog_lang::Ir;
use katalog_lang::admission::eval::{Endpoint, SimulatedRequest, Verdict};
use katalog_lang::document::Operation;
use serde_json::Value;

/// Print to standard output (buffered; flushed before anything goes to
/// standard error and at the end). A closed pipe (`katalog ... | head`)
/// never panics: what follows is dropped, and the command ends with its own
/// exit code.
macro_rules! out {
    ($($arg:tt)*) => {{
        crate::write_out(format_args!($($arg)*));
    }};
}
macro_rules! outln {
    () => {{
        crate::write_out(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        crate::write_out(format_args!($($arg)*));
        crate::write_out(format_args!("\n"));
    }};
}
/// Print to standard error; a closed or failing standard error is ignored
/// (`eprintln!` would panic).
macro_rules! err {
    ($($arg:tt)*) => {{
        crate::write_err(format_args!($($arg)*));
    }};
}
macro_rules! errln {
    () => {{
        crate::write_err(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        crate::write_err(format_args!($($arg)*));
        crate::write_err(format_args!("\n"));
    }};
}

thread_local! {
    static STDOUT: std::cell::RefCell<std::io::BufWriter<std::io::Stdout>> =
        std::cell::RefCell::new(std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()));
}
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Standard output's reader has gone: nothing more is worth computing for it.
pub(crate) fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
thread_local! {
    /// Unit tests: what `out!` writes on this thread, when capturing.
    static CAPTURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Unit tests: what `f` prints with `out!`.
#[cfg(test)]
pub(crate) fn capture_out(f: impl FnOnce()) -> String {
    CAPTURE.with(|c| *c.borrow_mut() = Some(String::new()));
    f();
    CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default()
}

pub(crate) fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    #[cfg(test)]
    {
        use std::fmt::Write as _;
        let captured = CAPTURE.with(|c| {
            c.borrow_mut()
                .as_mut()
                .map(|buf| buf.write_fmt(args).is_ok())
        });
        if captured.is_some() {
            return;
        }
    }
    if stdout_closed() {
        return;
    }
    if let Err(e) = STDOUT.with(|o| o.borrow_mut().write_fmt(args)) {
        stdout_failed(e);
    }
}

/// [`write_out`] of bytes as they are (the server's answer, byte for byte).
pub(crate) fn write_out_bytes(bytes: &[u8]) {
    use std::io::Write as _;
    #[cfg(test)]
    {
        let captured = CAPTURE.with(|c| {
            c.borrow_mut()
                .as_mut()
                .map(|buf| buf.push_str(&String::from_utf8_lossy(bytes)))
        });
        if captured.is_some() {
            return;
        }
    }
    if stdout_closed() {
        return;
    }
    if let Err(e) = STDOUT.with(|o| o.borrow_mut().write_all(bytes)) {
        stdout_failed(e);
    }
}

pub(crate) fn flush_out() {
    use std::io::Write as _;
    if stdout_closed() {
        return;
    }
    if let Err(e) = STDOUT.with(|o| o.borrow_mut().flush()) {
        stdout_failed(e);
    }
}

pub(crate) fn write_err(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    flush_out();
    let _ = std::io::stderr().lock().write_fmt(args);
}

pub(crate) fn stdout_failed(e: std::io::Error) {
    STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return;
    }
    write_err(format_args!(
        "error: failed to write to standard output: {e}\n"
    ));
    std::process::exit(exit::RUNTIME.into());
}

mod cmd;
mod exit;
mod input;
mod jsonpath;
mod output;
use exit::{Exit, KATALOG, NO, RUNTIME, USAGE};
use katalog_runtime::serving::files;

/// The allocator of the server and of every command: the engine allocates
/// and frees many small values per review (the CEL interpreter copies what
/// it reads), where mimalloc halves the time glibc's (and musl's) malloc
/// takes; see docs/benchmarks.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `katalog --version` and `katalog version`: the crate version and the git
/// commit it was built from (see build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KATALOG_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "katalog",
    version = VERSION,
    about = "Declarative Kubernetes webhooks: conversion and admission from one YAML Katalog"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Most YAML nodes (scalars, lists and maps) one file may hold: a
    /// Katalog, a CRD file, the objects read (see docs/cli.md).
    #[arg(long, global = true, env = "KATALOG_YAML_MAX_NODES", default_value_t = katalog_lang::yaml::FILE_MAX_NODES as u64, value_parser = clap::value_parser!(u64).range(1..))]
    yaml_max_nodes: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum AnalyzeFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Yaml,
    Json,
}

/// `--live` and how to reach the cluster, as kubectl does.
#[derive(clap::Args, Clone, Default)]
struct LiveArgs {
    /// Read the CRD of every resource from the cluster instead of the
    /// `crd:` files (one list of the CustomResourceDefinitions), e.g.
    /// `--live --context staging`.
    #[arg(long)]
    live: bool,
    /// With --live: kubeconfig file (default: as kubectl, `KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster service account).
    #[arg(long, requires = "live")]
    kubeconfig: Option<PathBuf>,
    /// With --live: the kubeconfig context to use (default: the current one).
    #[arg(long, requires = "live")]
    context: Option<String>,
}

impl LiveArgs {
    /// The cluster's CRDs when `--live`; an unreachable cluster ends the
    /// command (exit 4; an unloadable kubeconfig exit 2).
    fn fetch(&self) -> Result<Option<katalog_runtime::cluster::live::LiveCrds>, Exit> {
        if !self.live {
            return Ok(None);
        }
        let crds = cluster_runtime()?.block_on(async {
            let client = katalog_runtime::cluster::live::client(
                self.kubeconfig.as_deref(),
                self.context.as_deref(),
            )
            .await?;
            katalog_runtime::cluster::live::LiveCrds::list(client).await
        });
        Ok(Some(crds.map_err(cluster_exit)?))
    }
}

/// Analyse with the `crd:` files, or with the cluster's CRDs (`--live`).
fn analyze_sources(
    sources: &[katalog_lang::Source],
    live: Option<&katalog_runtime::cluster::live::LiveCrds>,
) -> Result<(Ir, katalog_lang::analysis::Analysis), katalog_lang::Diagnostics> {
    match live {
        Some(crds) => katalog_lang::analyze_with_live_crds(sources, |r| crds.read(r)),
        None => katalog_lang::analyze_with_crds(sources, files::read_crd),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Load and compile Katalogs; report every error and warning. Exit 0
    /// valid, 1 invalid, 2 usage (see docs/cli.md).
    #[command(
        after_help = "Examples:\n  katalog check katalogs/crontab.yaml\n  katalog check --strict /etc/katalog/katalog\n  katalog check --live --context staging katalogs/crontab.yaml"
    )]
    Check {
        /// Katalog files or directories.
        #[arg(required_unless_present = "katalog")]
        katalogs: Vec<PathBuf>,
        /// A Katalog file or directory, as the other commands name it; may
        /// be repeated (the same as naming it after the command).
        #[arg(short = 'k', long = "katalog", value_name = "KATALOG")]
        katalog: Vec<PathBuf>,
        /// Warnings (e.g. a rule that can never match) make the Katalog invalid.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        live: LiveArgs,
        /// With any ceiling flag, a Katalog over the ceiling is an error;
        /// without, its lock-out-prone registrations (fail-closed on the
        /// default protected namespaces or resources) are warnings.
        #[command(flatten)]
        ceiling: CeilingArgs,
    },
    /// Analyse the conversion rules against the CRD schemas (`crd:`): for
    /// every spoke and direction, where each field goes (identical, claimed
    /// by a rule, stashed, or nowhere: an error) and whether each rule is
    /// lossless or lossy. Exit 0 no errors, 1 errors, 2 usage (as `check`).
    #[command(
        after_help = "Examples:\n  katalog analyze katalogs/crontab.yaml\n  katalog analyze -o json katalogs/crontab.yaml katalogs/hostport.yaml\n  katalog analyze --live --kubeconfig ~/.kube/config katalogs/crontab.yaml"
    )]
    Analyze {
        /// Katalog files or directories.
        #[arg(required_unless_present = "katalog")]
        katalogs: Vec<PathBuf>,
        /// A Katalog file or directory, as the other commands name it; may
        /// be repeated (the same as naming it after the command).
        #[arg(short = 'k', long = "katalog", value_name = "KATALOG")]
        katalog: Vec<PathBuf>,
        /// Output format: a table per resource, spoke and direction, or JSON.
        #[arg(short, long, value_enum, default_value = "table")]
        output: AnalyzeFormat,
        #[command(flatten)]
        live: LiveArgs,
    },
    /// Write a first Katalog for the CRDs of a manifest file: the storage
    /// version is the hub, every other served version a spoke with no
    /// rules, and the fields the analysis finds with no place in the other
    /// version listed as comments to resolve. Printed to standard output;
    /// save it next to the CRD file. Exit 0, 2 the file cannot be read.
    #[command(
        after_help = "Examples:\n  katalog init --crd katalogs/crontab.crd.yaml > katalogs/crontab.yaml"
    )]
    Init {
        /// A CRD manifest file (every CustomResourceDefinition in it becomes a resource).
        #[arg(long)]
        crd: PathBuf,
        /// `metadata.name` of the Katalog; defaults to the first CRD's plural.
        #[arg(long)]
        name: Option<String>,
    },
    /// Draft rules for the fields the analysis finds with no place in the
    /// other version: a `rename` to a field of similar name and type in the
    /// same parent, a `coerce` where only the type changed, else a `stash`.
    /// Printed as YAML, marked as suggestions: review each before use. Exit
    /// 0, 1 the Katalog does not compile for another reason, 2 usage.
    #[command(
        after_help = "Examples:\n  katalog suggest katalogs/crontab.yaml\n  katalog suggest --live --context staging katalogs/crontab.yaml"
    )]
    Suggest {
        /// A Katalog file or directory.
        #[arg(required_unless_present = "katalog", conflicts_with = "katalog")]
        path: Option<PathBuf>,
        /// The Katalog, as the other commands name it (the same as PATH).
        #[arg(short = 'k', long)]
        katalog: Option<PathBuf>,
        #[command(flatten)]
        live: LiveArgs,
    },
    /// What an edit changes in the analysis: for each resource, spoke and
    /// direction, the fields that changed fate (identical, claimed, stashed,
    /// unclaimed), the lossless flag, and the errors gained or lost. Not
    /// YAML lines. Exit 0 the same, 1 different, 2 usage.
    #[command(
        after_help = "Examples:\n  katalog diff old/crontab.yaml katalogs/crontab.yaml\n  katalog diff --live --context staging old/crontab.yaml katalogs/crontab.yaml"
    )]
    Diff {
        /// The Katalog before (file or directory).
        before: PathBuf,
        /// The Katalog after.
        after: PathBuf,
        #[command(flatten)]
        live: LiveArgs,
    },
    /// Convert objects (any served version) to another version and print
    /// them; a List stays a List. Exit 0 all converted, 1 any failed.
    #[command(
        after_help = "Examples:\n  katalog convert --katalog katalogs/crontab.yaml --to v2 katalogs/examples/crontab-v1.yaml\n  kubectl get crontabs -o yaml | katalog convert --katalog katalogs/crontab.yaml --to v1beta1 -"
    )]
    Convert {
        /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
        #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
        katalog: PathBuf,
        /// Target version (`v2`) or apiVersion (`stable.example.com/v2`).
        #[arg(long)]
        to: String,
        /// Output format: yaml, json, or jsonpath=TEMPLATE (kubectl's
        /// templates, e.g. `-o jsonpath='{.items[*].metadata.name}'`).
        #[arg(short, long, default_value = "yaml", value_parser = parse_object_output)]
        output: Output,
        #[command(flatten)]
        objects: ObjectArgs,
        /// The namespace of objects that have none (namespaced kinds), as
        /// kubectl's `--namespace`; by default they are left without.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// A YAML or JSON file holding one or more objects (documents, a JSON
        /// array, JSON Lines, a `kind: List`) or a directory of them; `-`
        /// reads standard input (the default).
        file: Option<String>,
    },
    /// Answer a raw ConversionReview or AdmissionReview (JSON) exactly as the server would.
    #[command(
        after_help = "Example:\n  katalog review --katalog katalogs/crontab.yaml crates/katalog-lang/src/conversion/testdata/conversion-review-v1.json"
    )]
    Review {
        /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
        #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
        katalog: PathBuf,
        /// For an AdmissionReview: the webhook endpoint that answers it.
        #[arg(long, value_enum, default_value = "validate")]
        endpoint: ReviewEndpoint,
        /// The review file (JSON or YAML); `-` reads standard input.
        #[arg(default_value = "-")]
        file: String,
        /// Output format of the answer: json, yaml, or jsonpath=TEMPLATE.
        #[arg(short, long, default_value = "json", value_parser = parse_object_output)]
        output: Output,
    },
    /// Dry-run admission: mutations, then validations and protections on the
    /// mutated object, for each object of the input. Exit 0 all allowed,
    /// 1 any denied, 2 usage, 3 the Katalog does not compile.
    #[command(
        after_help = "Examples:\n  katalog admit --katalog katalogs/pod-security.yaml katalogs/examples/pod-baseline.yaml\n  kubectl get pods -A -o yaml | katalog admit --katalog katalogs/pod-security-restricted.yaml -o junit -"
    )]
    Admit {
        /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
        #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
        katalog: PathBuf,
        /// The operation of the simulated request (default CREATE, or UPDATE with --old).
        #[arg(long, value_enum)]
        operation: Option<OperationArg>,
        /// The object before the change (UPDATE, DELETE); only with one object.
        #[arg(long)]
        old: Option<PathBuf>,
        /// The requesting user's name (default katalog-cli).
        #[arg(long)]
        user: Option<String>,
        /// A group of the requesting user; may be repeated.
        #[arg(long = "group")]
        groups: Vec<String>,
        /// The request's namespace, and that of objects without one
        /// (default: the object's metadata.namespace, else `default` for
        /// namespaced kinds, as kubectl).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// `group/version/resource`, when it cannot be told from the object.
        #[arg(long)]
        resource: Option<String>,
        /// The subresource of the request (`status`, `scale`, ...).
        #[arg(long)]
        subresource: Option<String>,
        /// The Namespace object, for namespace selectors and `namespaceObject`.
        #[arg(long)]
        namespace_object: Option<PathBuf>,
        /// Output format: text, yaml, json, junit, or jsonpath=TEMPLATE
        /// (kubectl's templates, over the verdict or `{results, summary}`).
        #[arg(short, long, default_value = "text", value_parser = parse_verdict_output)]
        output: Output,
        #[command(flatten)]
        objects: ObjectArgs,
        /// The objects (YAML or JSON: documents, an array, JSON Lines, a
        /// `kind: List`) or a directory of them; `-` reads standard input.
        /// For a DELETE, the objects being deleted.
        file: Option<String>,
    },
    /// Run test-suite files (`kind: KatalogTest`). Exit 0 all pass, 1 any
    /// failure, 2 usage, 3 a suite's Katalog does not compile.
    #[command(
        after_help = "Examples:\n  katalog test katalogs testdata\n  katalog test katalogs/crontab.test.yaml --case 'round trip' --fail-only"
    )]
    Test {
        /// Suite files, or directories searched for `*.test.yaml`.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Report format.
        #[arg(short, long, value_enum, default_value = "table")]
        output: cmd::test::Report,
        /// Show only failing cases.
        #[arg(long)]
        fail_only: bool,
        /// Run only cases whose name matches this regex.
        #[arg(long = "case")]
        case: Option<String>,
        /// Also fuzz each suite's Katalog: N objects per version, generated
        /// from its CRD schemas, converted to every other version through
        /// the hub and back; the first that does not come back is shown,
        /// shrunk, with the rules responsible.
        /// Example: `katalog test --fuzz 10000 --seed 7 katalogs/`
        #[arg(long, value_name = "N")]
        fuzz: Option<u64>,
        /// The fuzzing seed (the same seed generates the same objects).
        #[arg(long, default_value_t = 0, requires = "fuzz")]
        seed: u64,
        /// `--live`: each suite's Katalog is compiled (and fuzzed) with the
        /// cluster's CRDs instead of its `crd:` files.
        #[command(flatten)]
        live: LiveArgs,
    },
    /// Serve the webhooks over HTTPS. Without --tls-cert/--tls-key, a
    /// development CA and certificate are generated.
    #[command(
        after_help = "Examples:\n  katalog serve --katalog katalogs/crontab.yaml --listen 127.0.0.1:8443\n  katalog serve --katalog /etc/katalog/katalog --self-signed-secret katalog-system/katalog-tls \\\n    --register --leader-election-namespace katalog-system --metrics-listen 0.0.0.0:9090"
    )]
    Serve(Box<ServeArgs>),
    /// Print the webhook configurations and CRD conversion patches the engine
    /// would apply (for GitOps review), or with --rbac the least RBAC it
    /// needs for them; needs no cluster.
    #[command(
        after_help = "Examples:\n  katalog manifests --katalog katalogs/crontab.yaml --ca-bundle ca.crt\n  katalog manifests --katalog katalogs/crontab.yaml --url https://127.0.0.1:8443 -o json\n  katalog manifests --rbac --katalog deploy/base/katalog \\\n    --self-signed-secret katalog-system/katalog-tls --leader-election-namespace katalog-system"
    )]
    Manifests {
        #[command(flatten)]
        target: TargetArgs,
        /// Output format: yaml, json (several objects as one List), or
        /// jsonpath=TEMPLATE.
        #[arg(short, long, default_value = "yaml", value_parser = parse_object_output)]
        output: Output,
        /// Print the ClusterRole, Role and bindings `katalog serve
        /// --register` needs for this Katalog instead: every rule names its
        /// objects (the two webhook configurations, the converted CRDs).
        #[arg(long)]
        rbac: bool,
        /// With --rbac: the ServiceAccount the engine runs as (in the
        /// Service's namespace).
        #[arg(long, default_value = "katalog", requires = "rbac")]
        service_account: String,
        /// With --rbac: the certificate Secret of `serve --self-signed-secret`.
        #[arg(long, value_name = "NAMESPACE/NAME", requires = "rbac")]
        self_signed_secret: Option<String>,
        /// With --rbac: the namespace of `serve --leader-election-namespace`.
        #[arg(long, requires = "rbac")]
        leader_election_namespace: Option<String>,
    },
    /// Register the engine with the cluster: server-side apply of the webhook
    /// configurations, removal of those no longer declared, and each CRD's
    /// spec.conversion (refused when its storage version is not the hub).
    #[command(
        after_help = "Example:\n  katalog register --katalog katalogs/crontab.yaml --ca-bundle ca.crt --kubeconfig ~/.kube/config"
    )]
    Register(RegisterArgs),
    /// Delete the webhook configurations `register` manages (CRD conversion
    /// settings are left: objects stored at other versions need them).
    #[command(after_help = "Example:\n  katalog unregister --name katalog")]
    Unregister {
        /// Base name of the configurations.
        #[arg(long, default_value = "katalog")]
        name: String,
        /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// After a storage-version change, rewrite every object of a CRD at the
    /// new storage version, then prune status.storedVersions to it (refused
    /// when any object failed to be rewritten).
    #[command(
        after_help = "Examples:\n  katalog migrate-storage --crd crontabs.stable.example.com\n  katalog migrate-storage --crd crontabs.stable.example.com --rate 20 --resume-from TOKEN"
    )]
    MigrateStorage {
        /// The CRD's name (<plural>.<group>).
        #[arg(long)]
        crd: String,
        /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Objects per list page.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
        page_size: u32,
        /// Objects rewritten per second at most.
        #[arg(long, default_value_t = 50.0)]
        rate: f64,
        /// Resume from the continue token a previous run printed.
        #[arg(long)]
        resume_from: Option<String>,
    },
    /// Print intermediate stages.
    #[command(after_help = "Example:\n  katalog debug ir --katalog katalogs/crontab.yaml")]
    Debug {
        #[command(subcommand)]
        what: DebugCommand,
    },
    /// Print the JSON Schema of the Katalog document.
    #[command(after_help = "Example:\n  katalog schema > katalog.schema.json")]
    Schema,
    /// Print the version and the git commit the binary was built from.
    #[command(after_help = "Example:\n  katalog version")]
    Version,
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  katalog completion bash > /etc/bash_completion.d/katalog\n  katalog completion zsh > \"${fpath[1]}/_katalog\"\n  katalog completion fish > ~/.config/fish/completions/katalog.fish"
    )]
    Completion {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("cluster").args(["register", "self_signed_secret"]).multiple(true)))]
struct ServeArgs {
    /// A Katalog file or directory (e.g. a mounted ConfigMap); watched for changes.
    #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
    katalog: PathBuf,
    /// Address of the HTTPS webhook listener.
    #[arg(long, env = "KATALOG_LISTEN", default_value = "0.0.0.0:8443")]
    listen: std::net::SocketAddr,
    /// Serving certificate (PEM); watched for rotation.
    #[arg(long, env = "KATALOG_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM); watched for rotation.
    #[arg(long, env = "KATALOG_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Plain-HTTP listener for /metrics, /healthz and /readyz.
    #[arg(long, env = "KATALOG_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Serve only clients with a certificate this CA (PEM) signed: mutual
    /// TLS, e.g. `--client-ca /etc/katalog/apiserver-client-ca.crt`.
    #[arg(long, env = "KATALOG_CLIENT_CA")]
    client_ca: Option<std::path::PathBuf>,
    /// The oldest TLS version accepted: 1.2 (AEAD suites only) or 1.3.
    #[arg(long, env = "KATALOG_TLS_MIN_VERSION", default_value = "1.2", value_parser = ["1.2", "1.3"])]
    tls_min_version: String,
    /// The authority ceiling: a Katalog over it is refused at load.
    #[command(flatten)]
    ceiling: CeilingArgs,
    /// With --client-ca: serve only client certificates with this common
    /// name or DNS name, e.g. `--client-name kube-apiserver` (repeatable;
    /// the environment variable takes a comma-separated list).
    #[arg(
        long,
        env = "KATALOG_CLIENT_NAME",
        requires = "client_ca",
        value_delimiter = ','
    )]
    client_name: Vec<String>,
    /// Largest request body, in bytes.
    #[arg(long, env = "KATALOG_BODY_LIMIT", default_value_t = 32 * 1024 * 1024)]
    body_limit: usize,
    /// Reviews read or evaluated at once; more get 429 (a timed-out
    /// evaluation counts until it ends).
    #[arg(long, env = "KATALOG_MAX_REVIEWS_IN_FLIGHT", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    max_reviews_in_flight: u32,
    /// Request bytes the reviews in flight may hold together; a review that
    /// would go over gets 429 (one review alone is always taken).
    #[arg(long, env = "KATALOG_MAX_BYTES_IN_FLIGHT", default_value_t = 128 * 1024 * 1024)]
    max_bytes_in_flight: usize,
    /// Longest evaluation of one review, in seconds.
    #[arg(long, env = "KATALOG_REQUEST_TIMEOUT", default_value_t = 25.0)]
    request_timeout: f64,
    /// Largest estimated cost of one CEL evaluation (size of the expression
    /// times the largest list or map to the power of its comprehension
    /// nesting); over it the rule fails closed, e.g. `--cel-cost-limit 1000000`.
    #[arg(long, env = "KATALOG_CEL_COST_LIMIT", default_value_t = katalog_lang::budget::DEFAULT_CEL_COST_LIMIT, value_parser = clap::value_parser!(u64).range(1..))]
    cel_cost_limit: u64,
    /// Longest evaluation of a small review (a body up to 64 KiB) on the
    /// connection thread, in seconds; beyond it the review is stopped and
    /// evaluated on the blocking pool. 0 evaluates every review on the
    /// pool, e.g. `--inline-limit 0.002`.
    #[arg(long, env = "KATALOG_INLINE_LIMIT", default_value_t = 0.002)]
    inline_limit: f64,
    /// Longest time a client may take to send its request, in seconds.
    #[arg(long, env = "KATALOG_CLIENT_TIMEOUT", default_value_t = 10.0)]
    client_timeout: f64,
    /// Longest TLS handshake, in seconds (a connection that sends no
    /// ClientHello is closed then), e.g. `--tls-handshake-timeout 5`.
    #[arg(long, env = "KATALOG_TLS_HANDSHAKE_TIMEOUT", default_value_t = 5.0)]
    tls_handshake_timeout: f64,
    /// TLS handshakes under way at once; beyond, accepting pauses until one
    /// ends, e.g. `--max-pending-handshakes 8192`.
    #[arg(long, env = "KATALOG_MAX_PENDING_HANDSHAKES", default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..))]
    max_pending_handshakes: u32,
    /// Time in-flight requests get to finish after SIGTERM / SIGINT, in seconds.
    #[arg(long, env = "KATALOG_SHUTDOWN_GRACE", default_value_t = 20)]
    shutdown_grace: u64,
    /// Worker threads (default: one per core).
    #[arg(long, env = "KATALOG_WORKERS")]
    workers: Option<usize>,
    /// Log line format (standard error).
    #[arg(long, env = "KATALOG_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormatArg,
    /// Where the development CA and certificate are written.
    #[arg(long, env = "KATALOG_DEV_CERT_DIR")]
    dev_cert_dir: Option<PathBuf>,
    /// Name of the Service in front of the engine: the certificate covers
    /// it and --register points the webhooks at it.
    #[arg(long, env = "KATALOG_SERVICE_NAME", default_value = "katalog")]
    service_name: String,
    /// Namespace of that Service.
    #[arg(
        long,
        env = "KATALOG_SERVICE_NAMESPACE",
        default_value = "katalog-system"
    )]
    service_namespace: String,
    /// Keep the cluster registered with the served Katalog (the housekeeper):
    /// webhook configurations and CRD conversion, restored on drift.
    #[arg(long, env = "KATALOG_REGISTER")]
    register: bool,
    /// Base name of the registered configurations.
    #[arg(long, env = "KATALOG_REGISTER_NAME", default_value = "katalog")]
    register_name: String,
    /// With --register: reach the engine at this base URL instead of the
    /// Service --service-name.--service-namespace (development).
    #[arg(long, env = "KATALOG_REGISTER_URL", requires = "register")]
    register_url: Option<String>,
    /// With --register: port of the Service.
    #[arg(long, env = "KATALOG_SERVICE_PORT", default_value_t = 443)]
    service_port: i32,
    /// With --register: PEM of the CA that signed the serving certificate
    /// (default: the development CA when no --tls-cert is given).
    #[arg(long, env = "KATALOG_CA_BUNDLE", requires = "register")]
    ca_bundle: Option<PathBuf>,
    /// With --register or --self-signed-secret: kubeconfig file (default:
    /// KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, requires = "cluster")]
    kubeconfig: Option<PathBuf>,
    /// Serve a certificate kept in this Secret (NAMESPACE/NAME): a CA and a
    /// serving certificate are generated into it, reused across restarts and
    /// replicas, restored when it is deleted, and rotated before they
    /// expire; with --register the caBundle follows.
    #[arg(
        long,
        env = "KATALOG_SELF_SIGNED_SECRET",
        conflicts_with_all = ["tls_cert", "tls_key", "ca_bundle", "dev_cert_dir"]
    )]
    self_signed_secret: Option<String>,
    /// With --self-signed-secret: lifetime of a serving certificate (s, m, h or d).
    #[arg(long, env = "KATALOG_CERT_VALIDITY", default_value = "90d", value_parser = duration_arg)]
    cert_validity: std::time::Duration,
    /// With --self-signed-secret: re-issue the serving certificate this long before it expires.
    #[arg(long, env = "KATALOG_CERT_ROTATE_BEFORE", default_value = "30d", value_parser = duration_arg)]
    cert_rotate_before: std::time::Duration,
    /// With --self-signed-secret: lifetime of a CA.
    #[arg(long, env = "KATALOG_CA_VALIDITY", default_value = "3650d", value_parser = duration_arg)]
    ca_validity: std::time::Duration,
    /// With --self-signed-secret: add a successor CA to the caBundle this long before the CA expires.
    #[arg(long, env = "KATALOG_CA_ROTATE_BEFORE", default_value = "365d", value_parser = duration_arg)]
    ca_rotate_before: std::time::Duration,
    /// With --self-signed-secret: how long a new CA is in the caBundle before it signs.
    #[arg(long, env = "KATALOG_CA_PROPAGATION", default_value = "60s", value_parser = duration_arg)]
    ca_propagation: std::time::Duration,
    /// With --self-signed-secret: how often expiry is checked (the Secret is also watched).
    #[arg(long, env = "KATALOG_CERT_CHECK_INTERVAL", default_value = "60s", value_parser = duration_arg)]
    cert_check_interval: std::time::Duration,
    /// With --register: full re-registration period, in seconds.
    #[arg(long, env = "KATALOG_RESYNC", default_value_t = 30.0)]
    resync: f64,
    /// With --register: elect a leader through a Lease in this namespace, so
    /// that only one replica reconciles (default: no election).
    #[arg(long, env = "KATALOG_LEADER_ELECTION_NAMESPACE", requires = "register")]
    leader_election_namespace: Option<String>,
}

/// Where the apiserver reaches the engine, shared by `manifests` and `register`.
/// The authority ceiling (issue 31): what a Katalog may make the engine do,
/// set by whoever deploys it. Any of these flags turns it on.
#[derive(clap::Args, Clone, Debug, Default)]
struct CeilingArgs {
    /// Enforce the authority ceiling with its defaults: no fail-closed
    /// validation or mutation on the protected namespaces or resources. A
    /// Katalog over it is refused (`serve` keeps the last good one).
    #[arg(long, env = "KATALOG_CEILING")]
    ceiling: bool,
    /// Namespaces no fail-closed rule may match (comma-separated; default
    /// kube-system,kube-node-lease,kube-public; `serve` adds its own).
    #[arg(
        long,
        env = "KATALOG_PROTECTED_NAMESPACES",
        value_delimiter = ',',
        value_name = "NS,..."
    )]
    protected_namespaces: Option<Vec<String>>,
    /// Resources no fail-closed rule may match, as GROUP/RESOURCE
    /// (`/nodes` for the core group; default: nodes, namespaces, leases,
    /// token and access reviews, webhook and policy configurations,
    /// APIServices, CSRs).
    #[arg(
        long,
        env = "KATALOG_PROTECTED_RESOURCES",
        value_delimiter = ',',
        value_name = "GROUP/RESOURCE,..."
    )]
    protected_resources: Option<Vec<String>>,
    /// The only resources validations and mutations may register for, as
    /// GROUP/RESOURCE (`*` for any part); default: any.
    #[arg(
        long,
        env = "KATALOG_ALLOW_REGISTER",
        value_delimiter = ',',
        value_name = "GROUP/RESOURCE,..."
    )]
    allow_register: Option<Vec<String>>,
    /// The only CRDs (PLURAL.GROUP) whose conversion the Katalog may take
    /// over; default: any.
    #[arg(
        long,
        env = "KATALOG_ALLOW_CONVERT",
        value_delimiter = ',',
        value_name = "CRD,..."
    )]
    allow_convert: Option<Vec<String>>,
    /// Where mutations may apply: `any` (default), `none`, or the only
    /// namespaces (comma-separated) each mutation must be limited to.
    #[arg(long, env = "KATALOG_ALLOW_MUTATIONS", value_name = "any|none|NS,...")]
    allow_mutations: Option<String>,
}

impl CeilingArgs {
    /// The ceiling these flags set, if any is given.
    fn build(&self) -> Result<Option<katalog_lang::ceiling::Ceiling>, Exit> {
        use katalog_lang::ceiling::{Ceiling, GroupResource, Mutations};
        let on = self.ceiling
            || self.protected_namespaces.is_some()
            || self.protected_resources.is_some()
            || self.allow_register.is_some()
            || self.allow_convert.is_some()
            || self.allow_mutations.is_some();
        if !on {
            return Ok(None);
        }
        let parse = |list: &[String], flag: &str| -> Result<Vec<GroupResource>, Exit> {
            list.iter()
                .filter(|s| !s.is_empty())
                .map(|s| GroupResource::parse(s))
                .collect::<Result<_, _>>()
                .map_err(|e| Exit(format!("error: --{flag}: {e}"), USAGE))
        };
        let mut ceiling = Ceiling::default();
        if let Some(list) = &self.protected_namespaces {
            ceiling.protected_namespaces = list.iter().filter(|s| !s.is_empty()).cloned().collect();
        }
        if let Some(list) = &self.protected_resources {
            ceiling.protected_resources = parse(list, "protected-resources")?;
        }
        if let Some(list) = &self.allow_register {
            ceiling.register = Some(parse(list, "allow-register")?);
        }
        if let Some(list) = &self.allow_convert {
            ceiling.convert = Some(list.iter().filter(|s| !s.is_empty()).cloned().collect());
        }
        ceiling.mutations = match self.allow_mutations.as_deref() {
            None | Some("any") => Mutations::Anywhere,
            Some("none") | Some("") => Mutations::Nowhere,
            Some(list) => Mutations::In(list.split(',').map(str::to_string).collect()),
        };
        Ok(Some(ceiling))
    }
}

#[derive(clap::Args)]
struct TargetArgs {
    /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
    #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
    katalog: PathBuf,
    /// Base name of the configurations.
    #[arg(long, default_value = "katalog")]
    name: String,
    /// Reach the engine at this base URL instead of a Service (development).
    #[arg(long, conflicts_with_all = ["service_name", "service_namespace"])]
    url: Option<String>,
    /// Name of the Service the webhooks call.
    #[arg(long, env = "KATALOG_SERVICE_NAME", default_value = "katalog")]
    service_name: String,
    /// Namespace of that Service.
    #[arg(
        long,
        env = "KATALOG_SERVICE_NAMESPACE",
        default_value = "katalog-system"
    )]
    service_namespace: String,
    /// Port of that Service.
    #[arg(long, default_value_t = 443)]
    service_port: i32,
    /// PEM file of the CA that signed the serving certificate (the caBundle).
    #[arg(long)]
    ca_bundle: Option<PathBuf>,
}

impl TargetArgs {
    /// The compiled Katalog and the registration these flags describe.
    fn load(self) -> Result<(Ir, katalog_runtime::cluster::registration::Registration), Exit> {
        use katalog_runtime::cluster::registration::{Registration, Target};
        let ir = load_ir(&self.katalog)?;
        let ca_bundle = match &self.ca_bundle {
            Some(p) => std::fs::read(p)
                .map_err(|e| Exit(format!("error: failed to read {}: {e}", p.display()), USAGE))?,
            None => Vec::new(),
        };
        let target = match self.url {
            Some(u) => Target::Url(u),
            None => Target::Service {
                namespace: self.service_namespace,
                name: self.service_name,
                port: self.service_port,
            },
        };
        let reg = Registration {
            name: self.name,
            target,
            ca_bundle,
        };
        reg.check().map_err(|e| Exit(format!("error: {e}"), 2))?;
        Ok((ir, reg))
    }
}

#[derive(clap::Args)]
struct RegisterArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReviewEndpoint {
    Validate,
    Mutate,
    DeletionProtection,
    NamespaceProtection,
    StrictModeProtection,
}

#[derive(Clone, Copy, ValueEnum)]
#[value(rename_all = "UPPER")]
enum OperationArg {
    Create,
    Update,
    Delete,
    Connect,
}

/// `-o` of the commands that print objects (`convert`) or verdicts (`admit`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Output {
    Text,
    Yaml,
    Json,
    /// One testcase per object; a denial is a failure.
    Junit,
    /// kubectl's `-o jsonpath=TEMPLATE`.
    JsonPath(String),
}

fn parse_output(s: &str, allowed: &[&str]) -> Result<Output, String> {
    let out = match s {
        "text" => Output::Text,
        "yaml" => Output::Yaml,
        "json" => Output::Json,
        "junit" => Output::Junit,
        _ => match s.strip_prefix("jsonpath=") {
            Some(t) => Output::JsonPath(t.to_string()),
            None => {
                return Err(format!(
                    "expected one of {}, jsonpath=TEMPLATE",
                    allowed.join(", ")
                ));
            }
        },
    };
    let name = s.split('=').next().unwrap_or(s);
    if name != "jsonpath" && !allowed.contains(&name) {
        return Err(format!(
            "expected one of {}, jsonpath=TEMPLATE",
            allowed.join(", ")
        ));
    }
    Ok(out)
}

fn parse_object_output(s: &str) -> Result<Output, String> {
    parse_output(s, &["yaml", "json"])
}

fn parse_verdict_output(s: &str) -> Result<Output, String> {
    parse_output(s, &["text", "yaml", "json", "junit"])
}

/// How the commands that read objects find them, as kubectl does.
#[derive(clap::Args, Clone, Default)]
struct ObjectArgs {
    /// A file or directory of objects (`.yaml`, `.yml`, `.json` in it),
    /// `-` for standard input; may be repeated, e.g. `-f a.yaml -f dir/`.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    filenames: Vec<String>,
    /// The largest text of one object (a document, an item of a List, a
    /// JSON value), in bytes; the number of objects is not limited.
    #[arg(long, env = "KATALOG_MAX_OBJECT_BYTES", default_value_t = input::DEFAULT_MAX_OBJECT_BYTES)]
    max_object_bytes: usize,
}

impl ObjectArgs {
    /// The inputs, in order: FILE then each `-f`; a directory gives its
    /// `.yaml`, `.yml` and `.json` files in name order.
    fn files(&self, file: Option<&str>) -> Result<Vec<String>, Exit> {
        let mut out = Vec::new();
        for f in file
            .into_iter()
            .chain(self.filenames.iter().map(String::as_str))
        {
            let path = Path::new(f);
            if f == "-" || !path.is_dir() {
                out.push(f.to_string());
                continue;
            }
            let entries = std::fs::read_dir(path)
                .map_err(|e| Exit(format!("error: failed to read {f}: {e}"), USAGE))?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && p.extension()
                            .and_then(|x| x.to_str())
                            .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
                })
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(Exit(
                    format!("error: {f} holds no .yaml, .yml or .json file"),
                    USAGE,
                ));
            }
            out.extend(files.into_iter().map(|p| p.display().to_string()));
        }
        Ok(out)
    }

    fn limits(&self) -> input::Limits {
        input::Limits {
            max_object_bytes: self.max_object_bytes,
        }
    }
}

/// Read every input, handing each object to `sink`; stops early, quietly,
/// once standard output's reader has gone.
fn read_inputs(
    files: &[String],
    limits: input::Limits,
    sink: &mut input::Sink<'_>,
) -> Result<(), Exit> {
    const STOPPED: u8 = u8::MAX;
    let mut guarded = |e| {
        if stdout_closed() {
            return Err(Exit::quiet(STOPPED));
        }
        sink(e)
    };
    for f in files {
        match input::read(f, limits, &mut guarded) {
            Err(Exit(_, STOPPED)) => return Ok(()),
            other => other?,
        }
    }
    Ok(())
}

#[derive(Subcommand)]
enum DebugCommand {
    /// Print the compiled rule IR.
    #[command(after_help = "Example:\n  katalog debug ir --katalog katalogs/crontab.yaml")]
    Ir {
        /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
        #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
        katalog: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    katalog_lang::yaml::Limits::set_file_max_nodes(
        usize::try_from(cli.yaml_max_nodes).unwrap_or(usize::MAX),
    );
    if matches!(cli.command, Command::Serve(_)) {
        serve_allocator_defaults();
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

/// The allocator setting the server is measured and deployed with:
/// mimalloc returns freed memory to the system after 50 ms instead of its
/// default 1 s (`MIMALLOC_PURGE_DELAY`, read when the allocator starts,
/// before `main`), which keeps the peak RSS of large reviews under load
/// about a third lower for about a quarter more CPU on them
/// (docs/benchmarks.md). Unless the operator set the delay (mimalloc reads
/// the variable's name in any case, and its older name
/// `MIMALLOC_RESET_DELAY`), `katalog serve` runs itself again with it, in
/// the same process (exec); where that cannot be done it says so and goes
/// on with the allocator's default.
fn serve_allocator_defaults() {
    #[cfg(unix)]
    {
        const PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";
        let set = std::env::vars_os().any(|(name, _)| {
            let name = name.to_string_lossy().to_ascii_uppercase();
            name == PURGE_DELAY || name == "MIMALLOC_RESET_DELAY"
        });
        if set {
            return;
        }
        use std::os::unix::process::CommandExt;
        // The running binary even if its file was replaced since.
        let exe = if cfg!(target_os = "linux") {
            Ok(std::path::PathBuf::from("/proc/self/exe"))
        } else {
            std::env::current_exe()
        };
        let err = match exe {
            Ok(exe) => {
                let mut args = std::env::args_os();
                let argv0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
                std::process::Command::new(&exe)
                    .arg0(argv0)
                    .args(args)
                    .env(PURGE_DELAY, "50")
                    .exec()
            }
            Err(e) => e,
        };
        errln!(
            "katalog serve: could not run again with {PURGE_DELAY}=50 ({err}); \
             going on with the allocator's default"
        );
    }
}

fn run(cli: Cli) -> Result<(), Exit> {
    match cli.command {
        Command::Check {
            mut katalogs,
            katalog,
            strict,
            live,
            ceiling,
        } => {
            katalogs.extend(katalog);
            let live = live.fetch()?;
            let ceiling = ceiling.build()?;
            let mut worst = exit::SUCCESS;
            for path in &katalogs {
                match load_ir_live(path, live.as_ref()) {
                    Ok(ir) => {
                        let sources = files::read_katalog(path)?;
                        let over = katalog_lang::ceiling::check(
                            &ir,
                            &sources,
                            ceiling.as_ref().unwrap_or(&Default::default()),
                            None,
                        );
                        if ceiling.is_some() && !over.is_empty() {
                            err!("{}", katalog_lang::Diagnostics(over).render());
                            worst = worst.max(NO);
                            continue;
                        }
                        let mut warnings = ir.admission.warnings.clone();
                        // Lock-out-prone: what `serve --ceiling` would refuse.
                        warnings.extend(over.into_iter().map(|mut d| {
                            d.message = format!("lock-out-prone: {}", d.message);
                            d.warning()
                        }));
                        let warnings = &warnings;
                        for w in warnings {
                            errln!("{}", w.render());
                        }
                        if strict && !warnings.is_empty() {
                            errln!(
                                "{}: {} warning{} (--strict makes them errors)",
                                path.display(),
                                warnings.len(),
                                plural(warnings.len())
                            );
                            worst = worst.max(NO);
                            continue;
                        }
                        let rules: usize = ir
                            .resources
                            .iter()
                            .flat_map(|r| &r.versions)
                            .map(|v| v.rules.len())
                            .sum();
                        let (v, m) = (ir.admission.validations.len(), ir.admission.mutations.len());
                        outln!(
                            "{}: ok ({} resource{}, {} conversion rule{}, {} validation{}, {} mutation{}{})",
                            path.display(),
                            ir.resources.len(),
                            plural(ir.resources.len()),
                            rules,
                            plural(rules),
                            v,
                            plural(v),
                            m,
                            plural(m),
                            if warnings.is_empty() {
                                String::new()
                            } else {
                                format!(", {} warning{}", warnings.len(), plural(warnings.len()))
                            }
                        );
                    }
                    Err(Exit(message, code)) => {
                        err!("{message}");
                        // For `check`, a Katalog that does not compile is the answer.
                        worst = worst.max(if code == KATALOG { NO } else { code });
                    }
                }
            }
            match worst {
                exit::SUCCESS => Ok(()),
                code => Err(Exit::quiet(code)),
            }
        }
        Command::Init { crd, name } => {
            let text = std::fs::read_to_string(&crd).map_err(|e| {
                Exit(
                    format!("error: failed to read {}: {e}\n", crd.display()),
                    USAGE,
                )
            })?;
            let crds: Vec<katalog_lang::schema::Crd> = katalog_lang::yaml::read_documents(&text)
                .map_err(|e| {
                    Exit(
                        format!(
                            "error: failed to parse {}: {}\n",
                            crd.display(),
                            e.message()
                        ),
                        USAGE,
                    )
                })?
                .iter()
                .filter_map(|root| {
                    let loc = katalog_lang::source::Loc {
                        file: crd.display().to_string().into(),
                        line: root.line,
                        column: root.column,
                    };
                    katalog_lang::schema::Crd::from_manifest(&root.to_value(), loc)
                })
                .collect();
            let Some(first) = crds.first() else {
                return Err(Exit(
                    format!(
                        "error: {} holds no CustomResourceDefinition\n",
                        crd.display()
                    ),
                    USAGE,
                ));
            };
            let name = name.unwrap_or_else(|| first.plural.clone());
            let file_name = crd
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            let render = |notes: &[std::collections::BTreeMap<String, Vec<String>>]| {
                let mut out = format!(
                    "# yaml-language-server: $schema=https://katalog.dev/schemas/katalog.v1alpha1.json\n#\n# Written by `katalog init --crd {file_name}`: a first Katalog to complete.\napiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata:\n  name: {name}\nspec:\n  resources:\n"
                );
                for (i, c) in crds.iter().enumerate() {
                    let empty = Default::default();
                    out.push_str(&katalog_lang::analysis::init_katalog(
                        c,
                        &file_name,
                        notes.get(i).unwrap_or(&empty),
                    ));
                }
                out
            };
            let draft = render(&[]);
            // Analyse the draft as if it lived next to the CRD file.
            let here = crd.with_file_name(format!("{name}.katalog.yaml"));
            let source = katalog_lang::Source::new(here.display().to_string(), draft.clone());
            let mut notes = vec![std::collections::BTreeMap::new(); crds.len()];
            if let Ok((_, analysis)) = katalog_lang::analyze_with_crds(&[source], files::read_crd) {
                for r in &analysis.resources {
                    let Some(i) = crds
                        .iter()
                        .position(|c| c.group == r.group && c.kind == r.kind)
                    else {
                        continue;
                    };
                    for d in &r.directions {
                        let spoke = if d.direction == "down" {
                            &d.to
                        } else {
                            &d.from
                        };
                        let entry: &mut Vec<String> = notes[i].entry(spoke.clone()).or_default();
                        for u in &d.unclaimed {
                            entry.push(format!("`{u}` of {} has no place in {}", d.from, d.to));
                        }
                        if d.errors > d.unclaimed.len() {
                            entry.push(format!(
                                "{} more problem(s) {} -> {}: see `katalog check`",
                                d.errors - d.unclaimed.len(),
                                d.from,
                                d.to
                            ));
                        }
                    }
                }
            }
            out!("{}", render(&notes));
            Ok(())
        }
        Command::Suggest {
            path,
            katalog,
            live,
        } => {
            let katalog = path.or(katalog).unwrap_or_default();
            let live = live.fetch()?;
            let sources = files::read_katalog(&katalog)?;
            let (_, analysis) = analyze_sources(&sources, live.as_ref())
                .map_err(|d| Exit::from(d).with_code(NO))?;
            outln!("# katalog suggest: draft rules, not checked; review each before adding it.");
            let mut any = false;
            for r in &analysis.resources {
                let mut by_spoke: std::collections::BTreeMap<
                    &str,
                    Vec<&katalog_lang::analysis::Suggestion>,
                > = Default::default();
                for d in &r.directions {
                    let spoke = if d.direction == "down" {
                        &d.to
                    } else {
                        &d.from
                    };
                    let list = by_spoke.entry(spoke.as_str()).or_default();
                    for s in &d.suggestions {
                        if !list
                            .iter()
                            .any(|x| x.rule == s.rule && x.for_each == s.for_each)
                        {
                            list.push(s);
                        }
                    }
                }
                by_spoke.retain(|_, l| !l.is_empty());
                if by_spoke.is_empty() {
                    continue;
                }
                any = true;
                outln!(
                    "# {}/{} (hub {}): under `conversion:`",
                    r.group,
                    r.kind,
                    r.hub
                );
                for (spoke, list) in by_spoke {
                    outln!("{spoke}:");
                    for s in list {
                        match &s.for_each {
                            None => outln!("  - {}  # suggested: {}", s.rule, s.why),
                            Some(p) => outln!(
                                "  # inside the `forEach` over `{p}`:\n  # - {}  # suggested: {}",
                                s.rule,
                                s.why
                            ),
                        }
                    }
                }
            }
            if !any {
                outln!("# nothing to suggest: every field has a place");
            }
            Ok(())
        }
        Command::Diff {
            before,
            after,
            live,
        } => {
            let live = live.fetch()?;
            let (a, b) = (
                analysis_facts(&before, live.as_ref())?,
                analysis_facts(&after, live.as_ref())?,
            );
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let empty = std::collections::BTreeSet::new();
            let mut differ = false;
            for key in keys {
                let (fa, fb) = (a.get(key).unwrap_or(&empty), b.get(key).unwrap_or(&empty));
                if fa == fb {
                    continue;
                }
                differ = true;
                outln!("{key}");
                for f in fa.difference(fb) {
                    outln!("  - {f}");
                }
                for f in fb.difference(fa) {
                    outln!("  + {f}");
                }
            }
            if differ {
                Err(Exit::quiet(NO))
            } else {
                outln!("no difference in coverage, claims, lossless flags or errors");
                Ok(())
            }
        }
        Command::Analyze {
            mut katalogs,
            katalog,
            output,
            live,
        } => {
            katalogs.extend(katalog);
            let live = live.fetch()?;
            let mut worst = exit::SUCCESS;
            let mut json = Vec::new();
            for path in &katalogs {
                let analyzed = files::read_katalog(path)
                    .map_err(Exit::from)
                    .and_then(|sources| {
                        analyze_sources(&sources, live.as_ref()).map_err(Exit::from)
                    });
                match analyzed {
                    Ok((_, analysis)) => {
                        for d in analysis.diagnostics.iter() {
                            errln!("{}", d.render());
                        }
                        if analysis.has_errors() {
                            worst = worst.max(NO);
                        }
                        match output {
                            AnalyzeFormat::Table => {
                                out!("{}", analysis_table(path, &analysis))
                            }
                            AnalyzeFormat::Json => json.push(serde_json::json!({
                                "katalog": path.display().to_string(),
                                "resources": analysis.resources,
                                "errors": analysis.diagnostics.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                            })),
                        }
                    }
                    Err(Exit(message, code)) => {
                        err!("{message}");
                        worst = worst.max(if code == KATALOG { NO } else { code });
                    }
                }
            }
            if let AnalyzeFormat::Json = output {
                print_values(&json, Format::Json);
            }
            match worst {
                exit::SUCCESS => Ok(()),
                code => Err(Exit::quiet(code)),
            }
        }
        Command::Convert {
            katalog,
            to,
            output,
            objects,
            namespace,
            file,
        } => {
            let ir = load_ir(&katalog)?;
            check_to(&ir, &to)?;
            let mut files = objects.files(file.as_deref())?;
            if files.is_empty() {
                files.push("-".into());
            }
            let shape = match output {
                Output::Json => output::Shape::Json,
                Output::JsonPath(_) => output::Shape::Collect,
                _ => output::Shape::Yaml,
            };
            let mut run = cmd::batch::ConvertRun {
                ir: &ir,
                to: &to,
                namespace: namespace.as_deref(),
                writer: output::ObjectWriter::new(shape),
                index: 0,
                failures: 0,
            };
            read_inputs(&files, objects.limits(), &mut |e| run.event(e))?;
            run.writer.finish();
            if let Output::JsonPath(template) = &output {
                let value = std::mem::replace(&mut run.writer, output::ObjectWriter::new(shape))
                    .into_value();
                print_jsonpath(template, &value)?;
            }
            if run.failures == 0 {
                Ok(())
            } else {
                Err(Exit::quiet(NO))
            }
        }
        Command::Review {
            katalog,
            endpoint,
            file,
            output,
        } => {
            let ir = load_ir(&katalog)?;
            let body = read_review(&file)?;
            let kind = katalog_lang::json::node::parse_value(&body)
                .ok()
                .and_then(|v| v.get("kind").and_then(Value::as_str).map(str::to_string));
            // A review the server would answer 400 to is unusable input.
            // The answer is the server's, byte for byte: the calls its
            // /convert and admission endpoints make.
            let bytes = if kind.as_deref() == Some("AdmissionReview") {
                let endpoint = match endpoint {
                    ReviewEndpoint::Validate => Endpoint::Validate,
                    ReviewEndpoint::Mutate => Endpoint::Mutate,
                    ReviewEndpoint::DeletionProtection => Endpoint::DeletionProtection,
                    ReviewEndpoint::NamespaceProtection => Endpoint::NamespaceProtection,
                    ReviewEndpoint::StrictModeProtection => Endpoint::StrictMode,
                };
                katalog_lang::admission::review::review_bytes(&ir, &body, endpoint, None)
                    .map_err(|e| Exit(format!("error: {e}"), USAGE))?
                    .bytes
            } else {
                katalog_lang::conversion::review_bytes(&ir, &body)
                    .map_err(|e| Exit(format!("error: {e}"), USAGE))?
                    .bytes
            };
            if matches!(output, Output::Json) {
                write_out_bytes(&bytes);
                return Ok(());
            }
            let response = katalog_lang::json::node::parse_value(&bytes)
                .map_err(|e| Exit(format!("error: failed to read the answer: {e}"), RUNTIME))?;
            print_objects(&[response], &output)
        }
        Command::Admit {
            katalog,
            operation,
            old,
            user,
            groups,
            namespace,
            resource,
            subresource,
            namespace_object,
            output,
            objects,
            file,
        } => {
            let ir = load_ir(&katalog)?;
            let one = |path: &str, flag: &str| -> Result<Value, Exit> {
                let mut objects = input::read_all(path)?;
                match objects.len() {
                    1 => Ok(objects.remove(0)),
                    n => Err(Exit(
                        format!("error: {flag}{path} holds {n} objects; give exactly one"),
                        USAGE,
                    )),
                }
            };
            let delete = matches!(operation, Some(OperationArg::Delete));
            let old_object = old
                .as_ref()
                .map(|p| one(&p.display().to_string(), "--old "))
                .transpose()?;
            let namespace_object = namespace_object
                .as_ref()
                .map(|p| one(&p.display().to_string(), "--namespace-object "))
                .transpose()?;
            let base = SimulatedRequest {
                resource,
                operation: operation.map(|o| match o {
                    OperationArg::Create => Operation::Create,
                    OperationArg::Update => Operation::Update,
                    OperationArg::Delete => Operation::Delete,
                    OperationArg::Connect => Operation::Connect,
                }),
                subresource,
                namespace,
                user,
                groups,
                object: None,
                old_object,
                namespace_object,
                dry_run: false,
            };
            let files = objects.files(file.as_deref())?;
            admit(&ir, base, delete, &output, &files, objects.limits())
        }
        Command::Serve(args) => serve(*args),
        Command::Manifests {
            target,
            output,
            rbac,
            service_account,
            self_signed_secret,
            leader_election_namespace,
        } => {
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
        Command::Register(args) => register(args),
        Command::Unregister { name, kubeconfig } => unregister(name, kubeconfig),
        Command::MigrateStorage {
            crd,
            kubeconfig,
            page_size,
            rate,
            resume_from,
        } => migrate_storage(crd, kubeconfig, page_size, rate, resume_from),
        Command::Test {
            paths,
            output,
            fail_only,
            case,
            fuzz,
            seed,
            live,
        } => cmd::test::run(
            &paths,
            output,
            fail_only,
            case.as_deref(),
            fuzz.map(|count| katalog_lang::fuzz::FuzzOptions { count, seed }),
            live.fetch()?.as_ref(),
        ),
        Command::Debug {
            what: DebugCommand::Ir { katalog },
        } => {
            let ir = load_ir(&katalog)?;
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

fn cluster_runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Exit(
                format!("error: failed to start the async runtime: {e}"),
                RUNTIME,
            )
        })
}

/// A kubeconfig that cannot be loaded is a usage error; anything the
/// cluster refuses or fails is a runtime error.
fn cluster_exit(e: katalog_runtime::cluster::ClusterError) -> Exit {
    let code = match e {
        katalog_runtime::cluster::ClusterError::Config(_) => USAGE,
        _ => RUNTIME,
    };
    Exit(format!("error: {e}"), code)
}

fn print_report(report: &katalog_runtime::cluster::RegisterReport) {
    for change in &report.changes {
        outln!("{change}");
    }
    if !report.changed() {
        outln!("nothing changed");
    }
}

fn register(args: RegisterArgs) -> Result<(), Exit> {
    let (ir, reg) = args.target.load()?;
    let report = cluster_runtime()?.block_on(async {
        let client = katalog_runtime::cluster::client(args.kubeconfig.as_deref()).await?;
        katalog_runtime::cluster::register(client, &ir, &reg).await
    });
    let report = report.map_err(cluster_exit)?;
    print_report(&report);
    Ok(())
}

fn unregister(name: String, kubeconfig: Option<PathBuf>) -> Result<(), Exit> {
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

fn migrate_storage(
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

/// `katalog serve`: the flags mapped to a [`katalog_runtime::ServeConfig`],
/// which the runtime builds and runs.
fn serve(args: ServeArgs) -> Result<(), Exit> {
    use katalog_runtime::serve::{Certificate, Register, Serve, ServeConfig, Service};
    katalog_runtime::init_tracing(match args.log_format {
        LogFormatArg::Text => katalog_runtime::LogFormat::Text,
        LogFormatArg::Json => katalog_runtime::LogFormat::Json,
    });
    let seconds = |s: f64, flag: &str| {
        match std::time::Duration::try_from_secs_f64(s) {
            // Finite, positive and within a Duration (`1e20` is not).
            Ok(d) if s > 0.0 => Ok(d),
            _ => Err(Exit(
                format!("error: --{flag} must be a positive number of seconds"),
                USAGE,
            )),
        }
    };
    let certificate = match (&args.self_signed_secret, args.tls_cert, args.tls_key) {
        (Some(secret), _, _) => Certificate::Secret {
            secret: secret
                .parse()
                .map_err(|e| Exit(format!("error: {e}"), USAGE))?,
            policy: katalog_runtime::certs::selfsigned::Policy {
                cert_validity: args.cert_validity,
                cert_rotate_before: args.cert_rotate_before,
                ca_validity: args.ca_validity,
                ca_rotate_before: args.ca_rotate_before,
                propagation: args.ca_propagation,
            },
            check_interval: args.cert_check_interval,
        },
        (None, Some(cert), Some(key)) => Certificate::Files { cert, key },
        _ => Certificate::Development {
            dir: args
                .dev_cert_dir
                .unwrap_or_else(|| std::env::temp_dir().join("katalog-dev")),
        },
    };
    let mut config = ServeConfig::new(args.katalog, certificate);
    let server = &mut config.server;
    server.listen = args.listen;
    server.metrics_listen = args.metrics_listen;
    server.client_ca = args.client_ca;
    server.client_names = args.client_name;
    server.body_limit = args.body_limit;
    server.max_reviews_in_flight = args.max_reviews_in_flight as usize;
    server.max_bytes_in_flight = args.max_bytes_in_flight;
    server.request_timeout = seconds(args.request_timeout, "request-timeout")?;
    server.cel_cost_limit = args.cel_cost_limit;
    server.inline_limit = if args.inline_limit == 0.0 {
        std::time::Duration::ZERO
    } else {
        seconds(args.inline_limit, "inline-limit").map_err(|_| {
            Exit(
                "error: --inline-limit must be 0 or a positive number of seconds".into(),
                USAGE,
            )
        })?
    };
    server.client_timeout = seconds(args.client_timeout, "client-timeout")?;
    server.tls_handshake_timeout = seconds(args.tls_handshake_timeout, "tls-handshake-timeout")?;
    server.max_pending_handshakes = args.max_pending_handshakes as usize;
    server.shutdown_grace = std::time::Duration::from_secs(args.shutdown_grace);
    if let Some(w) = args.workers {
        server.workers = w;
    }
    server.ceiling = args.ceiling.build()?;
    server.tls_min_version = match args.tls_min_version.as_str() {
        "1.3" => katalog_runtime::certs::tls::TlsMinVersion::Tls13,
        _ => katalog_runtime::certs::tls::TlsMinVersion::Tls12,
    };
    server.engine_namespace = Some(args.service_namespace.clone());
    config.service = Service {
        name: args.service_name,
        namespace: args.service_namespace,
        port: args.service_port,
    };
    config.kubeconfig = args.kubeconfig;
    if args.register {
        config.register = Some(Register {
            url: args.register_url,
            ca_bundle: args.ca_bundle,
            resync: seconds(args.resync, "resync")?,
            leader_election_namespace: args.leader_election_namespace,
            ..Register::new(args.register_name)
        });
    }
    let serve = Serve::new_from_config(config).map_err(serve_exit)?;
    if let Some((secret, applied)) = serve.secret_applied() {
        errln!(
            "certificate: Secret {secret} {}{}",
            applied.action,
            if applied.reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", applied.reasons.join("; "))
            }
        );
    }
    serve
        .run(|listening| {
            if let Some(ca) = &listening.development_ca {
                let port = listening.addr.port();
                let ca = std::fs::canonicalize(ca).unwrap_or_else(|_| ca.clone());
                errln!("development CA: {}", ca.display());
                let example = std::fs::canonicalize(
                    "crates/katalog-lang/src/conversion/testdata/conversion-review-v1.json",
                )
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "review.json".into());
                errln!(
                    "try: curl --cacert {} -H 'Content-Type: application/json' https://127.0.0.1:{port}/convert -d @{example}",
                    ca.display()
                );
            }
        })
        .map_err(serve_exit)
}

/// A configuration the runtime cannot use is a usage error (as for
/// `register`, a kubeconfig that cannot be loaded); anything the cluster,
/// the files or the server refuse a runtime error.
fn serve_exit(e: katalog_runtime::ServeError) -> Exit {
    match e {
        katalog_runtime::ServeError::NoCaBundle => Exit(
            "error: --register needs --ca-bundle when --tls-cert is given".into(),
            USAGE,
        ),
        e => {
            let code = if e.is_config() { USAGE } else { RUNTIME };
            Exit(format!("error: {e}"), code)
        }
    }
}

fn duration_arg(
    s: &str,
) -> Result<std::time::Duration, katalog_runtime::certs::selfsigned::DurationError> {
    katalog_runtime::certs::selfsigned::parse_duration(s)
}

fn print_verdict(v: &Verdict) {
    outln!("{}", if v.allowed { "ALLOWED" } else { "DENIED" });
    let n = v.matched.len();
    if n == 0 {
        outln!("matched: no rule");
    } else {
        outln!("matched: {n} rule{} ({})", plural(n), v.matched.join(", "));
    }
    for d in &v.denials {
        outln!("  deny  [{}] {}", d.rule, d.message);
    }
    for w in cmd::batch::warning_lines(v) {
        outln!("  warn  {w}");
    }
    for a in &v.audits {
        outln!("  audit [{}] {}", a.rule, a.message);
    }
    if !v.mutations.is_empty() {
        outln!("mutations: {}", v.mutations.join(", "));
        outln!("patch:");
        for op in &v.patch {
            outln!("  {}", serde_json::to_string(op).unwrap_or_default());
        }
    }
    if let Some(patched) = &v.patched {
        outln!("patched object:");
        out!("{}", serde_saphyr::to_string(patched).unwrap_or_default());
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The compiled Katalog; its warnings go to standard error.
fn load_ir(path: &Path) -> Result<Ir, Exit> {
    let ir = load_ir_quiet(path)?;
    for w in &ir.admission.warnings {
        errln!("{}", w.render());
    }
    Ok(ir)
}

/// The compiled Katalog, warnings left to the caller.
/// What `katalog diff` compares: per resource, spoke and direction, one
/// line per fact (`claimed spec.x`, `lossless`, ...), and the errors
/// (without their location, which any edit moves).
fn analysis_facts(
    path: &Path,
    live: Option<&katalog_runtime::cluster::live::LiveCrds>,
) -> Result<std::collections::BTreeMap<String, std::collections::BTreeSet<String>>, Exit> {
    let sources = files::read_katalog(path)?;
    let mut facts: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    let errors = match analyze_sources(&sources, live) {
        Ok((_, analysis)) => {
            for r in &analysis.resources {
                for d in &r.directions {
                    let set = facts
                        .entry(format!("{}/{} {} -> {}", r.group, r.kind, d.from, d.to))
                        .or_default();
                    set.insert(if d.lossless { "lossless" } else { "lossy" }.to_string());
                    for (what, paths) in [
                        ("identical", &d.identical),
                        ("stashed", &d.stashed),
                        ("unclaimed", &d.unclaimed),
                    ] {
                        set.extend(paths.iter().map(|p| format!("{what} {p}")));
                    }
                    set.extend(d.claimed.iter().map(|c| format!("claimed {}", c.path)));
                }
            }
            analysis.diagnostics
        }
        Err(diags) => diags,
    };
    let set = facts.entry("errors".to_string()).or_default();
    set.extend(errors.iter().map(|d| match &d.help {
        Some(h) => format!("{} ({h})", d.message),
        None => d.message.clone(),
    }));
    facts.retain(|_, v| !v.is_empty());
    Ok(facts)
}

/// `katalog analyze -o table`: per resource, each spoke and direction with
/// its verdict, the fields by fate, then each rule's verdict.
fn analysis_table(path: &Path, analysis: &katalog_lang::analysis::Analysis) -> String {
    let mut out = String::new();
    if analysis.resources.is_empty() {
        out.push_str(&format!(
            "{}: no resource with a `crd:` to analyse\n",
            path.display()
        ));
    }
    for r in &analysis.resources {
        out.push_str(&format!("{}/{} (hub {})\n", r.group, r.kind, r.hub));
        for d in &r.directions {
            let verdict = match (d.errors, d.lossless) {
                (0, true) => "lossless".to_string(),
                (0, false) => "lossy (acknowledged)".to_string(),
                (n, _) => format!("{n} error{}", plural(n)),
            };
            out.push_str(&format!(
                "  {} -> {}: {verdict}; {} identical, {} claimed, {} stashed, {} unclaimed\n",
                d.from,
                d.to,
                d.identical.len(),
                d.claimed.len(),
                d.stashed.len(),
                d.unclaimed.len()
            ));
            for u in &d.unclaimed {
                out.push_str(&format!("    unclaimed  {u}\n"));
            }
            for v in &d.rules {
                out.push_str(&format!(
                    "    {:<9}  {}: {}\n",
                    if v.lossless { "lossless" } else { "lossy" },
                    v.rule,
                    v.why
                ));
            }
        }
    }
    out
}

fn load_ir_quiet(path: &Path) -> Result<Ir, Exit> {
    load_ir_live(path, None)
}

/// As [`load_ir_quiet`], with the cluster's CRDs instead of the `crd:`
/// files when `live` (`--live`).
fn load_ir_live(
    path: &Path,
    live: Option<&katalog_runtime::cluster::live::LiveCrds>,
) -> Result<Ir, Exit> {
    let sources = files::read_katalog(path)?;
    Ok(match live {
        Some(crds) => katalog_lang::compile_with_live_crds(&sources, |r| crds.read(r))?,
        None => files::compile_katalog(&sources)?,
    })
}

fn read_input(file: &str) -> Result<Vec<u8>, Exit> {
    if file == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Exit(format!("error: failed to read standard input: {e}"), USAGE))?;
        Ok(buf)
    } else {
        std::fs::read(file).map_err(|e| Exit(format!("error: failed to read {file}: {e}"), USAGE))
    }
}

/// A review as JSON bytes: JSON as it is, YAML turned into JSON.
fn read_review(file: &str) -> Result<Vec<u8>, Exit> {
    let body = read_input(file)?;
    if katalog_lang::json::node::parse_value(&body).is_ok() {
        return Ok(body);
    }
    let name = input::display_name(file);
    let mut reviews = Vec::new();
    let read = input::read_from(&body[..], name, input::Limits::default(), &mut |e| {
        if let input::Event::Object(v) = e {
            reviews.push(v);
        }
        Ok(())
    });
    if let Err(yaml) = read {
        // JSON that is broken says so as JSON.
        return Err(match katalog_lang::json::node::parse_value(&body) {
            Err(e) if body.trim_ascii_start().starts_with(b"{") => Exit(
                format!(
                    "error: failed to parse {name}:{}:{}: {} (a review is JSON or YAML)",
                    e.line(),
                    e.column(),
                    e.to_string()
                        .rsplit_once(" at line ")
                        .map_or(e.to_string(), |(m, _)| m.to_string())
                ),
                USAGE,
            ),
            _ => yaml,
        });
    }
    match reviews.as_slice() {
        [one] => Ok(serde_json::to_vec(one).unwrap_or_default()),
        other => Err(Exit(
            format!(
                "error: {name} holds {} documents; give one ConversionReview or AdmissionReview (JSON or YAML)",
                other.len()
            ),
            USAGE,
        )),
    }
}

/// `--to` names a version no resource of the Katalog has: a usage error,
/// said once before any object is read.
fn check_to(ir: &Ir, to: &str) -> Result<(), Exit> {
    let (group, version) = match to.rsplit_once('/') {
        Some((g, v)) => (Some(g), v),
        None => (None, to),
    };
    let fits = ir
        .resources
        .iter()
        .filter(|r| group.is_none_or(|g| r.group == g))
        .any(|r| r.version(version).is_some());
    if fits {
        return Ok(());
    }
    let mut known: Vec<String> = ir
        .resources
        .iter()
        .flat_map(|r| {
            r.versions
                .iter()
                .map(move |v| format!("{}/{}", r.group, v.name))
        })
        .collect();
    // Each once, in the Katalog's order (two kinds of a group share versions).
    let mut seen = std::collections::HashSet::new();
    known.retain(|v| seen.insert(v.clone()));
    Err(Exit(
        format!(
            "error: --to {to}: no resource of the Katalog has this version (it has {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ),
        USAGE,
    ))
}

/// `katalog admit`: objects are evaluated as they are read. One plain
/// object gets the detailed verdict; a List or several objects one result
/// each and a summary.
fn admit(
    ir: &Ir,
    mut base: SimulatedRequest,
    delete: bool,
    output: &Output,
    files: &[String],
    limits: input::Limits,
) -> Result<(), Exit> {
    use cmd::batch::{BatchFormat, BatchPrinter};
    let format = match output {
        Output::Text => BatchFormat::Text,
        Output::Yaml => BatchFormat::Yaml,
        Output::Json => BatchFormat::Json,
        Output::Junit => BatchFormat::Junit,
        Output::JsonPath(_) => BatchFormat::Collect,
    };
    let suite = files
        .first()
        .map_or("<stdin>", |f| input::display_name(f))
        .to_string();
    // `--operation DELETE --old FILE -o junit`: the old object is the one reported.
    if files.is_empty() {
        if format == BatchFormat::Junit
            && delete
            && let Some(old) = base.old_object.take()
        {
            let mut printer = BatchPrinter::new(format);
            printer.result(cmd::batch::admit_one(ir, &base, 0, old, delete));
            return printer.finish(&suite);
        }
        return admit_single(ir, base, None, delete, output);
    }
    let with_old = base.old_object.is_some();
    let mut printer = BatchPrinter::new(format.clone());
    let mut pending: Option<Value> = None;
    let mut batch = format == BatchFormat::Junit;
    let mut count = 0usize;
    let mut any = false;
    let mut lists = false;
    read_inputs(files, limits, &mut |e| {
        any = true;
        match e {
            input::Event::ListBegin(_) => lists = true,
            input::Event::ListEnd(_) => {}
            input::Event::Object(v) => {
                count += 1;
                if with_old {
                    // Counted only: `--old` describes one object.
                    if count == 1 {
                        pending = Some(v);
                    }
                    return Ok(());
                }
                if !batch && (lists || pending.is_some()) {
                    batch = true;
                }
                if !batch {
                    pending = Some(v);
                    return Ok(());
                }
                if let Some(first) = pending.take() {
                    printer.result(cmd::batch::admit_one(ir, &base, 0, first, delete));
                }
                printer.result(cmd::batch::admit_one(ir, &base, count - 1, v, delete));
            }
        }
        Ok(())
    })?;
    if with_old && (lists || count != 1) {
        return Err(Exit(
            format!(
                "error: --old is the object before the change of one object, but the input holds {count} objects; admit them one at a time"
            ),
            USAGE,
        ));
    }
    if !any || (count == 0 && !lists) {
        let name = if files.len() == 1 {
            input::display_name(&files[0]).to_string()
        } else {
            files.join(", ")
        };
        return Err(Exit(format!("error: {name} holds no object"), USAGE));
    }
    if lists && !batch {
        batch = true;
    }
    if batch {
        if let Some(first) = pending.take() {
            printer.result(cmd::batch::admit_one(ir, &base, 0, first, delete));
        }
        let outcome = printer.finish(&suite);
        if let Output::JsonPath(template) = output {
            let value = serde_json::json!({
                "results": printer.collected,
                "summary": printer.summary,
            });
            print_jsonpath(template, &value)?;
        }
        return outcome;
    }
    admit_single(ir, base, pending, delete, output)
}

/// One plain object: the detailed verdict.
fn admit_single(
    ir: &Ir,
    base: SimulatedRequest,
    object: Option<Value>,
    delete: bool,
    output: &Output,
) -> Result<(), Exit> {
    let mut request = base;
    request.object = object;
    // A DELETE carries the object being deleted as the old object.
    if delete && request.old_object.is_none() {
        request.old_object = request.object.take();
    }
    let mut defaulted = None;
    for o in [&mut request.object, &mut request.old_object]
        .into_iter()
        .flatten()
    {
        if let Some(problem) = cmd::batch::not_an_object(o) {
            return Err(Exit(format!("error: {problem}"), USAGE));
        }
        defaulted = defaulted.or(cmd::batch::default_namespace(
            ir,
            request.namespace.as_deref(),
            o,
        ));
    }
    let input = request
        .to_input(ir)
        .map_err(|e| Exit(format!("error: {e}"), USAGE))?;
    let verdict = katalog_lang::admission::eval::evaluate(ir, &input, Endpoint::All);
    match output {
        Output::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&verdict).unwrap_or_default()
        ),
        Output::Yaml => out!("{}", serde_saphyr::to_string(&verdict).unwrap_or_default()),
        Output::JsonPath(template) => print_jsonpath(
            template,
            &serde_json::to_value(&verdict).unwrap_or_default(),
        )?,
        Output::Text | Output::Junit => {
            print_verdict(&verdict);
            if let Some(ns) = defaulted {
                outln!("namespace: {ns} (the object has none: kubectl's default, or --namespace)");
            }
        }
    }
    if verdict.allowed {
        Ok(())
    } else {
        Err(Exit::quiet(NO))
    }
}

/// Objects in the `-o` form: YAML documents, JSON (several as one List), or
/// a template over that JSON.
fn print_objects(values: &[Value], output: &Output) -> Result<(), Exit> {
    let shape = match output {
        Output::Json => output::Shape::Json,
        Output::JsonPath(_) => output::Shape::Collect,
        _ => output::Shape::Yaml,
    };
    let mut writer = output::ObjectWriter::new(shape);
    for v in values {
        writer.object(v);
    }
    writer.finish();
    match output {
        Output::JsonPath(template) => print_jsonpath(template, &writer.into_value()),
        _ => Ok(()),
    }
}

/// `-o jsonpath=TEMPLATE`: kubectl's template over `value`.
fn print_jsonpath(template: &str, value: &Value) -> Result<(), Exit> {
    let text = jsonpath::render(template, value)
        .map_err(|e| Exit(format!("error: -o jsonpath={template}: {e}"), USAGE))?;
    out!("{text}");
    Ok(())
}

/// An object to convert with `--to VERSION` that has no apiVersion to take
/// the group from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NoApiVersion;

impl std::fmt::Display for NoApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the object has no apiVersion")
    }
}

impl std::error::Error for NoApiVersion {}

/// `--to v2` means the object's group at v2; a full apiVersion is taken as is.
fn desired_api_version(ir: &Ir, object: &Value, to: &str) -> Result<String, NoApiVersion> {
    if to.contains('/') {
        return Ok(to.to_string());
    }
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(NoApiVersion)?;
    let (group, _) = katalog_lang::convert::split_api_version(api_version);
    let _ = ir;
    Ok(format!("{group}/{to}"))
}

fn print_values(values: &[Value], format: Format) {
    match format {
        Format::Json => {
            for v in values {
                outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
            }
        }
        Format::Yaml => {
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    outln!("---");
                }
                out!("{}", serde_saphyr::to_string(v).unwrap_or_default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// Every subcommand's `--help` shows an example and every flag and
    /// argument says what it is: walks the whole command tree, so a new
    /// subcommand or flag without them fails here.
    #[test]
    fn every_command_has_an_example_and_every_flag_a_description() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name()).trim().to_string();
            if path != "katalog" {
                let example = cmd
                    .get_after_help()
                    .map(|h| h.to_string())
                    .is_some_and(|h| h.starts_with("Example") && h.contains("katalog "));
                if !example {
                    missing.push(format!(
                        "`{path}`: no example (after_help = \"Example:...\")"
                    ));
                }
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("`{path}`: `{id}` has no description"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_name() != "help" {
                    walk(sub, &path, missing);
                }
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "", &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    #[test]
    fn to_a_version_takes_the_group_of_the_object() {
        let ir = katalog_lang::compile_sources(&[katalog_lang::Source::new(
            "crontab.yaml",
            include_str!("../../../katalogs/crontab.yaml"),
        )])
        .expect("compiles");
        let object = serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab"});
        assert_eq!(
            super::desired_api_version(&ir, &object, "v2"),
            Ok("stable.example.com/v2".to_string())
        );
        let err = super::desired_api_version(&ir, &serde_json::json!({}), "v2").unwrap_err();
        assert_eq!(err, super::NoApiVersion);
        assert_eq!(err.to_string(), "the object has no apiVersion");
    }

    /// `--to` a version no resource has lists each known version once, in
    /// order, though two kinds of a group share them.
    #[test]
    fn an_unknown_to_version_lists_each_known_version_once() {
        let text = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: k}\nspec:\n  resources:\n    - {group: a.example.com, kind: A, plural: as, hub: v1, versions: [v1, v2]}\n    - {group: b.example.com, kind: C, plural: cs, hub: v1, versions: [v1]}\n    - {group: a.example.com, kind: B, plural: bs, hub: v1, versions: [v1, v2]}\n";
        let ir = katalog_lang::compile_sources(&[katalog_lang::Source::new("k.yaml", text)])
            .expect("compiles");
        let super::Exit(message, _) = super::check_to(&ir, "v9").unwrap_err();
        assert_eq!(
            message,
            "error: --to v9: no resource of the Katalog has this version (it has a.example.com/v1, a.example.com/v2, b.example.com/v1)"
        );
    }

    /// `katalog --help` and every command's help fit the terminal: no
    /// line past the width once wrapped, and no word lost.
    #[test]
    fn help_is_wrapped_to_the_terminal_width() {
        fn walk(cmd: &mut clap::Command, out: &mut Vec<String>) {
            out.push(cmd.render_help().to_string());
            for sub in cmd.get_subcommands_mut() {
                walk(sub, out);
            }
        }
        // At 80 columns and wider; narrower, clap keeps the option column
        // of a command with long flags and lets that column's lines run over.
        for width in [80, 120] {
            let mut helps = Vec::new();
            walk(
                &mut super::Cli::command()
                    .term_width(width)
                    .max_term_width(width),
                &mut helps,
            );
            for help in &helps {
                // clap wraps the text it lays out, not the usage line.
                for line in help.lines().filter(|l| !l.starts_with("Usage:")) {
                    // A single word longer than the width stays whole.
                    assert!(
                        line.chars().count() <= width || !line.trim().contains(' '),
                        "{width}: {line:?}"
                    );
                }
            }
        }
    }

    /// The README's command table names every command.
    #[test]
    fn the_readme_names_every_command() {
        let readme = include_str!("../../../README.md");
        let missing: Vec<String> = super::Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .filter(|name| name != "help" && !readme.contains(&format!("`katalog {name}")))
            .collect();
        assert!(missing.is_empty(), "not in README.md's table: {missing:?}");
    }

    #[test]
    fn version_names_the_commit() {
        let v = super::Cli::command().render_version();
        assert!(
            v.starts_with(&format!("katalog {} (commit ", env!("CARGO_PKG_VERSION"))),
            "{v}"
        );
        assert!(!v.contains("(commit )"), "{v}");
    }
}
