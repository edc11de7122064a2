//! The CEL evaluator over borrowed JSON (`cel::native`) against cel's
//! interpreter, the reference: every answer the first gives must be the
//! interpreter's.
//!
//! * every admission case of every suite under `katalogs/` and `testdata/`
//!   gives the same verdict (denials, warnings, audits and their messages,
//!   patches) with the evaluator as with the interpreter alone, and the
//!   evaluator answered most of the evaluations; also with the request's
//!   objects read as parsed nodes (`json::node`), as a review whose objects
//!   only CEL reads is;
//! * a table of expressions, each with the values bound, where the evaluator
//!   must answer (and agree), or must give up (and the interpreter's answer,
//!   error or quirk, is the one returned);
//! * a property test: generated Pods and the expression idioms of the Pod
//!   Security Katalogs.
//!
//! The PSS fixtures (hundreds of official Pods) run through the same
//! comparison in `pss_conformance.rs`.

mod common;

use common::{katalog_ir, repo, suites};
use katalog_lang::Source;
use katalog_lang::admission::AdmissionInput;
use katalog_lang::admission::eval::{Endpoint, evaluate};
use katalog_lang::cel::{CelProgram, interpreter_only, native_tally};
use katalog_lang::json::node::{Node, Obj};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The result of `expr` with `vars`, as JSON text (keys in the order they
/// come) or as the error's text.
fn outcome(program: &CelProgram, vars: &[(&str, &Value)]) -> Result<String, String> {
    program
        .eval(vars)
        .map(|v| v.to_string())
        .map_err(|e| e.to_string())
}

/// Evaluates both ways; returns the answer and whether the evaluator gave it.
fn both(expr: &str, vars: &[(&str, &Value)]) -> (Result<String, String>, bool) {
    let program = CelProgram::compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let before = native_tally();
    let got = outcome(&program, vars);
    let answered = native_tally().native > before.native;
    let want = interpreter_only(|| outcome(&program, vars));
    assert_eq!(
        got, want,
        "`{expr}`: the evaluator and the interpreter disagree"
    );
    (got, answered)
}

/// `input` with its objects read as parsed nodes, none converted.
fn as_nodes(input: &AdmissionInput) -> AdmissionInput {
    let node = |o: &Option<Obj>| o.as_deref().map(|v| Obj::from_node(Node::from(v)));
    AdmissionInput {
        object: node(&input.object),
        old_object: node(&input.old_object),
        ..input.clone()
    }
}

#[test]
fn every_suite_case_gets_the_same_verdict_either_way() {
    let mut files = Vec::new();
    for dir in ["katalogs", "testdata"] {
        suites(&repo().join(dir), &mut files);
    }
    let before = native_tally();
    let mut compared = 0usize;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a suite file");
        let source = Source::new(file.display().to_string(), text);
        let docs = katalog_lang::suite::load(&source).unwrap_or_else(|d| panic!("{}", d.render()));
        for suite in docs {
            let ir = katalog_ir(
                &file
                    .parent()
                    .expect("a directory")
                    .join(&suite.spec.katalog),
            );
            for case in &suite.spec.cases {
                let Some(admission) = &case.admission else {
                    continue;
                };
                let Ok(input) = admission.request.to_input(&ir) else {
                    continue;
                };
                let endpoint = Endpoint::from(admission.endpoint);
                let got = serde_json::to_string(&evaluate(&ir, &input, endpoint)).unwrap();
                let want = interpreter_only(|| {
                    serde_json::to_string(&evaluate(&ir, &input, endpoint)).unwrap()
                });
                assert_eq!(
                    got,
                    want,
                    "{} / {}: the verdicts differ",
                    file.display(),
                    case.name
                );
                let nodes =
                    serde_json::to_string(&evaluate(&ir, &as_nodes(&input), endpoint)).unwrap();
                assert_eq!(
                    nodes,
                    want,
                    "{} / {}: the verdicts differ with the objects read as nodes",
                    file.display(),
                    case.name
                );
                compared += 1;
            }
        }
    }
    let tally = native_tally();
    let (native, gave_up, unsupported) = (
        tally.native - before.native,
        tally.gave_up - before.gave_up,
        tally.unsupported - before.unsupported,
    );
    eprintln!(
        "{compared} admission cases compared; CEL evaluations with the evaluator on: \
         {native} answered by it, {gave_up} given back, {unsupported} not runnable by it"
    );
    assert!(
        compared >= 100,
        "expected the suites' admission cases, got {compared}"
    );
    assert!(
        native >= 4 * (gave_up + unsupported),
        "the evaluator answered too few evaluations: {native} answered, {gave_up} given back, \
         {unsupported} not runnable"
    );
}

