//! The command line as clap reads it: every command, flag and argument,
//! with the help `--help` shows. What each command does is in `cmd/`.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::input;

/// `katalog --version` and `katalog version`: the crate version and the git
/// commit it was built from (see build.rs).
pub(crate) const VERSION: &str = concat!(
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
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Most YAML nodes (scalars, lists and maps) one file may hold: a
    /// Katalog, a CRD file, the objects read (see docs/cli.md).
    #[arg(long, global = true, env = "KATALOG_YAML_MAX_NODES", default_value_t = katalog_lang::yaml::FILE_MAX_NODES as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) yaml_max_nodes: u64,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum AnalyzeFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    Yaml,
    Json,
}

/// `--live` and how to reach the cluster, as kubectl does.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct LiveArgs {
    /// Read the CRD of every resource from the cluster instead of the
    /// `crd:` files (one list of the CustomResourceDefinitions), e.g.
    /// `--live --context staging`.
    #[arg(long)]
    pub(crate) live: bool,
    /// With --live: kubeconfig file (default: as kubectl, `KUBECONFIG`,
    /// `~/.kube/config`, then the in-cluster service account).
    #[arg(long, requires = "live")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// With --live: the kubeconfig context to use (default: the current one).
    #[arg(long, requires = "live")]
    pub(crate) context: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Load and compile Katalogs; report every error and warning. Exit 0
    /// valid, 1 invalid, 2 usage (see docs/cli.md).
    #[command(
        after_help = "Examples:\n  katalog check katalogs/crontab.yaml\n  katalog check --strict /etc/katalog/katalog\n  katalog check --live --context staging katalogs/crontab.yaml"
    )]
    Check(CheckArgs),
    /// Analyse the conversion rules against the CRD schemas (`crd:`): for
    /// every spoke and direction, where each field goes (identical, claimed
    /// by a rule, stashed, or nowhere: an error) and whether each rule is
    /// lossless or lossy. Exit 0 no errors, 1 errors, 2 usage (as `check`).
    #[command(
        after_help = "Examples:\n  katalog analyze katalogs/crontab.yaml\n  katalog analyze -o json katalogs/crontab.yaml katalogs/hostport.yaml\n  katalog analyze --live --kubeconfig ~/.kube/config katalogs/crontab.yaml"
    )]
    Analyze(AnalyzeArgs),
    /// Write a first Katalog for the CRDs of a manifest file: the storage
    /// version is the hub, every other served version a spoke with no
    /// rules, and the fields the analysis finds with no place in the other
    /// version listed as comments to resolve. Printed to standard output;
    /// save it next to the CRD file. Exit 0, 2 the file cannot be read.
    #[command(
        after_help = "Examples:\n  katalog init --crd katalogs/crontab.crd.yaml > katalogs/crontab.yaml"
    )]
    Init(InitArgs),
    /// Draft rules for the fields the analysis finds with no place in the
    /// other version: a `rename` to a field of similar name and type in the
    /// same parent, a `coerce` where only the type changed, else a `stash`.
    /// Printed as YAML, marked as suggestions: review each before use. Exit
    /// 0, 1 the Katalog does not compile for another reason, 2 usage.
    #[command(
        after_help = "Examples:\n  katalog suggest katalogs/crontab.yaml\n  katalog suggest --live --context staging katalogs/crontab.yaml"
    )]
    Suggest(SuggestArgs),
    /// What an edit changes in the analysis: for each resource, spoke and
    /// direction, the fields that changed fate (identical, claimed, stashed,
    /// unclaimed), the lossless flag, and the errors gained or lost. Not
    /// YAML lines. Exit 0 the same, 1 different, 2 usage.
    #[command(
        after_help = "Examples:\n  katalog diff old/crontab.yaml katalogs/crontab.yaml\n  katalog diff --live --context staging old/crontab.yaml katalogs/crontab.yaml"
    )]
    Diff(DiffArgs),
    /// Convert objects (any served version) to another version and print
    /// them; a List stays a List. Exit 0 all converted, 1 any failed.
    #[command(
        after_help = "Examples:\n  katalog convert --katalog katalogs/crontab.yaml --to v2 katalogs/examples/crontab-v1.yaml\n  kubectl get crontabs -o yaml | katalog convert --katalog katalogs/crontab.yaml --to v1beta1 -"
    )]
    Convert(ConvertArgs),
    /// Answer a raw ConversionReview or AdmissionReview (JSON) exactly as the server would.
    #[command(
        after_help = "Example:\n  katalog review --katalog katalogs/crontab.yaml crates/katalog-lang/src/conversion/testdata/conversion-review-v1.json"
    )]
    Review(ReviewArgs),
    /// Dry-run admission: mutations, then validations and protections on the
    /// mutated object, for each object of the input. Exit 0 all allowed,
    /// 1 any denied, 2 usage, 3 the Katalog does not compile.
    #[command(
        after_help = "Examples:\n  katalog admit --katalog katalogs/pod-security.yaml katalogs/examples/pod-baseline.yaml\n  kubectl get pods -A -o yaml | katalog admit --katalog katalogs/pod-security-restricted.yaml -o junit -"
    )]
    Admit(AdmitArgs),
    /// Run test-suite files (`kind: KatalogTest`). Exit 0 all pass, 1 any
    /// failure, 2 usage, 3 a suite's Katalog does not compile.
    #[command(
        after_help = "Examples:\n  katalog test katalogs testdata\n  katalog test katalogs/crontab.test.yaml --case 'round trip' --fail-only"
    )]
    Test(TestArgs),
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
    Manifests(ManifestsArgs),
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

