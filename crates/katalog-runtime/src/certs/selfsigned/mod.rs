//! Self-signed serving certificates kept in a Secret
//! (`katalog serve --self-signed-secret NAMESPACE/NAME`).
//!
//! The Secret is the source of truth, shared by every replica:
//!
//! | key      | what                                                          |
//! |----------|---------------------------------------------------------------|
//! | `ca.crt` | every CA a serving certificate may be signed by, newest first: the `caBundle` |
//! | `ca.key` | the key of the newest CA, which signs new serving certificates |
//! | `tls.crt`, `tls.key` | the serving certificate and its key                |
//!
//! [`plan`] is pure: given what the Secret holds and the time, it keeps it,
//! or says what to write and why. A missing or unusable Secret gets a new CA
//! and certificate; a CA within `ca-rotate-before` of its expiry gets a
//! successor that is added to the bundle (the old CA stays in it until it
//! expires, so certificates it signed keep being trusted); a serving
//! certificate within `cert-rotate-before` of its expiry, or not valid for the
//! names the engine is reached at, is re-issued. A new CA signs no serving
//! certificate before it has been in the bundle for `ca-propagation`, so the
//! apiserver is given the new `caBundle` before it meets a certificate that
//! needs it.
//!
//! [`SelfSigned::ensure`] applies the plan once (at start, before the server
//! listens); [`SelfSigned::spawn`] keeps applying it: on a watch of the
//! Secret (a deleted or damaged Secret is restored with the certificate being
//! served, not a new one) and every `check_interval` (rotation). Writes carry
//! the resourceVersion they read, so replicas racing to rotate agree on the
//! winner's certificate. What changed is handed to a callback: the server
//! reloads the certificate, the housekeeper registers the new `caBundle`.

mod files;
mod keeper;
mod material;
mod policy;
mod secret;

