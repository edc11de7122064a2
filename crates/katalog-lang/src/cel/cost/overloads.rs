//! The overloads of the apiserver's CEL environment as the cost estimate
//! tells them apart (cel-go's checker resolves a call to the overloads its
//! argument types may match, and the Kubernetes libraries' `CostEstimator`
//! prices each overload id), and the types the estimate infers to do it.

/// A CEL type, as far as the estimate needs it.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::cel) enum T {
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    List(Box<T>),
    Map(Box<T>, Box<T>),
    Opt(Box<T>),
    /// An object type of the Kubernetes libraries (`kubernetes.Quantity`, ...).
    Struct(&'static str),
    /// An opaque type (`net.IP`, `net.CIDR`).
    Opaque(&'static str),
    Type,
    /// A type parameter of an overload (`A`, `B`).
    Param(u8),
    /// A free type variable (`optional.none()`'s value type): whatever it
    /// is joined with.
    Free,
}

impl T {
    pub(super) fn is_scalar(&self) -> bool {
        match self {
            T::Bool | T::Int | T::Uint | T::Double | T::Timestamp | T::Duration => true,
            T::Opt(t) => t.is_scalar(),
            _ => false,
        }
    }

    pub(super) fn is_string_or_bytes(&self) -> bool {
        matches!(self, T::String | T::Bytes)
    }
}

/// A type of the overload table's signatures; `dyn` for a name outside
/// its language (a unit test checks that the table has none).
fn parse_type(s: &str) -> T {
    parse_known_type(s).unwrap_or(T::Dyn)
}

fn parse_known_type(s: &str) -> Option<T> {
    let s = s.trim();
    if let Some(inner) = s.strip_prefix("list(").and_then(|r| r.strip_suffix(')')) {
        return Some(T::List(Box::new(parse_known_type(inner)?)));
    }
    if let Some(inner) = s.strip_prefix("opt(").and_then(|r| r.strip_suffix(')')) {
        return Some(T::Opt(Box::new(parse_known_type(inner)?)));
    }
    if let Some(inner) = s.strip_prefix("map(").and_then(|r| r.strip_suffix(')')) {
        let (k, v) = split_top(inner);
        return Some(T::Map(
            Box::new(parse_known_type(k)?),
            Box::new(parse_known_type(v)?),
        ));
    }
    Some(match s {
        "dyn" => T::Dyn,
        "free" => T::Free,
        "null" => T::Null,
        "bool" => T::Bool,
        "int" => T::Int,
        "uint" => T::Uint,
        "double" => T::Double,
        "string" => T::String,
        "bytes" => T::Bytes,
        "timestamp" => T::Timestamp,
        "duration" => T::Duration,
        "type" => T::Type,
        "A" => T::Param(0),
        "B" => T::Param(1),
        "Quantity" => T::Struct("kubernetes.Quantity"),
        "URL" => T::Struct("kubernetes.URL"),
        "Semver" => T::Struct("kubernetes.Semver"),
        "Format" => T::Struct("kubernetes.NamedFormat"),
        "IP" => T::Opaque("net.IP"),
        "CIDR" => T::Opaque("net.CIDR"),
        _ => return None,
    })
}

/// `"a, b"` at its top-level comma.
fn split_top(s: &str) -> (&str, &str) {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => return (&s[..i], &s[i + 1..]),
            _ => {}
        }
    }
    (s, "")
}