/// `katalog check`.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// Katalog files or directories.
    #[arg(required_unless_present = "katalog")]
    pub(crate) katalogs: Vec<PathBuf>,
    /// A Katalog file or directory, as the other commands name it; may
    /// be repeated (the same as naming it after the command).
    #[arg(short = 'k', long = "katalog", value_name = "KATALOG")]
    pub(crate) katalog: Vec<PathBuf>,
    /// Warnings (e.g. a rule that can never match) make the Katalog invalid.
    #[arg(long)]
    pub(crate) strict: bool,
    #[command(flatten)]
    pub(crate) live: LiveArgs,
    /// With any ceiling flag, a Katalog over the ceiling is an error;
    /// without, its lock-out-prone registrations (fail-closed on the
    /// default protected namespaces or resources) are warnings.
    #[command(flatten)]
    pub(crate) ceiling: CeilingArgs,
}

/// `katalog analyze`.
#[derive(clap::Args)]
pub(crate) struct AnalyzeArgs {
    /// Katalog files or directories.
    #[arg(required_unless_present = "katalog")]
    pub(crate) katalogs: Vec<PathBuf>,
    /// A Katalog file or directory, as the other commands name it; may
    /// be repeated (the same as naming it after the command).
    #[arg(short = 'k', long = "katalog", value_name = "KATALOG")]
    pub(crate) katalog: Vec<PathBuf>,
    /// Output format: a table per resource, spoke and direction, or JSON.
    #[arg(short, long, value_enum, default_value = "table")]
    pub(crate) output: AnalyzeFormat,
    #[command(flatten)]
    pub(crate) live: LiveArgs,
}

/// `katalog init`.
#[derive(clap::Args)]
pub(crate) struct InitArgs {
    /// A CRD manifest file (every CustomResourceDefinition in it becomes a resource).
    #[arg(long)]
    pub(crate) crd: PathBuf,
    /// `metadata.name` of the Katalog; defaults to the first CRD's plural.
    #[arg(long)]
    pub(crate) name: Option<String>,
}

/// `katalog suggest`.
#[derive(clap::Args)]
pub(crate) struct SuggestArgs {
    /// A Katalog file or directory.
    #[arg(required_unless_present = "katalog", conflicts_with = "katalog")]
    pub(crate) path: Option<PathBuf>,
    /// The Katalog, as the other commands name it (the same as PATH).
    #[arg(short = 'k', long)]
    pub(crate) katalog: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) live: LiveArgs,
}

/// `katalog diff`.
#[derive(clap::Args)]
pub(crate) struct DiffArgs {
    /// The Katalog before (file or directory).
    pub(crate) before: PathBuf,
    /// The Katalog after.
    pub(crate) after: PathBuf,
    #[command(flatten)]
    pub(crate) live: LiveArgs,
}

