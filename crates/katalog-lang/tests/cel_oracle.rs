//! katalog's CEL against cel-go with the Kubernetes libraries (the oracle,
//! `testenv/celoracle`): generated expressions over the libraries and
//! objects with awkward values must get the oracle's answer — the same value,
//! or an error where it gives an error — from both evaluators (over JSON
//! first, and cel's interpreter alone). Known differences are listed with
//! their reason in `testdata/cel/oracle-differences.yaml`; any other fails.
//!
//! Needs the go command (the oracle is built from its Go module, see
//! docs/cel.md). `CEL_ORACLE_CASES=N` changes the number of expressions,
//! `CEL_ORACLE_SEED=S` the seed, `CEL_ORACLE_EXPRS` (one a line) runs only
//! those expressions, and `CEL_ORACLE_REPORT=FILE` writes every new
//! difference there.

mod common;
mod oracle;

use common::repo;
use oracle::{Case, ask_all, build, compare, known_differences};
use serde_json::{Value, json};

/// A small deterministic generator (SplitMix64): the same seed gives the
/// same expressions on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "42",
    "-3",
    "9223372036854775807",
    "-9223372036854775808",
    "1000000",
];
const UINTS: &[&str] = &[
    "0u",
    "1u",
    "3u",
    "18446744073709551615u",
    "9223372036854775808u",
];
const DOUBLES: &[&str] = &[
    "0.0", "1.5", "-2.25", "0.1", "1e308", "-0.0", "3.0", "1e-10",
];
const STRINGS: &[&str] = &[
    "''",
    "'a'",
    "'abc'",
    "'Hello World'",
    "'πέντε'",
    "'😀x'",
    "' pad '",
    "'a,b,,c'",
    "'ABC-def'",
    "'ß'",
    "'12'",
    "'-7'",
    "'1.5'",
    "'true'",
    "'%'",
];
const REGEXES: &[&str] = &[
    "'^a'",
    "'b+'",
    "'[0-9]+'",
    "'^$'",
    "'(?i)abc'",
    "'π'",
    "'.'",
];
const QUANTITIES: &[&str] = &[
    "'1'", "'1.5Gi'", "'500m'", "'2k'", "'1e3'", "'0'", "'-1'", "'100Mi'", "'1.5'", "'bad'",
];
const SEMVERS: &[&str] = &[
    "'1.2.3'",
    "'1.2.3-alpha'",
    "'0.0.1'",
    "'10.0.0+build'",
    "'v1.0.0'",
    "'1.2'",
];
const IPS: &[&str] = &[
    "'192.168.0.1'",
    "'127.0.0.1'",
    "'::1'",
    "'2001:db8::1'",
    "'10.0.0.256'",
    "'::ffff:1.2.3.4'",
    "'0.0.0.0'",
];
const CIDRS: &[&str] = &[
    "'10.0.0.0/8'",
    "'192.168.1.0/24'",
    "'2001:db8::/32'",
    "'10.0.0.1/8'",
    "'1.2.3.4/33'",
];
const URLS: &[&str] = &[
    "'https://user@example.com:8080/a/b?q=1&r=x#f'",
    "'http://[::1]:80/'",
    "'/relative/path'",
    "'https://example.com'",
    "'not a url'",
    "'https://ex%20ample.com/%7Epath'",
];
const FORMATS: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// The object bound as `object` in case `i` (and `oldObject`): the same
/// fields with values taken from pools of awkward values.
fn object(rng: &mut Rng) -> Value {
    let ints = [
        json!(0),
        json!(1),
        json!(-1),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(42),
    ];
    let uints = [json!(u64::MAX), json!(9_223_372_036_854_775_808u64)];
    let floats = [
        json!(1.5),
        json!(-0.0),
        json!(1e308),
        json!(0.1),
        json!(2.0),
    ];
    let strings = [
        json!("πέντε"),
        json!(""),
        json!("a b"),
        json!("😀x"),
        json!("ABC"),
        json!("web-1"),
    ];
    let mut pick = |items: &[Value]| items[rng.below(items.len())].clone();
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {
            "name": pick(&strings),
            "namespace": "default",
            "labels": {"app": "web", "tier": pick(&strings)},
            "annotations": {"example.com/owner": "team-a", "ünï": "cödé"}
        },
        "spec": {
            "i": pick(&ints),
            "j": pick(&ints),
            "u": pick(&uints),
            "f": pick(&floats),
            "s": pick(&strings),
            "t": pick(&strings),
            "n": null,
            "b": true,
            "list": [pick(&ints), 3, pick(&ints)],
            "strs": [pick(&strings), "b", pick(&strings)],
            "empty": [],
            "mixed": [1, "a", null, 2.5, true],
            "nested": {"deep": {"x": pick(&ints)}},
            "ip": "192.168.0.1",
            "cidr": "10.0.0.0/8",
            "quantity": "1.5Gi",
            "version": "1.2.3-alpha",
            "url": "https://example.com:8443/p?q=1",
            "b64": "aGVsbG8="
        }
    })
}