pub use files::*;
pub use keeper::*;
pub use material::*;
pub use policy::*;
pub use secret::*;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    use super::*;
    use crate::certs::tls::serving_names;

    fn policy() -> Policy {
        Policy {
            cert_validity: Duration::from_secs(100),
            cert_rotate_before: Duration::from_secs(30),
            ca_validity: Duration::from_secs(1000),
            ca_rotate_before: Duration::from_secs(200),
            propagation: Duration::from_secs(10),
        }
    }

    fn names() -> Vec<String> {
        serving_names(&["katalog.katalog-system.svc".into()])
    }

    fn written(p: Plan) -> (Material, Vec<String>) {
        match p {
            Plan::Write { material, reasons } => (material, reasons),
            Plan::Keep => panic!("expected a write, got Keep"),
        }
    }

    fn plan_at(m: std::result::Result<&Material, &str>, t: SystemTime) -> Plan {
        plan(m, "test/certs", &names(), &policy(), t).expect("a plan")
    }

    /// Which CAs of the bundle the serving certificate verifies against at `t`.
    fn signers(m: &Material, t: SystemTime) -> Vec<String> {
        parse_ca_bundle(&m.ca_bundle)
            .expect("a bundle")
            .into_iter()
            .filter(|ca| serving_expiry(m, std::slice::from_ref(ca), &names(), unix(t)).is_ok())
            .map(|ca| ca.pem)
            .collect()
    }

    #[test]
    fn a_missing_secret_gets_a_ca_and_a_certificate_that_are_then_kept() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, reasons) = written(plan_at(Err("the Secret does not exist"), t0));
        assert_eq!(
            reasons,
            ["a new CA and serving certificate: the Secret does not exist"]
        );
        assert_eq!(m.ca_count(), 1);
        assert_eq!(signers(&m, t0).len(), 1);
        // Loads as the server loads it: one file with the pair.
        let pem = m.serving_pem();
        crate::certs::tls::certified_key_from_pem(pem.as_bytes(), pem.as_bytes(), "a", "a")
            .expect("the pair loads from one file");
        assert_eq!(plan_at(Ok(&m), t0), Plan::Keep);
        assert_eq!(plan_at(Ok(&m), t0 + Duration::from_secs(69)), Plan::Keep);
    }

    #[test]
    fn the_serving_certificate_is_reissued_within_rotate_before_by_the_same_ca() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let t1 = t0 + Duration::from_secs(71);
        let (r, reasons) = written(plan_at(Ok(&m), t1));
        assert_eq!(r.ca_bundle, m.ca_bundle);
        assert_eq!(r.ca_key, m.ca_key);
        assert_ne!(r.cert, m.cert);
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].starts_with("re-issued the serving certificate: it expires at ")
                && reasons[0].ends_with("within cert-rotate-before (30s)"),
            "{reasons:?}"
        );
        assert_eq!(signers(&r, t1), signers(&m, t0));
        assert_eq!(plan_at(Ok(&r), t1), Plan::Keep);
    }

    #[test]
    fn damage_is_repaired_with_the_least_change() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let (other, _) = written(plan_at(Err("none"), t0));

        // A key that is not the certificate's: a new certificate, same CA.
        let wrong_key = Material {
            key: other.key.clone(),
            ..m.clone()
        };
        let (r, reasons) = written(plan_at(Ok(&wrong_key), t0));
        assert_eq!((&r.ca_bundle, &r.ca_key), (&m.ca_bundle, &m.ca_key));
        assert!(
            reasons[0].starts_with(
                "re-issued the serving certificate: failed to use the certificate and key"
            ),
            "{reasons:?}"
        );

        // A certificate from another CA: re-issued by this one.
        let foreign = Material {
            cert: other.cert.clone(),
            key: other.key.clone(),
            ..m.clone()
        };
        let (r, reasons) = written(plan_at(Ok(&foreign), t0));
        assert_eq!(r.ca_bundle, m.ca_bundle);
        assert!(
            reasons[0].contains("it is not valid for localhost"),
            "{reasons:?}"
        );

        // Names the certificate does not cover: re-issued.
        let (r, reasons) = written(
            plan(
                Ok(&m),
                "test/certs",
                &serving_names(&["katalog.other.svc".into()]),
                &policy(),
                t0,
            )
            .unwrap(),
        );
        assert_eq!(r.ca_bundle, m.ca_bundle);
        assert!(reasons[0].contains("katalog.other.svc"), "{reasons:?}");

        // No usable CA: everything is new.
        for (broken, why) in [
            (
                Material {
                    ca_key: other.ca_key.clone(),
                    ..m.clone()
                },
                "a new CA and serving certificate: ca.key belongs to no CA of ca.crt",
            ),
            (
                Material {
                    ca_bundle: "junk".into(),
                    ..m.clone()
                },
                "a new CA and serving certificate: ca.crt holds no certificate",
            ),
            (
                Material {
                    ca_key: "junk".into(),
                    ..m.clone()
                },
                "a new CA and serving certificate: ca.key is not a private key",
            ),
        ] {
            let (r, reasons) = written(plan_at(Ok(&broken), t0));
            assert_eq!(reasons, [why]);
            assert_ne!(r.ca_bundle, m.ca_bundle);
            assert_eq!(plan_at(Ok(&r), t0), Plan::Keep);
        }

        // Past the CA's expiry: a new CA.
        let late = t0 + Duration::from_secs(1001);
        let (_, reasons) = written(plan_at(Ok(&m), late));
        assert!(reasons[0].contains("the CA expired at"), "{reasons:?}");
    }

    /// The keeper's life over 1.3 CA lifetimes, checked every second, for
    /// certificate lifetimes that put a renewal due at every distance from
    /// the CA rotation: the served certificate is always trusted by the
    /// bundle, every check after a write keeps, the bundle holds one or two
    /// CAs, and a CA signs only once it has been in the bundle for
    /// `propagation`.
    #[test]
    fn rotation_over_time_never_serves_an_untrusted_certificate() {
        crate::certs::tls::install_crypto_provider();
        for validity in [90, 91, 96, 100] {
            let p = Policy {
                cert_validity: Duration::from_secs(validity),
                ..policy()
            };
            let plan_at = |m: std::result::Result<&Material, &str>, t| {
                plan(m, "test/certs", &names(), &p, t).expect("a plan")
            };
            let t0 = SystemTime::now();
            let (mut m, _) = written(plan_at(Err("none"), t0));
            let mut first_seen: BTreeMap<String, u64> = BTreeMap::new();
            first_seen.insert(m.ca_bundle.clone(), 0);
            let (mut cert_rotations, mut ca_rotations, mut drops) = (0, 0, 0);
            for s in 1..=1300u64 {
                let t = t0 + Duration::from_secs(s);
                let at = format!("validity {validity}s, at +{s}s");
                if let Plan::Write { material, reasons } = plan_at(Ok(&m), t) {
                    for r in &reasons {
                        if r.starts_with("re-issued") {
                            cert_rotations += 1;
                        } else if r.starts_with("a new CA:") {
                            ca_rotations += 1;
                        } else if r.starts_with("dropped") {
                            drops += 1;
                        } else {
                            panic!("{at}: unexpected {r}");
                        }
                    }
                    m = material;
                    assert_eq!(plan_at(Ok(&m), t), Plan::Keep, "{at}");
                }
                let cas = parse_ca_bundle(&m.ca_bundle).unwrap();
                assert!((1..=2).contains(&cas.len()), "{at}: {} CAs", cas.len());
                for ca in &cas {
                    first_seen.entry(ca.pem.clone()).or_insert(s);
                }
                let signer = signers(&m, t);
                assert_eq!(signer.len(), 1, "{at}: the served certificate is untrusted");
                let since = s - first_seen[&signer[0]];
                assert!(
                    first_seen[&signer[0]] == 0 || since >= p.propagation.as_secs(),
                    "{at}: a CA {since}s in the bundle signs"
                );
            }
            assert!(
                cert_rotations >= 18,
                "{cert_rotations} certificate rotations"
            );
            assert_eq!(ca_rotations, 1);
            assert_eq!(drops, 1, "the old CA leaves the bundle when it expires");
        }
    }

    /// Replicas down across the CA's rotation window: the step that adds
    /// the successor must re-issue with the old CA (clamped to its expiry),
    /// and the next checks, though the certificate is due, keep it until the
    /// successor is `propagation` old.
    #[test]
    fn a_young_ca_does_not_sign_while_the_served_certificate_is_valid() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let old_ca = m.ca_bundle.clone();
        let t1 = t0 + Duration::from_secs(990);
        let (m1, reasons) = written(plan_at(Ok(&m), t1));
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].starts_with("a new CA: "), "{reasons:?}");
        assert_eq!(m1.ca_count(), 2);
        assert_eq!(signers(&m1, t1), std::slice::from_ref(&old_ca));
        for after in [1, 5, 9] {
            let t = t1 + Duration::from_secs(after);
            assert_eq!(plan_at(Ok(&m1), t), Plan::Keep, "+{after}s");
        }
        let t2 = t1 + Duration::from_secs(11);
        let (m2, reasons) = written(plan_at(Ok(&m1), t2));
        assert!(
            reasons.iter().any(|r| r.starts_with("re-issued")),
            "{reasons:?}"
        );
        assert_eq!(m2.ca_count(), 1, "the old CA expired at +1000s");
        assert_ne!(signers(&m2, t2), [old_ca]);
    }

    #[test]
    fn a_reissued_certificate_keeps_the_names_it_covered() {
        crate::certs::tls::install_crypto_provider();
        let t0 = SystemTime::now();
        let (m, _) = written(plan_at(Err("none"), t0));
        let renamed = serving_names(&["katalog.other-ns.svc".into()]);
        let (r, reasons) = written(plan(Ok(&m), "test/certs", &renamed, &policy(), t0).unwrap());
        assert!(reasons[0].contains("katalog.other-ns.svc"), "{reasons:?}");
        assert_eq!(
            plan(Ok(&r), "test/certs", &renamed, &policy(), t0).unwrap(),
            Plan::Keep
        );
        assert_eq!(
            plan_at(Ok(&r), t0),
            Plan::Keep,
            "the old names still verify"
        );
        let mut names = subject_alt_names(&r.cert);
        names.sort();
        assert_eq!(
            names,
            [
                "127.0.0.1",
                "::1",
                "katalog.katalog-system.svc",
                "katalog.other-ns.svc",
                "localhost"
            ]
        );
    }

    #[test]
    fn debug_output_redacts_the_keys() {
        crate::certs::tls::install_crypto_provider();
        let (m, _) = written(plan_at(Err("none"), SystemTime::now()));
        let shown = format!("{m:?}");
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
        assert!(shown.contains("BEGIN CERTIFICATE"), "{shown}");
        assert!(shown.contains(r#"ca_key: "<redacted>""#), "{shown}");
    }

    #[test]
    fn serving_files_are_private_fresh_and_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        crate::certs::tls::install_crypto_provider();
        let (m, _) = written(plan_at(Err("none"), SystemTime::now()));
        let a = ServingFiles::create_private("katalog-unit").expect("a directory");
        let b = ServingFiles::create_private("katalog-unit").expect("another directory");
        assert_ne!(a.dir(), b.dir());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(a.dir()), 0o700);
        a.write(&m).expect("writing");
        assert_eq!(mode(&a.pair()), 0o600);
        assert_eq!(std::fs::read_to_string(a.pair()).unwrap(), m.serving_pem());
        assert_eq!(std::fs::read_to_string(a.ca()).unwrap(), m.ca_bundle);
        // A directory that already exists is not trusted with the key.
        let err = ServingFiles::create(b.dir().to_path_buf()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("failed to write the serving certificate to "),
            "{err}"
        );
        let dir = a.dir().to_path_buf();
        drop(a);
        assert!(!dir.exists(), "{} is left behind", dir.display());
    }

    #[test]
    fn policies_that_cannot_work_are_refused() {
        assert!(Policy::default().check().is_ok());
        assert!(policy().check().is_ok());
        let bad = [
            (
                Policy {
                    cert_rotate_before: Duration::from_secs(95),
                    ..policy()
                },
                "failed to accept the certificate policy: cert-rotate-before (95s) + ca-propagation (10s) must be shorter than cert-validity (100s)",
            ),
            (
                Policy {
                    ca_rotate_before: Duration::from_secs(1000),
                    ..policy()
                },
                "failed to accept the certificate policy: ca-rotate-before (1000s) must be shorter than ca-validity (1000s)",
            ),
            (
                Policy {
                    ca_rotate_before: Duration::from_secs(39),
                    ..policy()
                },
                "failed to accept the certificate policy: ca-rotate-before (39s) must be at least cert-rotate-before (30s) + ca-propagation (10s), so certificates signed by the old CA are replaced in time",
            ),
        ];
        for (p, message) in bad {
            assert_eq!(p.check().unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn an_unusable_secret_says_which_key_is_wrong() {
        let m = Material {
            ca_bundle: "a".into(),
            ca_key: "b".into(),
            cert: "c".into(),
            key: "d".into(),
        };
        let secret = |data| Secret {
            data: Some(data),
            ..Secret::default()
        };
        let mut data = m.data();
        assert_eq!(Material::from_secret(&secret(data.clone())), Ok(m));
        data.insert(TLS_KEY.into(), ByteString(vec![0xff]));
        assert_eq!(
            Material::from_secret(&secret(data.clone())),
            Err(MaterialError::NotText { key: TLS_KEY })
        );
        data.remove(CA_CRT);
        let why = Material::from_secret(&secret(data)).unwrap_err();
        assert_eq!(why, MaterialError::Missing { key: CA_CRT });
        assert_eq!(
            Stored::Unusable(why.clone()).to_string(),
            "the Secret is unusable: it has no ca.crt"
        );
        let foreign = SelfSignedError::Foreign {
            secret: "katalog-system/app-credentials".parse().unwrap(),
            why,
        };
        assert_eq!(
            foreign.to_string(),
            "failed to use Secret katalog-system/app-credentials: it exists, is not labelled app.kubernetes.io/managed-by=katalog, and it has no ca.crt; katalog does not overwrite it (name another Secret, or delete this one)"
        );
    }

    #[test]
    fn durations_and_secret_references_parse() {
        for (text, secs) in [
            ("90d", 90 * DAY),
            ("36h", 36 * 3600),
            ("15m", 900),
            ("45s", 45),
            ("7", 7),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in [
            "",
            "0s",
            "-3d",
            "5w",
            "d",
            "NaNs",
            "1e300d",
            "0.0000000001s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_duration("5w").unwrap_err().to_string(),
            "\"5w\": the unit must be s, m, h or d"
        );
        assert_eq!(
            parse_duration("-3d").unwrap_err().to_string(),
            "\"-3d\": expected a positive duration such as 90d, 12h or 30s"
        );
        for (d, text) in [(90 * DAY, "90d"), (7200, "2h"), (120, "2m"), (61, "61s")] {
            assert_eq!(format_duration(Duration::from_secs(d)), text);
        }
        assert_eq!(
            "katalog-system/katalog-certs".parse::<SecretRef>().unwrap(),
            SecretRef {
                namespace: "katalog-system".into(),
                name: "katalog-certs".into()
            }
        );
        for bad in ["katalog-certs", "/x", "x/", "a/b/c", "A/b", "a/-b"] {
            assert_eq!(
                bad.parse::<SecretRef>().unwrap_err().to_string(),
                format!("failed to parse --self-signed-secret {bad:?}: expected NAMESPACE/NAME")
            );
        }
    }
}