/// `katalog convert`.
#[derive(clap::Args)]
pub(crate) struct ConvertArgs {
    /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
    #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
    pub(crate) katalog: PathBuf,
    /// Target version (`v2`) or apiVersion (`stable.example.com/v2`).
    #[arg(long)]
    pub(crate) to: String,
    /// Output format: yaml, json, or jsonpath=TEMPLATE (kubectl's
    /// templates, e.g. `-o jsonpath='{.items[*].metadata.name}'`).
    #[arg(short, long, default_value = "yaml", value_parser = parse_object_output)]
    pub(crate) output: Output,
    #[command(flatten)]
    pub(crate) objects: ObjectArgs,
    /// The namespace of objects that have none (namespaced kinds), as
    /// kubectl's `--namespace`; by default they are left without.
    #[arg(short = 'n', long)]
    pub(crate) namespace: Option<String>,
    /// A YAML or JSON file holding one or more objects (documents, a JSON
    /// array, JSON Lines, a `kind: List`) or a directory of them; `-`
    /// reads standard input (the default).
    pub(crate) file: Option<String>,
}

/// `katalog review`.
#[derive(clap::Args)]
pub(crate) struct ReviewArgs {
    /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
    #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
    pub(crate) katalog: PathBuf,
    /// For an AdmissionReview: the webhook endpoint that answers it.
    #[arg(long, value_enum, default_value = "validate")]
    pub(crate) endpoint: ReviewEndpoint,
    /// The review file (JSON or YAML); `-` reads standard input.
    #[arg(default_value = "-")]
    pub(crate) file: String,
    /// Output format of the answer: json, yaml, or jsonpath=TEMPLATE.
    #[arg(short, long, default_value = "json", value_parser = parse_object_output)]
    pub(crate) output: Output,
}

/// `katalog admit`.
#[derive(clap::Args)]
pub(crate) struct AdmitArgs {
    /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
    #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
    pub(crate) katalog: PathBuf,
    /// The operation of the simulated request (default CREATE, or UPDATE with --old).
    #[arg(long, value_enum)]
    pub(crate) operation: Option<OperationArg>,
    /// The object before the change (UPDATE, DELETE); only with one object.
    #[arg(long)]
    pub(crate) old: Option<PathBuf>,
    /// The requesting user's name (default katalog-cli).
    #[arg(long)]
    pub(crate) user: Option<String>,
    /// A group of the requesting user; may be repeated.
    #[arg(long = "group")]
    pub(crate) groups: Vec<String>,
    /// The request's namespace, and that of objects without one
    /// (default: the object's metadata.namespace, else `default` for
    /// namespaced kinds, as kubectl).
    #[arg(short = 'n', long)]
    pub(crate) namespace: Option<String>,
    /// `group/version/resource`, when it cannot be told from the object.
    #[arg(long)]
    pub(crate) resource: Option<String>,
    /// The subresource of the request (`status`, `scale`, ...).
    #[arg(long)]
    pub(crate) subresource: Option<String>,
    /// The Namespace object, for namespace selectors and `namespaceObject`.
    #[arg(long)]
    pub(crate) namespace_object: Option<PathBuf>,
    /// Output format: text, yaml, json, junit, or jsonpath=TEMPLATE
    /// (kubectl's templates, over the verdict or `{results, summary}`).
    #[arg(short, long, default_value = "text", value_parser = parse_verdict_output)]
    pub(crate) output: Output,
    #[command(flatten)]
    pub(crate) objects: ObjectArgs,
    /// The objects (YAML or JSON: documents, an array, JSON Lines, a
    /// `kind: List`) or a directory of them; `-` reads standard input.
    /// For a DELETE, the objects being deleted.
    pub(crate) file: Option<String>,
}

/// `katalog test`.
#[derive(clap::Args)]
pub(crate) struct TestArgs {
    /// Suite files, or directories searched for `*.test.yaml`.
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    /// Report format.
    #[arg(short, long, value_enum, default_value = "table")]
    pub(crate) output: crate::cmd::test::Report,
    /// Show only failing cases.
    #[arg(long)]
    pub(crate) fail_only: bool,
    /// Run only cases whose name matches this regex.
    #[arg(long = "case")]
    pub(crate) case: Option<String>,
    /// Also fuzz each suite's Katalog: N objects per version, generated
    /// from its CRD schemas, converted to every other version through
    /// the hub and back; the first that does not come back is shown,
    /// shrunk, with the rules responsible.
    /// Example: `katalog test --fuzz 10000 --seed 7 katalogs/`
    #[arg(long, value_name = "N")]
    pub(crate) fuzz: Option<u64>,
    /// The fuzzing seed (the same seed generates the same objects).
    #[arg(long, default_value_t = 0, requires = "fuzz")]
    pub(crate) seed: u64,
    /// `--live`: each suite's Katalog is compiled (and fuzzed) with the
    /// cluster's CRDs instead of its `crd:` files.
    #[command(flatten)]
    pub(crate) live: LiveArgs,
}