/// Expressions of a few CEL types, built from the Kubernetes libraries.
struct Gen<'a> {
    rng: &'a mut Rng,
}

impl Gen<'_> {
    fn int(&mut self, d: u32) -> String {
        let leaf = d == 0 || self.rng.below(3) == 0;
        if leaf {
            return match self.rng.below(4) {
                0 | 1 => self.rng.pick(INTS).to_owned(),
                2 => self
                    .rng
                    .pick(&["object.spec.i", "object.spec.j", "object.spec.list[1]"])
                    .to_owned(),
                _ => self
                    .rng
                    .pick(&[
                        "object.spec.n",
                        "object.spec.missing",
                        "object.spec.s",
                        "object.spec.u",
                    ])
                    .to_owned(),
            };
        }
        let d = d - 1;
        match self.rng.below(22) {
            0 => format!(
                "({} {} {})",
                self.int(d),
                self.rng.pick(&["+", "-", "*", "/", "%"]),
                self.int(d)
            ),
            1 => format!("-{}", self.int(d)),
            2 => format!("size({})", self.string(d)),
            3 => format!("{}.size()", self.list(d)),
            4 => format!("int({})", self.double(d)),
            5 => format!("int({})", self.uint(d)),
            6 => format!("int({})", self.string(d)),
            7 => format!("{}.indexOf({})", self.string(d), self.string(d)),
            8 => format!("{}.lastIndexOf({})", self.string(d), self.string(d)),
            9 => format!(
                "math.{}({}, {})",
                self.rng.pick(&["greatest", "least"]),
                self.int(d),
                self.int(d)
            ),
            10 => format!("math.{}({})", self.rng.pick(&["abs", "sign"]), self.int(d)),
            11 => format!("{}[{}]", self.list(d), self.int(d)),
            12 => format!(
                "{}.{}()",
                self.list(d),
                self.rng.pick(&["sum", "min", "max"])
            ),
            13 => format!("quantity({}).asInteger()", self.rng.pick(QUANTITIES)),
            14 => format!(
                "quantity({}).compareTo(quantity({}))",
                self.rng.pick(QUANTITIES),
                self.rng.pick(QUANTITIES)
            ),
            15 => format!(
                "semver({}).{}()",
                self.rng.pick(SEMVERS),
                self.rng.pick(&["major", "minor", "patch"])
            ),
            16 => format!(
                "semver({}).compareTo(semver({}))",
                self.rng.pick(SEMVERS),
                self.rng.pick(SEMVERS)
            ),
            17 => format!("ip({}).family()", self.rng.pick(IPS)),
            18 => format!("cidr({}).prefixLength()", self.rng.pick(CIDRS)),
            19 => format!("{}.indexOf({})", self.list(d), self.int(d)),
            20 => format!(
                "math.{}({}, {})",
                self.rng
                    .pick(&["bitAnd", "bitOr", "bitXor", "bitShiftLeft", "bitShiftRight"]),
                self.int(d),
                self.int(d)
            ),
            _ => format!("({} ? {} : {})", self.bool(d), self.int(d), self.int(d)),
        }
    }

    fn uint(&mut self, d: u32) -> String {
        if d == 0 || self.rng.below(2) == 0 {
            return match self.rng.below(3) {
                0 | 1 => self.rng.pick(UINTS).to_owned(),
                _ => "object.spec.u".to_owned(),
            };
        }
        let d = d - 1;
        match self.rng.below(4) {
            0 => format!(
                "({} {} {})",
                self.uint(d),
                self.rng.pick(&["+", "-", "*", "/", "%"]),
                self.uint(d)
            ),
            1 => format!("uint({})", self.int(d)),
            2 => format!("uint({})", self.double(d)),
            _ => format!(
                "math.{}({}, {})",
                self.rng.pick(&["greatest", "least"]),
                self.uint(d),
                self.uint(d)
            ),
        }
    }

    fn double(&mut self, d: u32) -> String {
        if d == 0 || self.rng.below(3) == 0 {
            return match self.rng.below(3) {
                0 | 1 => self.rng.pick(DOUBLES).to_owned(),
                _ => "object.spec.f".to_owned(),
            };
        }
        let d = d - 1;
        match self.rng.below(7) {
            0 => format!(
                "({} {} {})",
                self.double(d),
                self.rng.pick(&["+", "-", "*", "/"]),
                self.double(d)
            ),
            1 => format!("double({})", self.int(d)),
            2 => format!("double({})", self.string(d)),
            3 => format!(
                "math.{}({})",
                self.rng
                    .pick(&["ceil", "floor", "round", "trunc", "abs", "sqrt"]),
                self.double(d)
            ),
            4 => format!(
                "quantity({}).asApproximateFloat()",
                self.rng.pick(QUANTITIES)
            ),
            5 => format!("-{}", self.double(d)),
            _ => format!("math.greatest({}, {})", self.double(d), self.double(d)),
        }
    }

    fn string(&mut self, d: u32) -> String {
        if d == 0 || self.rng.below(3) == 0 {
            return match self.rng.below(4) {
                0 | 1 => self.rng.pick(STRINGS).to_owned(),
                2 => self
                    .rng
                    .pick(&[
                        "object.metadata.name",
                        "object.spec.s",
                        "object.spec.t",
                        "object.metadata.labels.tier",
                    ])
                    .to_owned(),
                _ => self
                    .rng
                    .pick(&[
                        "object.spec.n",
                        "object.spec.i",
                        "object.metadata.labels.missing",
                        "object.spec.?s.orValue('none')",
                    ])
                    .to_owned(),
            };
        }
        let d = d - 1;
        match self.rng.below(27) {
            0 => format!("{} + {}", self.string(d), self.string(d)),
            1 => format!(
                "{}.{}()",
                self.string(d),
                self.rng
                    .pick(&["lowerAscii", "upperAscii", "trim", "reverse"])
            ),
            2 => format!(
                "{}.replace({}, {})",
                self.string(d),
                self.string(d),
                self.string(d)
            ),
            3 => format!("{}.substring({})", self.string(d), self.int(d)),
            4 => format!(
                "{}.substring({}, {})",
                self.string(d),
                self.int(d),
                self.int(d)
            ),
            5 => format!("{}.charAt({})", self.string(d), self.int(d)),
            6 => format!("string({})", self.int(d)),
            7 => format!("string({})", self.double(d)),
            8 => format!("string({})", self.uint(d)),
            9 => format!("{}.join({})", self.string_list(d), self.string(d)),
            10 => format!("strings.quote({})", self.string(d)),
            11 => format!(
                "'{}'.format([{}])",
                self.rng.pick(&[
                    "%s", "%d", "%f", "%.2f", "%x", "%X", "%o", "%b", "%e", "%s-%s"
                ]),
                match self.rng.below(5) {
                    0 => self.int(d),
                    1 => self.double(d),
                    2 => self.string(d),
                    3 => self.uint(d),
                    _ => format!("{}, {}", self.string(d), self.string(d)),
                }
            ),
            12 => format!("base64.encode(bytes({}))", self.string(d)),
            13 => format!(
                "string(base64.decode({}))",
                self.rng
                    .pick(&["'aGVsbG8='", "'aGVsbG8'", "'!!'", "object.spec.b64"])
            ),
            14 => format!(
                "url({}).{}()",
                self.rng.pick(URLS),
                self.rng.pick(&[
                    "getScheme",
                    "getHost",
                    "getHostname",
                    "getPort",
                    "getEscapedPath"
                ])
            ),
            15 => format!("string(ip({}))", self.rng.pick(IPS)),
            16 => format!(
                "string(cidr({}).{}())",
                self.rng.pick(CIDRS),
                self.rng.pick(&["ip", "masked"])
            ),
            17 => format!("{}.find({})", self.string(d), self.rng.pick(REGEXES)),
            18 => format!("{}.split({})[0]", self.string(d), self.string(d)),
            19 => format!("{}[{}]", self.string_list(d), self.int(d)),
            20 => format!("{}.orValue({})", self.optional_string(d), self.string(d)),
            21 => format!("string(quantity({}))", self.rng.pick(QUANTITIES)),
            22 => format!("string(semver({}))", self.rng.pick(SEMVERS)),
            23 => format!("string({})", self.bool(d)),
            24 => format!("{}.upperAscii()", self.string(d)),
            25 => format!(
                "({} ? {} : {})",
                self.bool(d),
                self.string(d),
                self.string(d)
            ),
            _ => format!("{}.trim()", self.string(d)),
        }
    }

    fn optional_string(&mut self, d: u32) -> String {
        match self.rng.below(6) {
            0 => "object.spec.?s".to_owned(),
            1 => "object.spec.?missing".to_owned(),
            2 => "object.?metadata.?labels[?'app']".to_owned(),
            3 => format!("optional.of({})", self.string(d)),
            4 => "optional.none()".to_owned(),
            _ => format!("{}[?{}]", self.string_list(d), self.int(d)),
        }
    }

    fn bool(&mut self, d: u32) -> String {
        if d == 0 || self.rng.below(4) == 0 {
            return self
                .rng
                .pick(&[
                    "true",
                    "false",
                    "object.spec.b",
                    "has(object.spec.s)",
                    "has(object.spec.missing)",
                    "has(object.metadata.labels.app)",
                    "object.spec.n == null",
                ])
                .to_owned();
        }
        let d = d - 1;
        match self.rng.below(37) {
            0 => format!(
                "{} {} {}",
                self.int(d),
                self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]),
                self.int(d)
            ),
            1 => format!(
                "{} {} {}",
                self.string(d),
                self.rng.pick(&["<", "==", "!=", ">="]),
                self.string(d)
            ),
            2 => format!(
                "{} {} {}",
                self.double(d),
                self.rng.pick(&["<", "==", "!=", ">"]),
                self.int(d)
            ),
            3 => format!(
                "{} {} {}",
                self.uint(d),
                self.rng.pick(&["<", "==", ">"]),
                self.int(d)
            ),
            4 => format!(
                "{}.{}({})",
                self.string(d),
                self.rng.pick(&["contains", "startsWith", "endsWith"]),
                self.string(d)
            ),
            5 => format!("{}.matches({})", self.string(d), self.rng.pick(REGEXES)),
            6 => format!("!{}", self.bool(d)),
            7 => format!("({} && {})", self.bool(d), self.bool(d)),
            8 => format!("({} || {})", self.bool(d), self.bool(d)),
            9 => format!("{} in {}", self.int(d), self.list(d)),
            10 => format!("{} in {}", self.string(d), self.string_list(d)),
            11 => format!(
                "{}.{}(x, x > {})",
                self.list(d),
                self.rng.pick(&["all", "exists", "exists_one"]),
                self.int(d)
            ),
            12 => format!(
                "{}({})",
                self.rng
                    .pick(&["isURL", "isIP", "isCIDR", "isQuantity", "isSemver"]),
                match self.rng.below(5) {
                    0 => self.rng.pick(URLS).to_owned(),
                    1 => self.rng.pick(IPS).to_owned(),
                    2 => self.rng.pick(CIDRS).to_owned(),
                    3 => self.rng.pick(QUANTITIES).to_owned(),
                    _ => self.rng.pick(SEMVERS).to_owned(),
                }
            ),
            13 => format!(
                "ip({}).{}()",
                self.rng.pick(IPS),
                self.rng.pick(&[
                    "isLoopback",
                    "isUnspecified",
                    "isLinkLocalMulticast",
                    "isLinkLocalUnicast",
                    "isGlobalUnicast",
                    "isCanonical"
                ])
            ),
            14 => format!(
                "cidr({}).containsIP({})",
                self.rng.pick(CIDRS),
                self.rng.pick(IPS)
            ),
            15 => format!(
                "cidr({}).containsCIDR({})",
                self.rng.pick(CIDRS),
                self.rng.pick(CIDRS)
            ),
            16 => format!(
                "sets.{}({}, {})",
                self.rng.pick(&["contains", "equivalent", "intersects"]),
                self.list(d),
                self.list(d)
            ),
            17 => format!("{}.isSorted()", self.list(d)),
            18 => format!(
                "quantity({}).{}(quantity({}))",
                self.rng.pick(QUANTITIES),
                self.rng.pick(&["isGreaterThan", "isLessThan"]),
                self.rng.pick(QUANTITIES)
            ),
            19 => format!("quantity({}).isInteger()", self.rng.pick(QUANTITIES)),
            20 => format!(
                "semver({}).{}(semver({}))",
                self.rng.pick(SEMVERS),
                self.rng.pick(&["isLessThan", "isGreaterThan"]),
                self.rng.pick(SEMVERS)
            ),
            21 => format!(
                "format.{}().validate({}).hasValue()",
                self.rng.pick(FORMATS),
                self.string(d)
            ),
            22 => format!("{}.hasValue()", self.optional_string(d)),
            23 => format!("({} ? {} : {})", self.bool(d), self.bool(d), self.bool(d)),
            24 => format!("{} == {}", self.list(d), self.list(d)),
            25 => format!(
                "'{}' in object.metadata.labels",
                self.rng.pick(&["app", "tier", "x"])
            ),
            26 => format!(
                "object.metadata.{}.{}(k, {})",
                self.rng.pick(&["labels", "annotations"]),
                self.rng.pick(&["all", "exists", "exists_one"]),
                self.rng
                    .pick(&["k.startsWith('a')", "k.size() > 3", "k == 'app'"])
            ),
            27 => format!("url({}).getQuery().size() > 0", self.rng.pick(URLS)),
            28 => format!("{} == {}", self.double(d), self.uint(d)),
            29 => format!("{}.matches({})", self.string(d), self.string(d)),
            30 => format!("isURL({})", self.string(d)),
            31 => format!("{}.all(s, s.size() < {})", self.string_list(d), self.int(d)),
            32 => format!("object.spec.mixed.exists(x, x == {})", self.int(d)),
            // Two-variable comprehensions and optMap (the macros cel 0.13
            // lacks, expanded by katalog).
            33 => format!(
                "{}.{}(i, x, x > i + {})",
                self.list(d),
                self.rng.pick(&["all", "exists", "existsOne"]),
                self.int(d)
            ),
            34 => format!(
                "object.metadata.{}.{}(k, v, {})",
                self.rng.pick(&["labels", "annotations"]),
                self.rng.pick(&["all", "exists", "existsOne"]),
                self.rng.pick(&[
                    "k.startsWith('a') && v.size() > 2",
                    "k.size() > 3 || v == 'web'",
                    "v.contains(k)",
                ])
            ),
            35 => format!(
                "{}.optMap(s, s.size() > {}).orValue(false)",
                self.optional_string(d),
                self.int(d)
            ),
            _ => format!(
                "{}.exists_one(s, s == {})",
                self.string_list(d),
                self.string(d)
            ),
        }
    }

    fn list(&mut self, d: u32) -> String {
        if d == 0 || self.rng.below(3) == 0 {
            return match self.rng.below(4) {
                0 => format!("[{}, {}]", self.rng.pick(INTS), self.rng.pick(INTS)),
                1 => "object.spec.list".to_owned(),
                2 => "object.spec.empty".to_owned(),
                _ => self
                    .rng
                    .pick(&[
                        "[]",
                        "[1, 2, 3, 2, 1]",
                        "object.spec.mixed",
                        "object.spec.missing",
                        "[3, 1, 2]",
                    ])
                    .to_owned(),
            };
        }
        let d = d - 1;
        match self.rng.below(15) {
            12 => format!("{}.transformList(i, x, x + i)", self.list(d)),
            13 => format!(
                "{}.transformList(i, x, x % 2 == {}, x * i)",
                self.list(d),
                self.rng.pick(&["0", "1"])
            ),
            // Sorted: cel-go iterates the map transformMap makes in Go's
            // random map order.
            14 => format!(
                "{}.transformMap(i, x, x - i).transformList(k, v, v).sort()",
                self.list(d)
            ),
            0 => format!("{} + {}", self.list(d), self.list(d)),
            1 => format!("{}.filter(x, x > {})", self.list(d), self.int(d)),
            2 => format!("{}.map(x, x * {})", self.list(d), self.int(d)),
            3 => format!(
                "{}.{}()",
                self.list(d),
                self.rng.pick(&["sort", "distinct", "reverse"])
            ),
            4 => format!("{}.slice({}, {})", self.list(d), self.int(d), self.int(d)),
            5 => format!("lists.range({})", self.rng.pick(&["0", "3", "-1", "5"])),
            6 => format!("[{}, {}].flatten()", self.list(d), self.list(d)),
            7 => format!("{}.map(x, x % 2 == 0, x)", self.list(d)),
            8 => format!("[{}]", self.int(d)),
            9 => format!("{}.sortBy(x, -x)", self.list(d)),
            10 => format!("[{}, ?optional.of(2), ?optional.none()]", self.int(d)),
            _ => format!("({}.first().orValue(0) == 0 ? [] : [1])", self.list(d)),
        }
    }

    fn string_list(&mut self, d: u32) -> String {
        if d == 0 || self.rng.below(3) == 0 {
            return match self.rng.below(3) {
                0 => format!("[{}, {}]", self.rng.pick(STRINGS), self.rng.pick(STRINGS)),
                1 => "object.spec.strs".to_owned(),
                _ => "object.metadata.labels.map(k, k).sort()".to_owned(),
            };
        }
        let d = d - 1;
        match self.rng.below(6) {
            0 => format!("{}.split({})", self.string(d), self.string(d)),
            1 => format!(
                "{}.split({}, {})",
                self.string(d),
                self.string(d),
                self.int(d)
            ),
            2 => format!("{}.findAll({})", self.string(d), self.rng.pick(REGEXES)),
            3 => format!("{}.map(s, s.upperAscii())", self.string_list(d)),
            4 => format!("{}.sort()", self.string_list(d)),
            _ => format!("url({}).getQuery().map(k, k).sort()", self.rng.pick(URLS)),
        }
    }

    /// An expression of any of the types.
    fn any(&mut self, d: u32) -> String {
        match self.rng.below(8) {
            0 => self.int(d),
            1 => self.uint(d),
            2 => self.double(d),
            3 | 4 => self.string(d),
            5 => self.list(d),
            6 => self.string_list(d),
            _ => self.bool(d),
        }
    }
}