#[test]
fn the_evaluator_answers_the_kubernetes_idioms() {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"a": "1", "container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}},
        "spec": {
            "hostNetwork": true,
            "containers": [
                {"name": "c", "image": "nginx", "ports": [{"containerPort": 80, "hostPort": 8080}],
                 "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}},
                {"name": "d", "image": "busybox"}
            ],
            "initContainers": [{"name": "i", "image": "x", "securityContext": {"runAsUser": 0}}],
            "volumes": [{"name": "v", "hostPath": {"path": "/"}}],
            "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
            "nodeSelector": {"zone": "a", "n": [1, 2]},
            "overhead": {"zone": "a", "n": [1, 2.0]},
            "tolerations": [{"key": "k"}, {"key": "k"}, {"key": "j"}]
        }
    });
    let vars = [("object", &pod)];
    let answered = [
        (
            "['hostNetwork', 'hostPID', 'hostIPC'].filter(f, f in object.spec && object.spec[f] == true)",
            json!(["hostNetwork"]),
        ),
        (
            "(object.spec.?initContainers.orValue([]) + object.spec.?containers.orValue([])).filter(c, c.?securityContext.?privileged.orValue(false) == true).map(c, c.name)",
            json!(["c"]),
        ),
        (
            "object.spec.containers.map(c, c.?securityContext.?capabilities.?add.orValue([])).flatten().filter(x, !(x in ['CHOWN', 'KILL'])).sort()",
            json!(["NET_ADMIN"]),
        ),
        (
            "object.spec.containers.all(c, !has(c.ports) || c.ports.all(p, p.?hostPort.orValue(0) == 0))",
            json!(false),
        ),
        (
            "object.spec.volumes.exists(v, has(v.hostPath))",
            json!(true),
        ),
        (
            "object.metadata.annotations.exists(k, k.startsWith('container.apparmor') && object.metadata.annotations[k] != 'unconfined')",
            json!(true),
        ),
        (
            "object.spec.containers.map(c, '\"' + c.name + '\"').join(', ')",
            json!("\"c\", \"d\""),
        ),
        (
            "size(object.spec.containers) + object.spec.containers.size()",
            json!(4),
        ),
        (
            "object.spec.securityContext.sysctls.map(s, s.name.split('.')).flatten()",
            json!(["kernel", "shm_rmid_forced"]),
        ),
        ("object.spec.?nodeName.hasValue()", json!(false)),
        ("object.spec.?nodeName.orValue('none')", json!("none")),
        ("object.spec.?containers[?5].hasValue()", json!(false)),
        ("object.spec.containers[1].name", json!("d")),
        (
            "[dyn(1), dyn(1.0), dyn(2u)].map(x, x == 1)",
            json!([true, true, false]),
        ),
        (
            "dyn(1) in [1.0] && dyn(2u) in [2] && !(3 in [1, 2])",
            json!(true),
        ),
        (
            "{'b': dyn(1), 'a': dyn([object.metadata.name])}",
            json!({"a": ["p"], "b": 1}),
        ),
        (
            "object.metadata",
            json!({"annotations": {"a": "1", "container.apparmor.security.beta.kubernetes.io/c": "runtime/default"}, "name": "p"}),
        ),
        ("['b', 'a', 'b'].distinct()", json!(["b", "a"])),
        ("[3, 1, 2].sort()", json!([1, 2, 3])),
        ("object.spec.securityContext.map(k, k)", json!(["sysctls"])),
        (
            "[?object.spec.?nodeName, ?object.spec.?hostNetwork, dyn(1)]",
            json!([true, 1]),
        ),
        // Optional chains as list elements, present and absent at each depth.
        (
            "[?object.spec.containers[?0].?name, ?object.spec.?securityContext.?sysctls[?0].?name, \
              ?object.spec.?missing.?deeper, ?object.spec.containers[?9].?name, \
              ?object.spec.containers[?1].?securityContext.?privileged]",
            json!(["c", "kernel.shm_rmid_forced"]),
        ),
        (
            "'a/b:c'.substring('a/b:c'.lastIndexOf('/') + 1).indexOf(':')",
            json!(1),
        ),
        ("int('42') + int(2u)", json!(44)),
        ("['x', 'y'].indexOf('y') + [1].indexOf(2)", json!(0)),
        ("'héllo'.size()", json!(5)),
        ("'abc'.matches('^a.c$') && matches('x', 'x')", json!(true)),
        ("string(7) + string(object.metadata.name)", json!("7p")),
        ("[1, 2, 3].exists_one(x, x > 2)", json!(true)),
        ("7 / 2 * 2 + 7 % 2 - -1", json!(8)),
        ("1.5 * 2.0 < 3.5 && 'a' < 'b' && 2u >= 1u", json!(true)),
        ("dyn(object.spec.hostNetwork) ? 'y' : 'n'", json!("y")),
        (
            "object.spec.containers.exists(c, c.name == 'd') || 1 / 0 == 1",
            json!(true),
        ),
        (
            "dyn([[1], [2, 3]]) == [dyn([1]), dyn([dyn(2.0), dyn(3u)])] && dyn({'a': 1}) == {'a': 1.0}",
            json!(true),
        ),
        // Optional chains followed in one go.
        (
            "object.spec.containers[?0].?securityContext.?capabilities.?add[?1].orValue('none')",
            json!("CHOWN"),
        ),
        (
            "object.spec.?containers[?1].?securityContext.?privileged.orValue(false)",
            json!(false),
        ),
        ("[1, 2][?5].orValue(0) + [1, 2][?1].orValue(0)", json!(2)),
        (
            "[object.spec.?hostNetwork.hasValue(), object.?spec.?hostPID.hasValue()]",
            json!([true, false]),
        ),
        (
            "{'a': object.spec.?nodeName}.?a.hasValue() && !{'a': 1}.?b.hasValue()",
            json!(true),
        ),
        ("object.spec[?'volumes'][?0].?name.orValue('')", json!("v")),
        // Maps and lists compared: the same JSON, equal JSON, other JSON.
        (
            "object.spec.containers.map(c, object.spec.containers.indexOf(c))",
            json!([0, 1]),
        ),
        (
            "object.spec.tolerations.map(t, object.spec.tolerations.indexOf(t))",
            json!([0, 0, 2]),
        ),
        (
            "[object.spec.nodeSelector == object.spec.overhead, object.metadata == object.metadata, \
              object.spec.containers == object.spec.containers, object.spec.containers[0] == object.spec.containers[1], \
              object.spec.containers[1] == {'name': 'd', 'image': 'busybox'}, \
              object.spec.containers[1] in object.spec.initContainers, \
              object.spec.nodeSelector == {'zone': dyn('a'), 'n': dyn([dyn(1u), dyn(2)])}, object.spec.nodeSelector == {'zone': 'a'}, object.spec.tolerations[0] == object.spec.tolerations[2]]",
            json!([true, true, true, false, true, false, true, false, false]),
        ),
        // Two-variable comprehensions (expanded over `@katalog_entries`).
        (
            "object.spec.containers.all(i, c, i == 0 || !has(c.securityContext))",
            json!(true),
        ),
        (
            "object.metadata.annotations.exists(k, v, k.startsWith('container.') && v == 'runtime/default')",
            json!(true),
        ),
        (
            "object.spec.containers.transformList(i, c, string(i) + c.name)",
            json!(["0c", "1d"]),
        ),
        (
            "object.spec.nodeSelector.transformList(k, v, k)",
            json!(["n", "zone"]),
        ),
    ];
    for (expr, want) in answered {
        let (got, native) = both(expr, &vars);
        assert_eq!(got, Ok(want.to_string()), "`{expr}`");
        assert!(native, "`{expr}`: expected the evaluator to answer");
    }
    // Errors and quirks: the evaluator gives them back, and the answer is
    // the interpreter's.
    let given_back = [
        "object.spec.nodeName",
        "1 / 0",
        "9223372036854775807 + 1",
        "dyn('abc').x",
        "object.spec.containers[7]",
        "object.spec.?nodeName.value()",
        "undeclared + 1",
        "1 < 1.5",
        "[dyn(1), dyn('a')].sort()",
        "object.spec.containers.map(c, c.nope)",
        "object.spec.?containers.?x.orValue(1)",
        "object.spec.?containers[?'a'].hasValue()",
        "{'a': dyn(object.spec.?nodeName)}.?a.?b.orValue(1)",
        "object.spec.?hostNetwork.?x.orValue(1)",
    ];
    for expr in given_back {
        let (_, native) = both(expr, &vars);
        assert!(!native, "`{expr}`: expected the evaluator to give up");
    }
    // Not runnable by the evaluator at all: the interpreter answers.
    for expr in [
        "optional.of(1).hasValue()",
        "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
        "[1, 2].reverse()",
    ] {
        let program = CelProgram::compile(expr).unwrap();
        assert!(!program.is_native(), "`{expr}`");
        let (_, native) = both(expr, &vars);
        assert!(!native, "`{expr}`");
    }
}