/// The overloads of the apiserver's environment the estimate tells apart:
/// function, overload id, whether it is a member (`x.f()`), and its
/// signature (`params -> result`; a member's receiver first).
#[rustfmt::skip]
const OVERLOADS: &[(&str, &str, bool, &str)] = &[
    ("_+_", "add_int64", false, "int, int -> int"),
    ("_+_", "add_uint64", false, "uint, uint -> uint"),
    ("_+_", "add_double", false, "double, double -> double"),
    ("_+_", "add_string", false, "string, string -> string"),
    ("_+_", "add_bytes", false, "bytes, bytes -> bytes"),
    ("_+_", "add_list", false, "list(A), list(A) -> list(A)"),
    ("_+_", "add_timestamp_duration", false, "timestamp, duration -> timestamp"),
    ("_+_", "add_duration_timestamp", false, "duration, timestamp -> timestamp"),
    ("_+_", "add_duration_duration", false, "duration, duration -> duration"),
    ("_-_", "subtract_int64", false, "int, int -> int"),
    ("_-_", "subtract_uint64", false, "uint, uint -> uint"),
    ("_-_", "subtract_double", false, "double, double -> double"),
    ("_-_", "subtract_timestamp_timestamp", false, "timestamp, timestamp -> duration"),
    ("_-_", "subtract_timestamp_duration", false, "timestamp, duration -> timestamp"),
    ("_-_", "subtract_duration_duration", false, "duration, duration -> duration"),
    ("_*_", "multiply_int64", false, "int, int -> int"),
    ("_*_", "multiply_uint64", false, "uint, uint -> uint"),
    ("_*_", "multiply_double", false, "double, double -> double"),
    ("_/_", "divide_int64", false, "int, int -> int"),
    ("_/_", "divide_uint64", false, "uint, uint -> uint"),
    ("_/_", "divide_double", false, "double, double -> double"),
    ("_%_", "modulo_int64", false, "int, int -> int"),
    ("_%_", "modulo_uint64", false, "uint, uint -> uint"),
    ("-_", "negate_int64", false, "int -> int"),
    ("-_", "negate_double", false, "double -> double"),
    ("!_", "logical_not", false, "bool -> bool"),
    ("_&&_", "logical_and", false, "bool, bool -> bool"),
    ("_||_", "logical_or", false, "bool, bool -> bool"),
    ("_?_:_", "conditional", false, "bool, A, A -> A"),
    ("_==_", "equals", false, "A, A -> bool"),
    ("_!=_", "not_equals", false, "A, A -> bool"),
    ("@not_strictly_false", "not_strictly_false", false, "bool -> bool"),
    ("_[_]", "index_list", false, "list(A), int -> A"),
    ("_[_]", "index_map", false, "map(A, B), A -> B"),
    ("@in", "in_list", false, "A, list(A) -> bool"),
    ("@in", "in_map", false, "A, map(A, B) -> bool"),
    ("_?._", "select_optional_field", false, "dyn, string -> opt(dyn)"),
    ("_[?_]", "list_optindex_optional_int", false, "list(A), int -> opt(A)"),
    ("_[?_]", "map_optindex_optional_value", false, "map(A, B), A -> opt(B)"),
    ("_[?_]", "optional_list_optindex_optional_int", false, "opt(list(A)), int -> opt(A)"),
    ("_[?_]", "optional_map_optindex_optional_value", false, "opt(map(A, B)), A -> opt(B)"),
    ("_[_]", "optional_list_index_int", false, "opt(list(A)), int -> opt(A)"),
    ("_[_]", "optional_map_index_value", false, "opt(map(A, B)), A -> opt(B)"),
    ("size", "size_string", false, "string -> int"),
    ("size", "size_bytes", false, "bytes -> int"),
    ("size", "size_list", false, "list(A) -> int"),
    ("size", "size_map", false, "map(A, B) -> int"),
    ("size", "string_size", true, "string -> int"),
    ("size", "bytes_size", true, "bytes -> int"),
    ("size", "list_size", true, "list(A) -> int"),
    ("size", "map_size", true, "map(A, B) -> int"),
    ("contains", "contains_string", true, "string, string -> bool"),
    ("startsWith", "starts_with_string", true, "string, string -> bool"),
    ("endsWith", "ends_with_string", true, "string, string -> bool"),
    ("matches", "matches", false, "string, string -> bool"),
    ("matches", "matches_string", true, "string, string -> bool"),
    ("int", "int64_to_int64", false, "int -> int"),
    ("int", "uint64_to_int64", false, "uint -> int"),
    ("int", "double_to_int64", false, "double -> int"),
    ("int", "string_to_int64", false, "string -> int"),
    ("int", "timestamp_to_int64", false, "timestamp -> int"),
    ("int", "duration_to_int64", false, "duration -> int"),
    ("uint", "uint64_to_uint64", false, "uint -> uint"),
    ("uint", "int64_to_uint64", false, "int -> uint"),
    ("uint", "double_to_uint64", false, "double -> uint"),
    ("uint", "string_to_uint64", false, "string -> uint"),
    ("double", "double_to_double", false, "double -> double"),
    ("double", "int64_to_double", false, "int -> double"),
    ("double", "uint64_to_double", false, "uint -> double"),
    ("double", "string_to_double", false, "string -> double"),
    ("string", "string_to_string", false, "string -> string"),
    ("string", "bool_to_string", false, "bool -> string"),
    ("string", "int64_to_string", false, "int -> string"),
    ("string", "uint64_to_string", false, "uint -> string"),
    ("string", "double_to_string", false, "double -> string"),
    ("string", "bytes_to_string", false, "bytes -> string"),
    ("string", "timestamp_to_string", false, "timestamp -> string"),
    ("string", "duration_to_string", false, "duration -> string"),
    ("string", "ip_to_string", false, "IP -> string"),
    ("string", "cidr_to_string", false, "CIDR -> string"),
    ("bytes", "bytes_to_bytes", false, "bytes -> bytes"),
    ("bytes", "string_to_bytes", false, "string -> bytes"),
    ("bool", "bool_to_bool", false, "bool -> bool"),
    ("bool", "string_to_bool", false, "string -> bool"),
    ("duration", "duration_to_duration", false, "duration -> duration"),
    ("duration", "string_to_duration", false, "string -> duration"),
    ("timestamp", "timestamp_to_timestamp", false, "timestamp -> timestamp"),
    ("timestamp", "string_to_timestamp", false, "string -> timestamp"),
    ("timestamp", "int64_to_timestamp", false, "int -> timestamp"),
    ("type", "type", false, "A -> type"),
    ("optional.of", "optional_of", false, "A -> opt(A)"),
    ("optional.ofNonZeroValue", "optional_ofNonZeroValue", false, "A -> opt(A)"),
    ("optional.none", "optional_none", false, " -> opt(free)"),
    ("value", "optional_value", true, "opt(A) -> A"),
    ("hasValue", "optional_hasValue", true, "opt(A) -> bool"),
    ("or", "optional_or_optional", true, "opt(A), opt(A) -> opt(A)"),
    ("orValue", "optional_orValue_value", true, "opt(A), A -> A"),
    // strings extension, version 2
    ("charAt", "string_char_at_int", true, "string, int -> string"),
    ("indexOf", "string_index_of_string", true, "string, string -> int"),
    ("indexOf", "string_index_of_string_int", true, "string, string, int -> int"),
    ("lastIndexOf", "string_last_index_of_string", true, "string, string -> int"),
    ("lastIndexOf", "string_last_index_of_string_int", true, "string, string, int -> int"),
    ("lowerAscii", "string_lower_ascii", true, "string -> string"),
    ("upperAscii", "string_upper_ascii", true, "string -> string"),
    ("replace", "string_replace_string_string", true, "string, string, string -> string"),
    ("replace", "string_replace_string_string_int", true, "string, string, string, int -> string"),
    ("split", "string_split_string", true, "string, string -> list(string)"),
    ("split", "string_split_string_int", true, "string, string, int -> list(string)"),
    ("substring", "string_substring_int", true, "string, int -> string"),
    ("substring", "string_substring_int_int", true, "string, int, int -> string"),
    ("trim", "string_trim", true, "string -> string"),
    ("join", "list_join", true, "list(string) -> string"),
    ("join", "list_join_string", true, "list(string), string -> string"),
    ("strings.quote", "strings_quote", false, "string -> string"),
    ("format", "string_format", true, "string, list(dyn) -> string"),
    // Kubernetes lists library
    ("isSorted", "list_is_sorted", true, "list(A) -> bool"),
    ("sum", "list_sum", true, "list(A) -> A"),
    ("max", "list_max", true, "list(A) -> A"),
    ("min", "list_min", true, "list(A) -> A"),
    ("indexOf", "list_a_index_of_a", true, "list(A), A -> int"),
    ("lastIndexOf", "list_a_last_index_of_a", true, "list(A), A -> int"),
    // cel-go's lists extension, version 3
    ("slice", "list_slice", true, "list(A), int, int -> list(A)"),
    ("flatten", "list_flatten", true, "list(list(A)) -> list(A)"),
    ("flatten", "list_flatten_int", true, "list(dyn), int -> list(dyn)"),
    ("lists.range", "lists_range", false, "int -> list(int)"),
    ("reverse", "list_reverse", true, "list(A) -> list(A)"),
    ("distinct", "list_distinct", true, "list(A) -> list(A)"),
    ("first", "list_first", true, "list(A) -> opt(A)"),
    ("last", "list_last", true, "list(A) -> opt(A)"),
    ("sort", "list_int_sort", true, "list(int) -> list(int)"),
    ("sort", "list_uint_sort", true, "list(uint) -> list(uint)"),
    ("sort", "list_double_sort", true, "list(double) -> list(double)"),
    ("sort", "list_string_sort", true, "list(string) -> list(string)"),
    ("sort", "list_bytes_sort", true, "list(bytes) -> list(bytes)"),
    ("sort", "list_bool_sort", true, "list(bool) -> list(bool)"),
    ("sort", "list_timestamp_sort", true, "list(timestamp) -> list(timestamp)"),
    ("sort", "list_duration_sort", true, "list(duration) -> list(duration)"),
    (
        "@sortByAssociatedKeys",
        "list_int_sortByAssociatedKeys",
        true,
        "list(A), list(int) -> list(A)",
    ),
    (
        "@sortByAssociatedKeys",
        "list_uint_sortByAssociatedKeys",
        true,
        "list(A), list(uint) -> list(A)",
    ),
    (
        "@sortByAssociatedKeys",
        "list_double_sortByAssociatedKeys",
        true,
        "list(A), list(double) -> list(A)",
    ),
    (
        "@sortByAssociatedKeys",
        "list_string_sortByAssociatedKeys",
        true,
        "list(A), list(string) -> list(A)",
    ),
    (
        "@sortByAssociatedKeys",
        "list_bytes_sortByAssociatedKeys",
        true,
        "list(A), list(bytes) -> list(A)",
    ),
    (
        "@sortByAssociatedKeys",
        "list_bool_sortByAssociatedKeys",
        true,
        "list(A), list(bool) -> list(A)",
    ),
    (
        "@sortByAssociatedKeys",
        "list_timestamp_sortByAssociatedKeys",
        true,
        "list(A), list(timestamp) -> list(A)",
    ),
    (
        "@sortByAssociatedKeys",
        "list_duration_sortByAssociatedKeys",
        true,
        "list(A), list(duration) -> list(A)",
    ),
    // sets
    ("sets.contains", "list_sets_contains_list", false, "list(A), list(A) -> bool"),
    ("sets.equivalent", "list_sets_equivalent_list", false, "list(A), list(A) -> bool"),
    ("sets.intersects", "list_sets_intersects_list", false, "list(A), list(A) -> bool"),
    // regex
    ("find", "string_find_string", true, "string, string -> string"),
    ("findAll", "string_find_all_string", true, "string, string -> list(string)"),
    ("findAll", "string_find_all_string_int", true, "string, string, int -> list(string)"),
    // URLs
    ("url", "string_to_url", false, "string -> URL"),
    ("isURL", "is_url_string", false, "string -> bool"),
    ("getScheme", "url_get_scheme", true, "URL -> string"),
    ("getHost", "url_get_host", true, "URL -> string"),
    ("getHostname", "url_get_hostname", true, "URL -> string"),
    ("getPort", "url_get_port", true, "URL -> string"),
    ("getEscapedPath", "url_get_escaped_path", true, "URL -> string"),
    ("getQuery", "url_get_query", true, "URL -> map(string, list(string))"),
    // IP and CIDR
    ("ip", "string_to_ip", false, "string -> IP"),
    ("isIP", "is_ip", false, "string -> bool"),
    ("ip.isCanonical", "ip_is_canonical", false, "string -> bool"),
    ("family", "ip_family", true, "IP -> int"),
    ("isUnspecified", "ip_is_unspecified", true, "IP -> bool"),
    ("isLoopback", "ip_is_loopback", true, "IP -> bool"),
    ("isLinkLocalMulticast", "ip_is_link_local_multicast", true, "IP -> bool"),
    ("isLinkLocalUnicast", "ip_is_link_local_unicast", true, "IP -> bool"),
    ("isGlobalUnicast", "ip_is_global_unicast", true, "IP -> bool"),
    ("cidr", "string_to_cidr", false, "string -> CIDR"),
    ("isCIDR", "is_cidr", false, "string -> bool"),
    ("containsIP", "cidr_contains_ip_ip", true, "CIDR, IP -> bool"),
    ("containsIP", "cidr_contains_ip_string", true, "CIDR, string -> bool"),
    ("containsCIDR", "cidr_contains_cidr", true, "CIDR, CIDR -> bool"),
    ("containsCIDR", "cidr_contains_cidr_string", true, "CIDR, string -> bool"),
    ("ip", "cidr_ip", true, "CIDR -> IP"),
    ("masked", "cidr_masked", true, "CIDR -> CIDR"),
    ("prefixLength", "cidr_prefix_length", true, "CIDR -> int"),
    // quantity
    ("quantity", "string_to_quantity", false, "string -> Quantity"),
    ("isQuantity", "is_quantity_string", false, "string -> bool"),
    ("sign", "quantity_sign", true, "Quantity -> int"),
    ("isInteger", "quantity_is_integer", true, "Quantity -> bool"),
    ("asInteger", "quantity_as_integer", true, "Quantity -> int"),
    ("asApproximateFloat", "quantity_as_float", true, "Quantity -> double"),
    ("add", "quantity_add", true, "Quantity, Quantity -> Quantity"),
    ("add", "quantity_add_int", true, "Quantity, int -> Quantity"),
    ("sub", "quantity_sub", true, "Quantity, Quantity -> Quantity"),
    ("sub", "quantity_sub_int", true, "Quantity, int -> Quantity"),
    ("isGreaterThan", "quantity_is_greater_than", true, "Quantity, Quantity -> bool"),
    ("isLessThan", "quantity_is_less_than", true, "Quantity, Quantity -> bool"),
    ("compareTo", "quantity_compare_to", true, "Quantity, Quantity -> int"),
    // semver
    ("semver", "string_to_semver", false, "string -> Semver"),
    ("semver", "string_bool_to_semver", false, "string, bool -> Semver"),
    ("isSemver", "is_semver_string", false, "string -> bool"),
    ("isSemver", "is_semver_string_bool", false, "string, bool -> bool"),
    ("major", "semver_major", true, "Semver -> int"),
    ("minor", "semver_minor", true, "Semver -> int"),
    ("patch", "semver_patch", true, "Semver -> int"),
    ("isGreaterThan", "semver_is_greater_than", true, "Semver, Semver -> bool"),
    ("isLessThan", "semver_is_less_than", true, "Semver, Semver -> bool"),
    ("compareTo", "semver_compare_to", true, "Semver, Semver -> int"),
    // named formats
    ("format.named", "format_named", false, "string -> opt(Format)"),
    ("validate", "format_validate", true, "Format, string -> opt(list(string))"),
    ("jsonpatch.escapeKey", "string_jsonpatch_escapekey", false, "string -> string"),
    // what the macros expand to
    ("cel.@mapInsert", "cel_@mapInsert_map_key_value", false, "map(A, B), A, B -> map(A, B)"),
    ("cel.@mapInsert", "cel_@mapInsert_map_map", false, "map(A, B), map(A, B) -> map(A, B)"),
];

