//! What metrics, stats and logs may name: only what the loaded Katalog
//! declares. A review's group, kind, versions and resource are chosen by
//! whoever sends it, and anyone who reaches the HTTPS port may send one;
//! a label value taken from the request would let them add series and
//! stats entries without end. Anything the Katalog does not declare is
//! counted under [`OTHER`].

use std::collections::{BTreeMap, BTreeSet};

use katalog_lang::Ir;
use katalog_lang::admission::ResourcePattern;
use katalog_lang::admission::known;

/// The one label value of everything the Katalog does not declare.
pub const OTHER: &str = "other";

/// The label values a loaded Katalog allows, computed once per load.
#[derive(Debug, Default)]
pub struct Declared {
    /// Per kind, the group of each declared resource of that kind with its
    /// served versions (keyed by a `&str` look-up: nothing is allocated
    /// per review).
    conversions: BTreeMap<String, Vec<(String, BTreeSet<String>)>>,
    /// Per resource, the `(group, version)`s the Katalog names: its
    /// declared resources at their versions, and the patterns of its rules
    /// that name all three.
    named: BTreeMap<String, BTreeSet<(String, String)>>,
    /// Every resource pattern of a validation or mutation.
    patterns: Vec<ResourcePattern>,
    /// What deletion protection registers for besides the declared
    /// resources, as `registration` does: the CRDs (`crds: true`, when
    /// protection is on) and the engine's own objects (`enabled: true`), by
    /// (group, resource).
    protected: Vec<(String, String)>,
}

/// The labels of one conversion review.
#[derive(Debug, PartialEq, Eq)]
pub struct ConversionNames<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    /// Whether the resource is one the Katalog declares (a plural may be
    /// spelled `other`, so this is not read from the values).
    pub declared: bool,
}

/// The labels of one admission review.
#[derive(Debug, PartialEq, Eq)]
pub struct AdmissionNames<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub declared: bool,
}

impl Declared {
    pub fn of(ir: &Ir) -> Declared {
        let mut declared = Declared::default();
        for r in &ir.resources {
            declared
                .conversions
                .entry(r.kind.clone())
                .or_default()
                .push((r.group.clone(), r.served().map(str::to_string).collect()));
            for v in r.served() {
                declared
                    .named
                    .entry(r.plural.clone())
                    .or_default()
                    .insert((r.group.clone(), v.to_string()));
            }
        }
        let matchers = ir
            .admission
            .validations
            .iter()
            .map(|v| &v.matcher)
            .chain(ir.admission.mutations.iter().map(|m| &m.matcher));
        for m in matchers {
            for p in m.registered_resources() {
                if let (Some(g), Some(v), Some(r)) = (&p.group, &p.version, &p.resource) {
                    declared
                        .named
                        .entry(r.clone())
                        .or_default()
                        .insert((g.clone(), v.clone()));
                }
                declared.patterns.push(p);
            }
        }
        let security = &ir.admission.security;
        let deletion = &security.deletion;
        let active = deletion.enabled || security.protected.iter().any(|r| r.deletion);
        if active && deletion.crds {
            declared.protected.push((
                "apiextensions.k8s.io".to_string(),
                "customresourcedefinitions".to_string(),
            ));
        }
        if deletion.enabled {
            declared.protected.extend(
                deletion
                    .engine
                    .iter()
                    .map(|(g, r, _, _)| (g.clone(), r.clone())),
            );
        }
        declared
    }

