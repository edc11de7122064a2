//! The signatures the checker resolves a call with: its own table of the
//! functions whose misuse it reports, and, for the calls that table does
//! not check, the result type cel-go gives from the apiserver's signatures
//! (the overload table of the cost estimate).

use super::ty::Type;

/// The type cel-go's checker gives a call the table of [`overloads`] does
/// not check (`uint()`, `flatten()`, `lists.range()`, an operator on
/// `dyn`), from the overload table of the cost estimate
/// (`cost/overloads.rs`, the apiserver's signatures): the common result of
/// every overload the argument types fit, else `dyn`. It is never an error
/// by itself: a call no listed overload fits is left to run time, so a
/// signature missing from that table can make a result `dyn`, never a
/// refusal cel-go would not give.
pub(super) fn signature_result<'s>(
    name: &str,
    receiver: Option<&Type<'s>>,
    args: &[Type<'s>],
) -> Type<'s> {
    use crate::cel::cost::overloads::{T, resolve};
    fn to_t(t: &Type) -> T {
        match t {
            Type::Dyn | Type::Object { .. } => T::Dyn,
            Type::Null => T::Null,
            Type::Bool => T::Bool,
            Type::Int => T::Int,
            Type::Uint => T::Uint,
            Type::Double => T::Double,
            Type::String => T::String,
            Type::Bytes => T::Bytes,
            Type::Timestamp => T::Timestamp,
            Type::Duration => T::Duration,
            Type::List(e) => T::List(Box::new(to_t(e))),
            Type::Map(k, v) => T::Map(Box::new(to_t(k)), Box::new(to_t(v))),
            Type::Optional(e) => T::Opt(Box::new(to_t(e))),
            Type::Opaque(n @ ("net.IP" | "net.CIDR")) => T::Opaque(n),
            Type::Opaque(n) => T::Struct(n),
        }
    }
    fn from_t<'s>(t: &T) -> Type<'s> {
        match t {
            T::Null => Type::Null,
            T::Bool => Type::Bool,
            T::Int => Type::Int,
            T::Uint => Type::Uint,
            T::Double => Type::Double,
            T::String => Type::String,
            T::Bytes => Type::Bytes,
            T::Timestamp => Type::Timestamp,
            T::Duration => Type::Duration,
            T::List(e) => Type::List(Box::new(from_t(e))),
            T::Map(k, v) => Type::Map(Box::new(from_t(k)), Box::new(from_t(v))),
            T::Opt(e) => Type::Optional(Box::new(from_t(e))),
            T::Struct(n) | T::Opaque(n) => Type::Opaque(n),
            T::Dyn | T::Type | T::Param(_) | T::Free => Type::Dyn,
        }
    }
    let all: Vec<T> = receiver.into_iter().chain(args).map(to_t).collect();
    match resolve(name, receiver.is_some(), &all) {
        Some(r) if !r.ids.is_empty() => from_t(&r.result),
        _ => Type::Dyn,
    }
}