/// The overload id prefix of a comparison operator.
fn comparison(name: &str) -> Option<&'static str> {
    Some(match name {
        "_<_" => "less",
        "_<=_" => "less_equals",
        "_>_" => "greater",
        "_>=_" => "greater_equals",
        _ => return None,
    })
}

/// The type of an overload id's type name (`int64` is `int`).
fn cel_type(id_name: &str) -> &str {
    match id_name {
        "int64" => "int",
        "uint64" => "uint",
        other => other,
    }
}

/// The comparison overload ids, made once.
fn leak(id: String) -> &'static str {
    static IDS: std::sync::LazyLock<std::sync::Mutex<Vec<&'static str>>> =
        std::sync::LazyLock::new(Default::default);
    let mut ids = IDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = ids.iter().find(|k| **k == id) {
        return known;
    }
    let made: &'static str = Box::leak(id.into_boxed_str());
    ids.push(made);
    made
}

/// What a call resolved to: its overload ids and result type.
pub(in crate::cel) struct Resolved {
    pub(in crate::cel) ids: Vec<&'static str>,
    pub(in crate::cel) result: T,
}

fn substitute(t: &T, bound: &[Option<T>; 2]) -> T {
    match t {
        T::Param(p) => bound[usize::from(*p)].clone().unwrap_or(T::Dyn),
        T::List(e) => T::List(Box::new(substitute(e, bound))),
        T::Map(k, v) => T::Map(
            Box::new(substitute(k, bound)),
            Box::new(substitute(v, bound)),
        ),
        T::Opt(e) => T::Opt(Box::new(substitute(e, bound))),
        other => other.clone(),
    }
}