/// The one deliberate difference: a macro over a map visits its keys in the
/// object's order, every time (the interpreter's order is its hash map's).
#[test]
fn a_macro_over_a_map_keeps_the_objects_key_order() {
    let object =
        json!({"metadata": {"annotations": {"b/x": "1", "a/y": "2", "c/z": "3", "a/w": "4"}}});
    let program = CelProgram::compile(
        "object.metadata.annotations.filter(k, k != 'c/z').map(k, k.split('/')[0]).join(',')",
    )
    .unwrap();
    for _ in 0..20 {
        let before = native_tally();
        let got = program.eval(&[("object", &object)]).unwrap();
        let after = native_tally();
        assert_eq!(got, json!("b,a,a"));
        assert_eq!(after.native, before.native + 1, "answered by the evaluator");
        assert_eq!(
            after.map_orders,
            before.map_orders + 1,
            "the macro over the map counted"
        );
    }
}

/// A Pod from a small vocabulary of the settings the Pod Security rules
/// look at.
fn pods() -> impl Strategy<Value = Value> {
    let container = (
        prop::sample::select(vec!["a", "b", "c"]),
        prop::option::of(any::<bool>()),
        prop::collection::vec(
            prop::sample::select(vec!["CHOWN", "NET_ADMIN", "KILL", "ALL"]),
            0..3,
        ),
        prop::option::of(0u16..3),
        prop::option::of(prop::sample::select(vec!["Default", "Unmasked"])),
        prop::option::of(-2i64..3),
    )
        .prop_map(|(name, privileged, add, host_port, proc_mount, run_as)| {
            let mut c = json!({"name": name, "image": "img"});
            let mut sc = serde_json::Map::new();
            if let Some(p) = privileged {
                sc.insert("privileged".into(), json!(p));
            }
            if !add.is_empty() {
                sc.insert("capabilities".into(), json!({"add": add}));
            }
            if let Some(m) = proc_mount {
                sc.insert("procMount".into(), json!(m));
            }
            if let Some(u) = run_as {
                sc.insert("runAsUser".into(), json!(u));
            }
            if !sc.is_empty() {
                c["securityContext"] = Value::Object(sc);
            }
            if let Some(p) = host_port {
                c["ports"] = json!([{"containerPort": 80, "hostPort": p}]);
            }
            c
        });
    (
        prop::collection::vec(container.clone(), 0..3),
        prop::collection::vec(container, 0..2),
        prop::option::of(any::<bool>()),
        prop::option::of(prop::sample::select(vec!["RuntimeDefault", "Unconfined", "Localhost"])),
        prop::collection::vec(prop::sample::select(vec!["kernel.shm_rmid_forced", "net.core.somaxconn"]), 0..2),
        any::<bool>(),
    )
        .prop_map(|(containers, init, host_pid, seccomp, sysctls, host_path)| {
            let mut spec = json!({"containers": containers});
            if !init.is_empty() {
                spec["initContainers"] = json!(init);
            }
            if let Some(h) = host_pid {
                spec["hostPID"] = json!(h);
            }
            let mut sc = serde_json::Map::new();
            if let Some(s) = seccomp {
                sc.insert("seccompProfile".into(), json!({"type": s}));
            }
            if !sysctls.is_empty() {
                let list: Vec<Value> = sysctls.iter().map(|n| json!({"name": n, "value": "1"})).collect();
                sc.insert("sysctls".into(), json!(list));
            }
            if !sc.is_empty() {
                spec["securityContext"] = Value::Object(sc);
            }
            if host_path {
                spec["volumes"] = json!([{"name": "v", "hostPath": {"path": "/etc"}}]);
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"}, "spec": spec})
        })
}

/// The Pod Security Katalogs, compiled once.
fn pod_security_katalogs() -> &'static [(&'static str, katalog_lang::Ir)] {
    static IRS: std::sync::OnceLock<Vec<(&'static str, katalog_lang::Ir)>> =
        std::sync::OnceLock::new();
    IRS.get_or_init(|| {
        [
            "pod-security-baseline.yaml",
            "pod-security-restricted.yaml",
            "pod-security.yaml",
        ]
        .into_iter()
        .map(|name| (name, katalog_ir(&repo().join("katalogs").join(name))))
        .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Generated Pods through the Pod Security Katalogs: the same verdict
    /// with the evaluator as with the interpreter alone.
    #[test]
    fn generated_pods_get_the_same_verdict_either_way(pod in pods()) {
        for (name, ir) in pod_security_katalogs() {
            let request = katalog_lang::admission::eval::SimulatedRequest {
                object: Some(pod.clone()),
                ..Default::default()
            };
            let input = request.to_input(ir).expect("a request");
            let got = serde_json::to_string(&evaluate(ir, &input, Endpoint::All)).unwrap();
            let want = interpreter_only(|| serde_json::to_string(&evaluate(ir, &input, Endpoint::All)).unwrap());
            prop_assert_eq!(&got, &want, "{}", name);
            let nodes = serde_json::to_string(&evaluate(ir, &as_nodes(&input), Endpoint::All)).unwrap();
            prop_assert_eq!(&nodes, &want, "{} with the objects read as nodes", name);
        }
    }
}