/// `katalog manifests`.
#[derive(clap::Args)]
pub(crate) struct ManifestsArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    /// Output format: yaml, json (several objects as one List), or
    /// jsonpath=TEMPLATE.
    #[arg(short, long, default_value = "yaml", value_parser = parse_object_output)]
    pub(crate) output: Output,
    /// Print the ClusterRole, Role and bindings `katalog serve
    /// --register` needs for this Katalog instead: every rule names its
    /// objects (the two webhook configurations, the converted CRDs).
    #[arg(long)]
    pub(crate) rbac: bool,
    /// With --rbac: the ServiceAccount the engine runs as (in the
    /// Service's namespace).
    #[arg(long, default_value = "katalog", requires = "rbac")]
    pub(crate) service_account: String,
    /// With --rbac: the certificate Secret of `serve --self-signed-secret`.
    #[arg(long, value_name = "NAMESPACE/NAME", requires = "rbac")]
    pub(crate) self_signed_secret: Option<String>,
    /// With --rbac: the namespace of `serve --leader-election-namespace`.
    #[arg(long, requires = "rbac")]
    pub(crate) leader_election_namespace: Option<String>,
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("cluster").args(["register", "self_signed_secret"]).multiple(true)))]
pub(crate) struct ServeArgs {
    /// A Katalog file or directory (e.g. a mounted ConfigMap); watched for changes.
    #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
    pub(crate) katalog: PathBuf,
    /// Address of the HTTPS webhook listener.
    #[arg(long, env = "KATALOG_LISTEN", default_value = "0.0.0.0:8443")]
    pub(crate) listen: std::net::SocketAddr,
    /// Serving certificate (PEM); watched for rotation.
    #[arg(long, env = "KATALOG_TLS_CERT", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM); watched for rotation.
    #[arg(long, env = "KATALOG_TLS_KEY", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Plain-HTTP listener for /metrics, /healthz and /readyz.
    #[arg(long, env = "KATALOG_METRICS_LISTEN")]
    pub(crate) metrics_listen: Option<std::net::SocketAddr>,
    /// Serve only clients with a certificate this CA (PEM) signed: mutual
    /// TLS, e.g. `--client-ca /etc/katalog/apiserver-client-ca.crt`.
    #[arg(long, env = "KATALOG_CLIENT_CA")]
    pub(crate) client_ca: Option<std::path::PathBuf>,
    /// The oldest TLS version accepted: 1.2 (AEAD suites only) or 1.3.
    #[arg(long, env = "KATALOG_TLS_MIN_VERSION", default_value = "1.2", value_parser = ["1.2", "1.3"])]
    pub(crate) tls_min_version: String,
    /// The authority ceiling: a Katalog over it is refused at load.
    #[command(flatten)]
    pub(crate) ceiling: CeilingArgs,
    /// With --client-ca: serve only client certificates with this common
    /// name or DNS name, e.g. `--client-name kube-apiserver` (repeatable;
    /// the environment variable takes a comma-separated list).
    #[arg(
        long,
        env = "KATALOG_CLIENT_NAME",
        requires = "client_ca",
        value_delimiter = ','
    )]
    pub(crate) client_name: Vec<String>,
    /// Largest request body, in bytes.
    #[arg(long, env = "KATALOG_BODY_LIMIT", default_value_t = 32 * 1024 * 1024)]
    pub(crate) body_limit: usize,
    /// Reviews read or evaluated at once; more get 429 (a timed-out
    /// evaluation counts until it ends).
    #[arg(long, env = "KATALOG_MAX_REVIEWS_IN_FLIGHT", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_reviews_in_flight: u32,
    /// Request bytes the reviews in flight may hold together; a review that
    /// would go over gets 429 (one review alone is always taken).
    #[arg(long, env = "KATALOG_MAX_BYTES_IN_FLIGHT", default_value_t = 128 * 1024 * 1024)]
    pub(crate) max_bytes_in_flight: usize,
    /// Longest evaluation of one review, in seconds.
    #[arg(long, env = "KATALOG_REQUEST_TIMEOUT", default_value_t = 25.0)]
    pub(crate) request_timeout: f64,
    /// Largest estimated cost of one CEL evaluation (size of the expression
    /// times the largest list or map to the power of its comprehension
    /// nesting); over it the rule fails closed, e.g. `--cel-cost-limit 1000000`.
    #[arg(long, env = "KATALOG_CEL_COST_LIMIT", default_value_t = katalog_lang::budget::DEFAULT_CEL_COST_LIMIT, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) cel_cost_limit: u64,
    /// Longest evaluation of a small review (a body up to 64 KiB) on the
    /// connection thread, in seconds; beyond it the review is stopped and
    /// evaluated on the blocking pool. 0 evaluates every review on the
    /// pool, e.g. `--inline-limit 0.002`.
    #[arg(long, env = "KATALOG_INLINE_LIMIT", default_value_t = 0.002)]
    pub(crate) inline_limit: f64,
    /// Longest time a client may take to send its request, in seconds.
    #[arg(long, env = "KATALOG_CLIENT_TIMEOUT", default_value_t = 10.0)]
    pub(crate) client_timeout: f64,
    /// Longest TLS handshake, in seconds (a connection that sends no
    /// ClientHello is closed then), e.g. `--tls-handshake-timeout 5`.
    #[arg(long, env = "KATALOG_TLS_HANDSHAKE_TIMEOUT", default_value_t = 5.0)]
    pub(crate) tls_handshake_timeout: f64,
    /// TLS handshakes under way at once; beyond, accepting pauses until one
    /// ends, e.g. `--max-pending-handshakes 8192`.
    #[arg(long, env = "KATALOG_MAX_PENDING_HANDSHAKES", default_value_t = 8192, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_pending_handshakes: u32,
    /// Time in-flight requests get to finish after SIGTERM / SIGINT, in seconds.
    #[arg(long, env = "KATALOG_SHUTDOWN_GRACE", default_value_t = 20)]
    pub(crate) shutdown_grace: u64,
    /// Worker threads (default: one per core).
    #[arg(long, env = "KATALOG_WORKERS")]
    pub(crate) workers: Option<usize>,
    /// Log line format (standard error).
    #[arg(long, env = "KATALOG_LOG_FORMAT", value_enum, default_value = "text")]
    pub(crate) log_format: LogFormatArg,
    /// Where the development CA and certificate are written.
    #[arg(long, env = "KATALOG_DEV_CERT_DIR")]
    pub(crate) dev_cert_dir: Option<PathBuf>,
    /// Name of the Service in front of the engine: the certificate covers
    /// it and --register points the webhooks at it.
    #[arg(long, env = "KATALOG_SERVICE_NAME", default_value = "katalog")]
    pub(crate) service_name: String,
    /// Namespace of that Service.
    #[arg(
        long,
        env = "KATALOG_SERVICE_NAMESPACE",
        default_value = "katalog-system"
    )]
    pub(crate) service_namespace: String,
    /// Keep the cluster registered with the served Katalog (the housekeeper):
    /// webhook configurations and CRD conversion, restored on drift.
    #[arg(long, env = "KATALOG_REGISTER")]
    pub(crate) register: bool,
    /// Base name of the registered configurations.
    #[arg(long, env = "KATALOG_REGISTER_NAME", default_value = "katalog")]
    pub(crate) register_name: String,
    /// With --register: reach the engine at this base URL instead of the
    /// Service --service-name.--service-namespace (development).
    #[arg(long, env = "KATALOG_REGISTER_URL", requires = "register")]
    pub(crate) register_url: Option<String>,
    /// With --register: port of the Service.
    #[arg(long, env = "KATALOG_SERVICE_PORT", default_value_t = 443)]
    pub(crate) service_port: i32,
    /// With --register: PEM of the CA that signed the serving certificate
    /// (default: the development CA when no --tls-cert is given).
    #[arg(long, env = "KATALOG_CA_BUNDLE", requires = "register")]
    pub(crate) ca_bundle: Option<PathBuf>,
    /// With --register or --self-signed-secret: kubeconfig file (default:
    /// KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, requires = "cluster")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Serve a certificate kept in this Secret (NAMESPACE/NAME): a CA and a
    /// serving certificate are generated into it, reused across restarts and
    /// replicas, restored when it is deleted, and rotated before they
    /// expire; with --register the caBundle follows.
    #[arg(
        long,
        env = "KATALOG_SELF_SIGNED_SECRET",
        conflicts_with_all = ["tls_cert", "tls_key", "ca_bundle", "dev_cert_dir"]
    )]
    pub(crate) self_signed_secret: Option<String>,
    /// With --self-signed-secret: lifetime of a serving certificate (s, m, h or d).
    #[arg(long, env = "KATALOG_CERT_VALIDITY", default_value = "90d", value_parser = duration_arg)]
    pub(crate) cert_validity: std::time::Duration,
    /// With --self-signed-secret: re-issue the serving certificate this long before it expires.
    #[arg(long, env = "KATALOG_CERT_ROTATE_BEFORE", default_value = "30d", value_parser = duration_arg)]
    pub(crate) cert_rotate_before: std::time::Duration,
    /// With --self-signed-secret: lifetime of a CA.
    #[arg(long, env = "KATALOG_CA_VALIDITY", default_value = "3650d", value_parser = duration_arg)]
    pub(crate) ca_validity: std::time::Duration,
    /// With --self-signed-secret: add a successor CA to the caBundle this long before the CA expires.
    #[arg(long, env = "KATALOG_CA_ROTATE_BEFORE", default_value = "365d", value_parser = duration_arg)]
    pub(crate) ca_rotate_before: std::time::Duration,
    /// With --self-signed-secret: how long a new CA is in the caBundle before it signs.
    #[arg(long, env = "KATALOG_CA_PROPAGATION", default_value = "60s", value_parser = duration_arg)]
    pub(crate) ca_propagation: std::time::Duration,
    /// With --self-signed-secret: how often expiry is checked (the Secret is also watched).
    #[arg(long, env = "KATALOG_CERT_CHECK_INTERVAL", default_value = "60s", value_parser = duration_arg)]
    pub(crate) cert_check_interval: std::time::Duration,
    /// With --register: full re-registration period, in seconds.
    #[arg(long, env = "KATALOG_RESYNC", default_value_t = 30.0)]
    pub(crate) resync: f64,
    /// With --register: elect a leader through a Lease in this namespace, so
    /// that only one replica reconciles (default: no election).
    #[arg(long, env = "KATALOG_LEADER_ELECTION_NAMESPACE", requires = "register")]
    pub(crate) leader_election_namespace: Option<String>,
}