fn cases(seed: u64, n: usize) -> Vec<Case> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let obj = object(&mut rng);
            let depth = 1 + rng.below(3) as u32;
            let expr = Gen { rng: &mut rng }.any(depth);
            Case {
                expr,
                bindings: vec![("object".to_owned(), obj)],
            }
        })
        .collect()
}

/// The generated set: `CEL_ORACLE_SEED` (30) and `CEL_ORACLE_CASES`
/// (10,000).
fn seed_and_count() -> (u64, usize) {
    let var = |name: &str, default: u64| {
        std::env::var(name).ok().map_or(default, |s| {
            s.parse().unwrap_or_else(|_| panic!("{name} is a number"))
        })
    };
    (
        var("CEL_ORACLE_SEED", 30),
        var("CEL_ORACLE_CASES", 10_000) as usize,
    )
}

#[test]
fn generated_expressions_get_cel_gos_answers() {
    let (seed, n) = seed_and_count();
    let mut cases = cases(seed, n);
    if let Ok(exprs) = std::env::var("CEL_ORACLE_EXPRS") {
        // Only these expressions (one a line), over the first object.
        let bindings = cases[0].bindings.clone();
        cases = exprs
            .lines()
            .map(|expr| Case {
                expr: expr.to_owned(),
                bindings: bindings.clone(),
            })
            .collect();
    }
    let binary = build(&repo());
    let (answers, outside) = ask_all(&binary, &cases);
    eprintln!(
        "{outside} of {n} expressions use cel-go's math or base64 extension, which Kubernetes' \
         CEL lacks: compared with cel-go with those extensions"
    );
    let known = known_differences(&repo());
    let new = compare("generated expressions", &cases, &answers, &known);
    assert!(
        new.is_empty(),
        "{} new differences from cel-go (fix them, or list them with the reason in \
         testdata/cel/oracle-differences.yaml); the first ones:\n{}",
        new.len(),
        new.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// The same generated expressions, for the static cost estimate: katalog's
/// (`katalog_lang::cel::cost`) must be cel-go's with the Kubernetes cost
/// estimator (`tests/oracle/cost.rs`, `testdata/cel/cost-differences.yaml`).
#[test]
fn generated_expressions_get_cel_gos_cost_estimates() {
    let (seed, n) = seed_and_count();
    let exprs: Vec<String> = cases(seed, n).into_iter().map(|c| c.expr).collect();
    let binary = build(&repo());
    let answers = oracle::cost::ask_costs(&binary, &exprs);
    let known = oracle::cost::known_cost_differences(&repo());
    let new = oracle::cost::compare_costs("generated expressions", &exprs, &answers, &known);
    assert!(
        new.is_empty(),
        "{} estimates differ from cel-go's (fix them, or list them with the reason in \
         testdata/cel/cost-differences.yaml); the first ones:\n{}",
        new.len(),
        new.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
    );
}