/// Whether a value of type `arg` may be passed as `param`, binding the
/// type parameters (cel-go's `isAssignable`, simplified: `dyn` matches
/// everything both ways).
fn assignable(param: &T, arg: &T, bound: &mut [Option<T>; 2]) -> bool {
    match (param, arg) {
        (T::Param(p), _) => {
            let p = usize::from(*p);
            match bound[p].clone() {
                None => {
                    bound[p] = Some(arg.clone());
                    true
                }
                Some(b) => match most_general(&b, arg) {
                    Some(general) => {
                        bound[p] = Some(general);
                        true
                    }
                    None => false,
                },
            }
        }
        (_, T::Dyn | T::Free) | (T::Dyn | T::Free, _) => true,
        (T::List(a), T::List(b)) | (T::Opt(a), T::Opt(b)) => assignable(a, b, bound),
        (T::Map(ka, va), T::Map(kb, vb)) => assignable(ka, kb, bound) && assignable(va, vb, bound),
        (a, b) => a == b,
    }
}

/// The more general of two compatible types (cel-go's `mostGeneral`, as
/// its checker rebinds a type parameter: `string` and `dyn` give `dyn`), or
/// `None` when neither is assignable to the other.
fn most_general(a: &T, b: &T) -> Option<T> {
    match (a, b) {
        (T::Free, x) | (x, T::Free) => Some(x.clone()),
        (T::Dyn, _) | (_, T::Dyn) => Some(T::Dyn),
        (T::List(x), T::List(y)) => Some(T::List(Box::new(most_general(x, y)?))),
        (T::Opt(x), T::Opt(y)) => Some(T::Opt(Box::new(most_general(x, y)?))),
        (T::Map(k1, v1), T::Map(k2, v2)) => Some(T::Map(
            Box::new(most_general(k1, k2)?),
            Box::new(most_general(v1, v2)?),
        )),
        (x, y) if x == y => Some(x.clone()),
        _ => None,
    }
}