/// The authority ceiling (issue 31): what a Katalog may make the engine do,
/// set by whoever deploys it. Any of these flags turns it on.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct CeilingArgs {
    /// Enforce the authority ceiling with its defaults: no fail-closed
    /// validation or mutation on the protected namespaces or resources. A
    /// Katalog over it is refused (`serve` keeps the last good one).
    #[arg(long, env = "KATALOG_CEILING")]
    pub(crate) ceiling: bool,
    /// Namespaces no fail-closed rule may match (comma-separated; default
    /// kube-system,kube-node-lease,kube-public; `serve` adds its own).
    #[arg(
        long,
        env = "KATALOG_PROTECTED_NAMESPACES",
        value_delimiter = ',',
        value_name = "NS,..."
    )]
    pub(crate) protected_namespaces: Option<Vec<String>>,
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
    pub(crate) protected_resources: Option<Vec<String>>,
    /// The only resources validations and mutations may register for, as
    /// GROUP/RESOURCE (`*` for any part); default: any.
    #[arg(
        long,
        env = "KATALOG_ALLOW_REGISTER",
        value_delimiter = ',',
        value_name = "GROUP/RESOURCE,..."
    )]
    pub(crate) allow_register: Option<Vec<String>>,
    /// The only CRDs (PLURAL.GROUP) whose conversion the Katalog may take
    /// over; default: any.
    #[arg(
        long,
        env = "KATALOG_ALLOW_CONVERT",
        value_delimiter = ',',
        value_name = "CRD,..."
    )]
    pub(crate) allow_convert: Option<Vec<String>>,
    /// Where mutations may apply: `any` (default), `none`, or the only
    /// namespaces (comma-separated) each mutation must be limited to.
    #[arg(long, env = "KATALOG_ALLOW_MUTATIONS", value_name = "any|none|NS,...")]
    pub(crate) allow_mutations: Option<String>,
}

