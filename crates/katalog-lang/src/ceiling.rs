//! The authority ceiling: what a Katalog may make the engine do, set by
//! whoever deploys the engine (its flags), not by whoever edits the Katalog.
//!
//! Editing the Katalog is a namespaced right; without a ceiling it would
//! reach as far as the engine's ClusterRole: register fail-closed webhooks
//! on what keeps the cluster alive (Nodes, Leases, Namespaces, token and
//! access reviews, `kube-system`), repoint any CRD's conversion, mutate
//! anything. [`check`] compares a compiled Katalog with a [`Ceiling`] and
//! locates every excess at the rule or resource that asks for it: the
//! server refuses such a Katalog (the last good one keeps serving), and
//! `katalog check` reports the same findings as warnings when no ceiling is
//! set (lock-out-prone registrations). Pure: the flags are parsed by the
//! CLI.

use crate::admission::webhooks::{self, WebhookRule};
use crate::error::{Diagnostic, ErrorKind};
use crate::front::document::FailurePolicy;
use crate::front::source::{Loc, Source};
use crate::ir::Ir;

/// The namespaces no fail-closed webhook may match by default: those whose
/// objects the control plane and the nodes need while the engine is down
/// (the engine's own namespace is added where it is known).
pub const DEFAULT_PROTECTED_NAMESPACES: [&str; 3] =
    ["kube-system", "kube-node-lease", "kube-public"];

/// The resources (`group/resource`, `""` the core group) no fail-closed
/// webhook may match by default: refusing them while the engine is down
/// stops node heartbeats, namespace creation (the engine's own restore
/// included), authentication and authorization of other webhooks, and the
/// repair of admission itself.
pub const DEFAULT_PROTECTED_RESOURCES: [&str; 14] = [
    "/nodes",
    "/namespaces",
    "coordination.k8s.io/leases",
    "authentication.k8s.io/tokenreviews",
    "authorization.k8s.io/subjectaccessreviews",
    "authorization.k8s.io/selfsubjectaccessreviews",
    "authorization.k8s.io/localsubjectaccessreviews",
    "authorization.k8s.io/selfsubjectrulesreviews",
    "admissionregistration.k8s.io/validatingwebhookconfigurations",
    "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    "admissionregistration.k8s.io/validatingadmissionpolicies",
    "admissionregistration.k8s.io/validatingadmissionpolicybindings",
    "apiregistration.k8s.io/apiservices",
    "certificates.k8s.io/certificatesigningrequests",
];

/// A `group/resource` pattern; `*` for any group or resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    /// `group/resource`, `/resource` or `resource` for the core group.
    pub fn parse(text: &str) -> Result<GroupResource, String> {
        let (group, resource) = text.split_once('/').unwrap_or(("", text));
        if resource.is_empty() || resource.contains('/') {
            return Err(format!(
                "{text:?} is not GROUP/RESOURCE (e.g. apps/deployments, /pods for the core group, */* for all)"
            ));
        }
        Ok(GroupResource {
            group: group.into(),
            resource: resource.into(),
        })
    }

    /// Whether this pattern covers everything a webhook rule registers.
    fn covers(&self, rule: &WebhookRule) -> bool {
        let base = rule.resource.split('/').next().unwrap_or("");
        (self.group == "*" || self.group == rule.group)
            && (self.resource == "*" || self.resource == base)
    }

    /// Whether a webhook rule registers (some of) this resource.
    fn touched_by(&self, rule: &WebhookRule) -> bool {
        let base = rule.resource.split('/').next().unwrap_or("");
        (rule.group == "*" || rule.group == self.group) && (base == "*" || base == self.resource)
    }
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.group, self.resource)
    }
}

/// Where mutations may apply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Mutations {
    #[default]
    Anywhere,
    Nowhere,
    /// Only in these namespaces: every mutation must be limited to some of
    /// them (`match.namespaces`).
    In(Vec<String>),
}

/// What the deployment lets a Katalog do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ceiling {
    /// Namespaces no fail-closed validation or mutation may match.
    pub protected_namespaces: Vec<String>,
    /// Resources no fail-closed validation or mutation may match.
    pub protected_resources: Vec<GroupResource>,
    /// What validations and mutations may register for; `None`: anything.
    pub register: Option<Vec<GroupResource>>,
    /// The CRDs (`plural.group`) whose conversion the engine may take
    /// over; `None`: any.
    pub convert: Option<Vec<String>>,
    pub mutations: Mutations,
}

impl Default for Ceiling {
    /// The default protections, nothing else restricted.
    fn default() -> Self {
        Ceiling {
            protected_namespaces: DEFAULT_PROTECTED_NAMESPACES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            protected_resources: DEFAULT_PROTECTED_RESOURCES
                .iter()
                .filter_map(|s| GroupResource::parse(s).ok())
                .collect(),
            register: None,
            convert: None,
            mutations: Mutations::Anywhere,
        }
    }
}