    /// A conversion's labels: the group and kind of a declared resource
    /// (else [`OTHER`] for both), and versions it serves (else
    /// [`OTHER`]); `from` may also be `mixed`.
    pub fn conversion<'a>(
        &'a self,
        group: &str,
        kind: &str,
        from: &'a str,
        to: &str,
    ) -> ConversionNames<'a> {
        let found = self
            .conversions
            .get_key_value(kind)
            .and_then(|(k, groups)| {
                groups
                    .iter()
                    .find(|(g, _)| g == group)
                    .map(|(g, versions)| (g, k, versions))
            });
        let Some((g, k, versions)) = found else {
            return ConversionNames {
                group: OTHER,
                kind: OTHER,
                from: OTHER,
                to: OTHER,
                declared: false,
            };
        };
        let version = |v: &str| versions.get(v).map_or(OTHER, String::as_str);
        ConversionNames {
            group: g,
            kind: k,
            from: if from == "mixed" { from } else { version(from) },
            to: version(to),
            declared: true,
        }
    }

    /// An admission review's labels: the request's resource when the
    /// Katalog's rules (or its protections) are registered for it and it is
    /// named, by the Katalog or as a built-in Kubernetes resource; else
    /// [`OTHER`] for all three.
    pub fn admission<'a>(
        &'a self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> AdmissionNames<'a> {
        if let Some((r, named)) = self.named.get_key_value(resource)
            && let Some((g, v)) = named.iter().find(|(g, v)| g == group && v == version)
        {
            return AdmissionNames {
                group: g,
                version: v,
                resource: r,
                declared: true,
            };
        }
        let registered = self
            .patterns
            .iter()
            .any(|p| p.matches(group, version, resource))
            || self
                .protected
                .iter()
                .any(|(g, r)| g == group && r == resource);
        let builtin = registered
            .then(|| {
                known::builtin().iter().find(|k| {
                    k.group == group
                        && k.plural == resource
                        && k.versions.iter().any(|v| v == version)
                })
            })
            .flatten();
        match builtin {
            Some(k) => AdmissionNames {
                group: &k.group,
                version: k
                    .versions
                    .iter()
                    .find(|v| *v == version)
                    .map_or(OTHER, String::as_str),
                resource: &k.plural,
                declared: true,
            },
            None => AdmissionNames {
                group: OTHER,
                version: OTHER,
                resource: OTHER,
                declared: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use katalog_lang::{Source, compile_sources};

    const KATALOG: &str = r#"
apiVersion: katalog.dev/v1alpha1
kind: Katalog
metadata: {name: t}
spec:
  resources:
    - group: stable.example.com
      kind: CronTab
      plural: crontabs
      hub: v1
      versions: [v1beta1, v1]
  admission:
    validations:
      - name: any-deployment
        resources: ["apps/*/deployments"]
        path: spec.replicas
        check: {maximum: 10}
      - name: widgets
        resources: [example.com/v1/widgets]
        path: spec.size
        check: {maximum: 10}
  security:
    deletionProtection:
      enabled: true
      crds: true
      engine: {namespace: katalog-system, deployment: katalog, service: katalog, secret: katalog-tls}
"#;

    fn declared() -> Declared {
        let ir = compile_sources(&[Source::new("t.yaml", KATALOG)])
            .unwrap_or_else(|d| panic!("{}", d.render()));
        Declared::of(&ir)
    }

    #[test]
    fn conversion_labels_come_from_the_declared_resources() {
        let d = declared();
        let n = d.conversion("stable.example.com", "CronTab", "v1beta1", "v1");
        assert_eq!(
            n,
            ConversionNames {
                group: "stable.example.com",
                kind: "CronTab",
                from: "v1beta1",
                to: "v1",
                declared: true,
            }
        );
        let n = d.conversion("stable.example.com", "CronTab", "mixed", "v9");
        assert_eq!((n.from, n.to), ("mixed", OTHER));
        let n = d.conversion("evil.example.com", "Bomb", "v1", "v1");
        assert_eq!(
            (n.group, n.kind, n.from, n.to),
            (OTHER, OTHER, OTHER, OTHER)
        );
        assert!(!n.declared);
    }

    #[test]
    fn admission_labels_come_from_what_the_rules_are_registered_for() {
        let d = declared();
        let named = |g, v, r| {
            let n = d.admission(g, v, r);
            (n.group, n.version, n.resource)
        };
        // Declared, at a served version; named by a rule; built in and
        // matched by a rule's pattern; a protection's built-in.
        assert_eq!(
            named("stable.example.com", "v1beta1", "crontabs"),
            ("stable.example.com", "v1beta1", "crontabs")
        );
        assert_eq!(
            named("example.com", "v1", "widgets"),
            ("example.com", "v1", "widgets")
        );
        assert_eq!(
            named("apps", "v1", "deployments"),
            ("apps", "v1", "deployments")
        );
        assert_eq!(named("", "v1", "secrets"), ("", "v1", "secrets"));
        // Without deletion protection the engine's Secret and the CRDs are
        // registered for nothing: not labelled.
        let bare = compile_sources(&[Source::new(
            "t.yaml",
            KATALOG.split("  security:").next().unwrap(),
        )])
        .unwrap_or_else(|d| panic!("{}", d.render()));
        let bare = Declared::of(&bare);
        for (g, v, r) in [
            ("", "v1", "secrets"),
            ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        ] {
            let n = bare.admission(g, v, r);
            assert_eq!((n.group, n.version, n.resource), (OTHER, OTHER, OTHER));
        }
        // Anything else, whatever the pattern's wildcards let through.
        for (g, v, r) in [
            ("stable.example.com", "v7", "crontabs"),
            ("apps", "v1-evil", "deployments"),
            ("", "v1", "pods"),
            ("x", "y", "z"),
        ] {
            assert_eq!(named(g, v, r), (OTHER, OTHER, OTHER), "{g}/{v}/{r}");
        }
    }
}