/// Where the apiserver reaches the engine, shared by `manifests` and `register`.
#[derive(clap::Args)]
pub(crate) struct TargetArgs {
    /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
    #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
    pub(crate) katalog: PathBuf,
    /// Base name of the configurations.
    #[arg(long, default_value = "katalog")]
    pub(crate) name: String,
    /// Reach the engine at this base URL instead of a Service (development).
    #[arg(long, conflicts_with_all = ["service_name", "service_namespace"])]
    pub(crate) url: Option<String>,
    /// Name of the Service the webhooks call.
    #[arg(long, env = "KATALOG_SERVICE_NAME", default_value = "katalog")]
    pub(crate) service_name: String,
    /// Namespace of that Service.
    #[arg(
        long,
        env = "KATALOG_SERVICE_NAMESPACE",
        default_value = "katalog-system"
    )]
    pub(crate) service_namespace: String,
    /// Port of that Service.
    #[arg(long, default_value_t = 443)]
    pub(crate) service_port: i32,
    /// PEM file of the CA that signed the serving certificate (the caBundle).
    #[arg(long)]
    pub(crate) ca_bundle: Option<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct RegisterArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub(crate) kubeconfig: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum LogFormatArg {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ReviewEndpoint {
    Validate,
    Mutate,
    DeletionProtection,
    NamespaceProtection,
    StrictModeProtection,
}

#[derive(Clone, Copy, ValueEnum)]
#[value(rename_all = "UPPER")]
pub(crate) enum OperationArg {
    Create,
    Update,
    Delete,
    Connect,
}

/// `-o` of the commands that print objects (`convert`) or verdicts (`admit`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    Text,
    Yaml,
    Json,
    /// One testcase per object; a denial is a failure.
    Junit,
    /// kubectl's `-o jsonpath=TEMPLATE`.
    JsonPath(String),
}

