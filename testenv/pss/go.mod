// Pins the Pod Security Admission release whose fixtures
// (test/testdata/{baseline,restricted}/v1.*/{pass,fail}) the conformance test
// crates/katalog-lang/tests/pss_conformance.rs runs against
// katalogs/pod-security-{baseline,restricted}.yaml. The module is only
// downloaded (go mod download), never built. v0.37.2 = Kubernetes v1.37.2.
// See docs/pod-security.md.
module github.com/katalog-dev/katalog/testenv/pss

go 1.26.0

require k8s.io/pod-security-admission v0.37.2