fn located(message: String, help: &str, loc: &Loc, sources: &[Source]) -> Diagnostic {
    let source = sources.iter().find(|s| s.name == loc.file);
    Diagnostic::new(ErrorKind::Ceiling, message)
        .at(loc.clone(), source)
        .with_help(help)
}

/// Every way the Katalog goes over the ceiling, located at the rule or
/// resource (errors; the caller may report them as warnings).
/// `engine_namespace`, when known, is protected too.
pub fn check(
    ir: &Ir,
    sources: &[Source],
    ceiling: &Ceiling,
    engine_namespace: Option<&str>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let adm = &ir.admission;
    let mut excluded: Vec<&str> = adm.excluded_namespaces.iter().map(String::as_str).collect();
    if adm.exclude_engine_namespace {
        excluded.extend(engine_namespace);
    }
    let mut protected: Vec<&str> = ceiling
        .protected_namespaces
        .iter()
        .map(String::as_str)
        .collect();
    protected.extend(engine_namespace);
    protected.sort();
    protected.dedup();
    let declared = |r: &WebhookRule| {
        ir.resources
            .iter()
            .any(|d| d.group == r.group && r.resource.split('/').next() == Some(&d.plural))
    };
    let fail_closed = adm.failure_policy == FailurePolicy::Fail;
    let rules = adm
        .validations
        .iter()
        .map(|v| {
            let implied = webhooks::implied_subresources(v);
            let registered = webhooks::registered(ir, &v.matcher, &implied);
            ("validation", &v.name, &v.loc, &v.matcher, registered)
        })
        .chain(adm.mutations.iter().map(|m| {
            let registered = webhooks::registered(ir, &m.matcher, &[]);
            ("mutation", &m.name, &m.loc, &m.matcher, registered)
        }));
    for (what, name, loc, matcher, registered) in rules {
        let list = |rs: Vec<String>| {
            let mut rs = rs;
            rs.dedup();
            rs.join(", ")
        };
        if let Some(allowed) = &ceiling.register {
            let beyond: Vec<String> = registered
                .iter()
                .filter(|r| !allowed.iter().any(|a| a.covers(r)))
                .map(|r| format!("{}/{}", r.group, r.resource))
                .collect();
            if !beyond.is_empty() {
                out.push(located(
                    format!(
                        "{what} `{name}` registers for {}, which the ceiling does not allow (--allow-register)",
                        list(beyond)
                    ),
                    "narrow the rule's resources (a Pod rule also registers the pod controllers), or ask the cluster admin to allow them",
                    loc,
                    sources,
                ));
            }
        }
        if fail_closed {
            let hit: Vec<String> = ceiling
                .protected_resources
                .iter()
                .filter(|p| registered.iter().any(|r| p.touched_by(r)))
                .map(ToString::to_string)
                .collect();
            let wildcard = registered.iter().any(|r| r.resource.starts_with('*'));
            if !hit.is_empty() {
                let on = if wildcard {
                    "every resource (`*`), the protected ones among them".to_string()
                } else {
                    list(hit)
                };
                out.push(located(
                    format!(
                        "{what} `{name}` is fail-closed (failurePolicy Fail) on {on}, which the ceiling protects (--protected-resources): with the engine down, the apiserver would refuse every such request"
                    ),
                    "name other resources, or set `admission.failurePolicy: Ignore`",
                    loc,
                    sources,
                ));
            }
            let beyond_katalog = registered.iter().any(|r| !declared(r));
            let open: Vec<&str> = protected
                .iter()
                .copied()
                .filter(|ns| !excluded.contains(ns))
                .filter(|ns| {
                    matcher.namespaces_include.is_empty()
                        || matcher
                            .namespaces_include
                            .iter()
                            .any(|p| crate::admission::namespace_matches(p, ns))
                })
                .collect();
            if beyond_katalog && !open.is_empty() {
                out.push(located(
                    format!(
                        "{what} `{name}` is fail-closed (failurePolicy Fail) in {}, which the ceiling protects (--protected-namespaces): with the engine down, the apiserver would refuse writes there",
                        open.join(", ")
                    ),
                    "add them to `admission.excludeNamespaces`, or set `admission.failurePolicy: Ignore`",
                    loc,
                    sources,
                ));
            }
        }
        if what == "mutation" {
            let outside = match &ceiling.mutations {
                Mutations::Anywhere => None,
                Mutations::Nowhere => {
                    Some("the ceiling allows no mutation (--allow-mutations none)".to_string())
                }
                Mutations::In(allowed) => {
                    let inc = &matcher.namespaces_include;
                    (inc.is_empty() || inc.iter().any(|n| !allowed.contains(n))).then(|| {
                        format!(
                            "the ceiling allows mutations only in {} (--allow-mutations): limit it to them with `match.namespaces`",
                            allowed.join(", ")
                        )
                    })
                }
            };
            if let Some(why) = outside {
                out.push(located(
                    format!("mutation `{name}`: {why}"),
                    "remove the mutation, or ask the cluster admin to allow it",
                    loc,
                    sources,
                ));
            }
        }
    }
    if let Some(allowed) = &ceiling.convert {
        for r in ir.resources.iter().filter(|r| r.versions.len() > 1) {
            let crd = format!("{}.{}", r.plural, r.group);
            if allowed.contains(&crd) {
                continue;
            }
            let message = format!(
                "resource {}/{} converts CustomResourceDefinition {crd}, which the ceiling does not allow (--allow-convert)",
                r.group, r.kind
            );
            let help = "declare one version only, or ask the cluster admin to allow the CRD";
            out.push(match &r.loc {
                Some(loc) => located(message, help, loc, sources),
                None => Diagnostic::new(ErrorKind::Ceiling, message).with_help(help),
            });
        }
    }
    out.sort_by(|a, b| {
        let key = |d: &Diagnostic| d.loc.as_ref().map(|l| (l.file.clone(), l.line, l.column));
        key(a).cmp(&key(b))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KATALOG: &str = "apiVersion: katalog.dev/v1alpha1\nkind: Katalog\nmetadata: {name: k}\nspec:\n  admission:\n    failurePolicy: POLICY\n    mutations:\n      - name: team\n        resources: [v1/configmaps]\n        match: {namespaces: {include: [NS]}}\n        default: {path: metadata.labels.team, value: none}\n    validations:\n      - name: nodes\n        resources: [v1/nodes]\n        path: metadata.labels.team\n        check: {exists: true}\n";

    fn findings(policy: &str, ns: &str, ceiling: &Ceiling) -> Vec<String> {
        let text = KATALOG.replace("POLICY", policy).replace("NS", ns);
        let sources = [Source::new("k.yaml", text)];
        let ir = crate::compile_sources(&sources).unwrap();
        check(&ir, &sources, ceiling, Some("katalog-system"))
            .iter()
            .map(|d| format!("{}: {}", d.loc.as_ref().unwrap(), d.message))
            .collect()
    }

    #[test]
    fn fail_open_rules_are_never_limited_by_the_protected_lists() {
        assert_eq!(
            findings("Ignore", "apps", &Ceiling::default()),
            Vec::<String>::new()
        );
        let fail = findings("Fail", "apps", &Ceiling::default());
        assert_eq!(fail.len(), 1, "{fail:?}");
        assert!(
            fail[0].starts_with("k.yaml:13:9: validation `nodes` is fail-closed"),
            "{fail:?}"
        );
    }

    /// A `match.namespaces` glob matches a protected namespace as it
    /// matches at evaluation (`team-*` is open in `team-a`).
    #[test]
    fn namespace_globs_are_matched_against_the_protected_namespaces() {
        let ceiling = Ceiling {
            protected_namespaces: vec!["team-a".into()],
            ..Ceiling::default()
        };
        let open = |ns: &str| {
            findings("Fail", ns, &ceiling)
                .into_iter()
                .filter(|f| {
                    f.contains("mutation `team` is fail-closed (failurePolicy Fail) in team-a")
                })
                .count()
        };
        assert_eq!(open("team-*"), 1);
        assert_eq!(open("'*-a'"), 1);
        assert_eq!(open("team-a"), 1);
        assert_eq!(open("apps"), 0);
        assert_eq!(open("team-b*"), 0);
    }

    #[test]
    fn mutations_stay_where_the_ceiling_allows_them() {
        let ceiling = Ceiling {
            mutations: Mutations::In(vec!["apps".into()]),
            ..Ceiling::default()
        };
        assert_eq!(findings("Ignore", "apps", &ceiling), Vec::<String>::new());
        let out = findings("Ignore", "other", &ceiling);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(
            out[0].starts_with(
                "k.yaml:8:9: mutation `team`: the ceiling allows mutations only in apps"
            ),
            "{out:?}"
        );
        let none = Ceiling {
            mutations: Mutations::Nowhere,
            ..Ceiling::default()
        };
        assert_eq!(findings("Ignore", "apps", &none).len(), 1);
    }

    #[test]
    fn group_resources_parse_as_the_flags_write_them() {
        let p = |s: &str| GroupResource::parse(s).map(|g| g.to_string());
        assert_eq!(p("/nodes"), Ok("/nodes".into()));
        assert_eq!(p("pods"), Ok("/pods".into()));
        assert_eq!(p("apps/deployments"), Ok("apps/deployments".into()));
        assert_eq!(p("*/*"), Ok("*/*".into()));
        assert!(p("a/b/c").is_err());
        assert!(p("apps/").is_err());
    }
}