pub(crate) fn parse_output(s: &str, allowed: &[&str]) -> Result<Output, String> {
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

pub(crate) fn parse_object_output(s: &str) -> Result<Output, String> {
    parse_output(s, &["yaml", "json"])
}

pub(crate) fn parse_verdict_output(s: &str) -> Result<Output, String> {
    parse_output(s, &["text", "yaml", "json", "junit"])
}

/// How the commands that read objects find them, as kubectl does.
#[derive(clap::Args, Clone, Default)]
pub(crate) struct ObjectArgs {
    /// A file or directory of objects (`.yaml`, `.yml`, `.json` in it),
    /// `-` for standard input; may be repeated, e.g. `-f a.yaml -f dir/`.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub(crate) filenames: Vec<String>,
    /// The largest text of one object (a document, an item of a List, a
    /// JSON value), in bytes; the number of objects is not limited.
    #[arg(long, env = "KATALOG_MAX_OBJECT_BYTES", default_value_t = input::DEFAULT_MAX_OBJECT_BYTES)]
    pub(crate) max_object_bytes: usize,
}

#[derive(Subcommand)]
pub(crate) enum DebugCommand {
    /// Print the compiled rule IR.
    #[command(after_help = "Example:\n  katalog debug ir --katalog katalogs/crontab.yaml")]
    Ir {
        /// The Katalog: a file or a directory (e.g. a mounted ConfigMap).
        #[arg(short = 'k', long, env = "KATALOG_KATALOG")]
        katalog: PathBuf,
    },
}

pub(crate) fn duration_arg(
    s: &str,
) -> Result<std::time::Duration, katalog_runtime::certs::selfsigned::DurationError> {
    katalog_runtime::certs::selfsigned::parse_duration(s)
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
        walk(&crate::args::Cli::command(), "", &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
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
                &mut crate::args::Cli::command()
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
        let missing: Vec<String> = crate::args::Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .filter(|name| name != "help" && !readme.contains(&format!("`katalog {name}")))
            .collect();
        assert!(missing.is_empty(), "not in README.md's table: {missing:?}");
    }

    #[test]
    fn version_names_the_commit() {
        let v = crate::args::Cli::command().render_version();
        assert!(
            v.starts_with(&format!("katalog {} (commit ", env!("CARGO_PKG_VERSION"))),
            "{v}"
        );
        assert!(!v.contains("(commit )"), "{v}");
    }
}