/// What a function call's receiver or argument may be.
#[derive(Clone, Copy)]
pub(super) enum P {
    Any,
    S,
    I,
    B,
    List,
    ListOfS,
    /// A list, a map or an object: something with a size.
    Sized,
    Ts,
    Dur,
    U,
    D,
    Bytes,
    Opaque(&'static str),
}

impl P {
    pub(super) fn admits(self, t: &Type) -> bool {
        if t.is_dyn() {
            return true;
        }
        // cel-go's checker lets `null` be a timestamp, a duration or an
        // opaque value (its legacy nullness).
        if matches!(t, Type::Null) {
            return matches!(self, P::Any | P::Ts | P::Dur | P::Opaque(_));
        }
        match self {
            P::Any => true,
            P::S => matches!(t, Type::String),
            P::I => matches!(t, Type::Int),
            P::B => matches!(t, Type::Bool),
            P::List => matches!(t, Type::List(_)),
            P::ListOfS => match t {
                Type::List(e) => matches!(**e, Type::Dyn | Type::String),
                _ => false,
            },
            P::Sized => matches!(
                t,
                Type::String | Type::Bytes | Type::List(_) | Type::Map(..) | Type::Object { .. }
            ),
            P::Ts => matches!(t, Type::Timestamp),
            P::U => matches!(t, Type::Uint),
            P::D => matches!(t, Type::Double),
            P::Bytes => matches!(t, Type::Bytes),
            P::Dur => matches!(t, Type::Duration),
            P::Opaque(name) => matches!(t, Type::Opaque(n) if *n == name),
        }
    }
}

/// What a call returns.
#[derive(Clone, Copy)]
pub(super) enum R {
    Bool,
    Int,
    Double,
    S,
    Bytes,
    ListOfS,
    Ts,
    Dur,
    Opaque(&'static str),
    /// The receiver's type.
    Same,
    /// The receiver list's element type.
    Elem,
    /// An optional of the receiver list's element type.
    OptElem,
}

/// One overload: receiver (`None`: a global call), arguments, result.
pub(super) type Overload = (Option<P>, &'static [P], R);

/// The overloads of the functions the checker knows; a function not
/// listed is not checked (its result is `dyn`).
pub(super) fn overloads(name: &str) -> &'static [Overload] {
    use P::*;
    const Q: P = P::Opaque("kubernetes.Quantity");
    const URL: P = P::Opaque("kubernetes.URL");
    const IP: P = P::Opaque("net.IP");
    const CIDR: P = P::Opaque("net.CIDR");
    const SEMVER: P = P::Opaque("kubernetes.Semver");
    match name {
        "size" => &[(None, &[Sized], R::Int), (Some(Sized), &[], R::Int)],
        "contains" | "startsWith" | "endsWith" => &[(Some(S), &[S], R::Bool)],
        "matches" => &[(Some(S), &[S], R::Bool), (None, &[S, S], R::Bool)],
        "lowerAscii" | "upperAscii" | "trim" => &[(Some(S), &[], R::S)],
        "replace" => &[(Some(S), &[S, S], R::S), (Some(S), &[S, S, I], R::S)],
        "split" => &[(Some(S), &[S], R::ListOfS), (Some(S), &[S, I], R::ListOfS)],
        "substring" => &[(Some(S), &[I], R::S), (Some(S), &[I, I], R::S)],
        "charAt" => &[(Some(S), &[I], R::S)],
        "indexOf" | "lastIndexOf" => &[
            (Some(S), &[S], R::Int),
            (Some(S), &[S, I], R::Int),
            (Some(List), &[Any], R::Int),
        ],
        "join" => &[(Some(ListOfS), &[], R::S), (Some(ListOfS), &[S], R::S)],
        "format" => &[(Some(S), &[List], R::S)],
        "find" => &[(Some(S), &[S], R::S)],
        "findAll" => &[(Some(S), &[S], R::ListOfS), (Some(S), &[S, I], R::ListOfS)],
        // Lists only: Kubernetes' strings extension is version 2, which has
        // no `reverse()` on strings (cel-go refuses `'abc'.reverse()`).
        "reverse" => &[(Some(List), &[], R::Same)],
        "isSorted" => &[(Some(List), &[], R::Bool)],
        "sum" => &[(Some(List), &[], R::Elem)],
        "sort" | "distinct" => &[(Some(List), &[], R::Same)],
        "slice" => &[(Some(List), &[I, I], R::Same)],
        "first" | "last" => &[(Some(List), &[], R::OptElem)],
        "int" => &[(None, &[Any], R::Int)],
        // The result of `all` and `exists` (see `macros.rs`).
        "@katalog_result" => &[(None, &[Any], R::Bool)],
        "bool" => &[(None, &[Any], R::Bool)],
        "double" => &[(None, &[Any], R::Double)],
        // cel-go's, and Kubernetes' IP and CIDR libraries'.
        "string" => &[
            (None, &[S], R::S),
            (None, &[I], R::S),
            (None, &[U], R::S),
            (None, &[D], R::S),
            (None, &[B], R::S),
            (None, &[Bytes], R::S),
            (None, &[Ts], R::S),
            (None, &[Dur], R::S),
            (None, &[IP], R::S),
            (None, &[CIDR], R::S),
        ],
        "bytes" => &[(None, &[Any], R::Bytes)],
        "duration" => &[(None, &[S], R::Dur), (None, &[Dur], R::Dur)],
        "timestamp" => &[
            (None, &[S], R::Ts),
            (None, &[Ts], R::Ts),
            (None, &[I], R::Ts),
        ],
        "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" => &[(Some(Ts), &[], R::Int), (Some(Ts), &[S], R::Int)],
        "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => &[
            (Some(Ts), &[], R::Int),
            (Some(Ts), &[S], R::Int),
            (Some(Dur), &[], R::Int),
        ],
        "quantity" => &[(None, &[S], R::Opaque("kubernetes.Quantity"))],
        "isQuantity" | "isURL" | "isIP" | "isCIDR" | "isSemver" => {
            &[(None, &[S], R::Bool), (None, &[S, B], R::Bool)]
        }
        "isInteger" => &[(Some(Q), &[], R::Bool)],
        "asInteger" => &[(Some(Q), &[], R::Int)],
        "asApproximateFloat" => &[(Some(Q), &[], R::Double)],
        "add" | "sub" => &[(Some(Q), &[Q], R::Same), (Some(Q), &[I], R::Same)],
        "isGreaterThan" | "isLessThan" => {
            &[(Some(Q), &[Q], R::Bool), (Some(SEMVER), &[SEMVER], R::Bool)]
        }
        "compareTo" => &[(Some(Q), &[Q], R::Int), (Some(SEMVER), &[SEMVER], R::Int)],
        "url" => &[(None, &[S], R::Opaque("kubernetes.URL"))],
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" => {
            &[(Some(URL), &[], R::S)]
        }
        "ip" => &[
            (None, &[S], R::Opaque("net.IP")),
            (Some(CIDR), &[], R::Opaque("net.IP")),
        ],
        "cidr" => &[(None, &[S], R::Opaque("net.CIDR"))],
        "family" => &[(Some(IP), &[], R::Int)],
        "containsIP" => &[(Some(CIDR), &[S], R::Bool), (Some(CIDR), &[IP], R::Bool)],
        "containsCIDR" => &[(Some(CIDR), &[S], R::Bool), (Some(CIDR), &[CIDR], R::Bool)],
        "prefixLength" => &[(Some(CIDR), &[], R::Int)],
        "masked" => &[(Some(CIDR), &[], R::Same)],
        "semver" => &[
            (None, &[S], R::Opaque("kubernetes.Semver")),
            (None, &[S, B], R::Opaque("kubernetes.Semver")),
        ],
        "major" | "minor" | "patch" => &[(Some(SEMVER), &[], R::Int)],
        _ => &[],
    }
}