/// The overloads of `name` that `args` (the receiver first for a member
/// call) may resolve to, or `None` when the function is not in the table.
pub(in crate::cel) fn resolve(name: &str, member: bool, args: &[T]) -> Option<Resolved> {
    let mut ids = Vec::new();
    let mut result: Option<T> = None;
    let mut known = false;
    let mut consider = |id: &'static str, sig: &str| {
        let (params_text, ret) = sig.split_once("->").unwrap_or((sig, "dyn"));
        let mut params = Vec::new();
        let mut rest = params_text.trim();
        while !rest.is_empty() {
            let (first, more) = split_top(rest);
            params.push(parse_type(first));
            rest = more.trim();
        }
        if params.len() != args.len() {
            return;
        }
        let mut bound = [None, None];
        if !params
            .iter()
            .zip(args)
            .all(|(p, a)| assignable(p, a, &mut bound))
        {
            return;
        }
        let ret = substitute(&parse_type(ret), &bound);
        ids.push(id);
        result = Some(match result.take() {
            None => ret,
            Some(T::Dyn) => T::Dyn,
            Some(r) if r == ret => r,
            Some(_) => T::Dyn,
        });
    };
    for (f, id, m, sig) in OVERLOADS {
        if *f == name && *m == member {
            known = true;
            consider(id, sig);
        }
    }
    if name
        .strip_prefix("format.")
        .is_some_and(|n| crate::cel::named_format::NAMES.contains(&n))
        && !member
    {
        known = true;
        consider("format_constant", " -> Format");
    }
    if let Some(op) = comparison(name) {
        known = true;
        for t in [
            "bool",
            "int64",
            "uint64",
            "double",
            "string",
            "bytes",
            "timestamp",
            "duration",
        ] {
            let ty = cel_type(t);
            consider(leak(format!("{op}_{t}")), &format!("{ty}, {ty} -> bool"));
        }
        for (a, b) in [
            ("int64", "uint64"),
            ("int64", "double"),
            ("uint64", "int64"),
            ("uint64", "double"),
            ("double", "int64"),
            ("double", "uint64"),
        ] {
            let sig = format!("{}, {} -> bool", cel_type(a), cel_type(b));
            consider(leak(format!("{op}_{a}_{b}")), &sig);
        }
    }
    if crate::cel::functions::TIMESTAMP_ACCESSORS.contains(&name) && member {
        known = true;
        consider("timestamp_getter", "timestamp -> int");
        consider("timestamp_getter_tz", "timestamp, string -> int");
        consider("duration_getter", "duration -> int");
    }
    if !known {
        return None;
    }
    Some(Resolved {
        ids,
        result: result.unwrap_or(T::Dyn),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signature_of_the_overload_table_parses() {
        for (name, id, _, sig) in OVERLOADS {
            let (params, ret) = sig.split_once("->").expect("an arrow");
            let mut rest = params.trim();
            while !rest.is_empty() {
                let (first, more) = split_top(rest);
                assert!(parse_known_type(first).is_some(), "{name} {id}: {first}");
                rest = more.trim();
            }
            assert!(parse_known_type(ret).is_some(), "{name} {id}: {ret}");
        }
    }
}
