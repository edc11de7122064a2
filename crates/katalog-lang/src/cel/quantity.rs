//! Kubernetes' quantity library with `isInteger()` and `asInteger()` as
//! the kube-apiserver answers them.
//!
//! k8s.io/apiserver's `isInteger` and `asInteger` call apimachinery's
//! `Quantity.AsInt64`, which succeeds only when the quantity is held on
//! its int64 fast path (`int64Amount`) at a scale of zero or more:
//! `quantity('1.5Gi')`, `quantity('1.0')` and `quantity('1000m')` are held
//! otherwise (as an `inf.Dec`, or at a negative scale), so `isInteger()` is
//! false and `asInteger()` an error, though kube-cel's exact value is
//! whole. The representation depends on how the quantity was written and
//! on the `add` / `sub` that made it, so a quantity here is kube-cel's
//! value (which every other function works on) with apimachinery's
//! int64 form beside it, [`Quantity::fast`].

use std::sync::Arc;

use kube_cel::cel::objects::{Opaque, OpaqueEq};
use kube_cel::cel::{ExecutionError, FunctionContext, Value};

use super::strict::{StrictFunction, call_registered, resolved_args};

/// The functions on quantities this module wraps (besides `quantity`).
pub(super) const METHODS: [&str; 9] = [
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
];

/// A quantity: kube-cel's value, and apimachinery's `int64Amount` (value,
/// scale) when the quantity is held that way (`None`: an `inf.Dec`).
#[derive(Debug)]
struct Quantity {
    inner: Value,
    fast: Option<(i64, i32)>,
}

impl OpaqueEq for Quantity {
    fn opaque_eq(&self, other: &dyn Opaque) -> bool {
        other
            .downcast_ref::<Quantity>()
            .is_some_and(|o| o.inner == self.inner)
    }
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

fn downcast(v: &Value) -> Option<&Quantity> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Quantity>(),
        _ => None,
    }
}

/// `quantity(s)`: kube-cel's parse, and apimachinery's fast path of
/// `ParseQuantity`.
pub(super) fn quantity(ftx: &mut FunctionContext) -> Result<Value, ExecutionError> {
    let args = resolved_args(ftx)?;
    let fast = match args.as_slice() {
        [Value::String(s)] => parse_fast(s),
        _ => None,
    };
    let inner = call_registered("quantity", None, args)?;
    Ok(Value::Opaque(Arc::new(Quantity { inner, fast })))
}

/// A function of [`METHODS`]: on a quantity kube-cel's, given kube-cel's
/// values; `isInteger` and `asInteger` from the int64 form, `add` and
/// `sub` keeping it as apimachinery does.
pub(super) fn method(name: &'static str) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        let this = ftx.this.clone();
        let Some(q) = this.as_ref().and_then(downcast) else {
            return call_registered(name, this, args);
        };
        match name {
            "isInteger" if args.is_empty() => {
                return Ok(Value::Bool(q.fast.and_then(as_int64).is_some()));
            }
            "asInteger" if args.is_empty() => {
                return q
                    .fast
                    .and_then(as_int64)
                    .map(Value::Int)
                    .ok_or_else(|| ftx.error("cannot convert value to integer"));
            }
            _ => {}
        }
        let other_fast = match args.as_slice() {
            [Value::Int(i)] => Some(Some((*i, 0))),
            [v] => downcast(v).map(|o| o.fast),
            _ => None,
        };
        let unwrapped = args
            .iter()
            .map(|a| downcast(a).map_or_else(|| a.clone(), |o| o.inner.clone()))
            .collect();
        let result = call_registered(name, Some(q.inner.clone()), unwrapped)?;
        let fast = match (name, other_fast) {
            ("add", Some(other)) => q.fast.zip(other).and_then(|(a, b)| add(a, b)),
            ("sub", Some(other)) => q
                .fast
                .zip(other)
                .and_then(|(a, (v, s))| add(a, (v.wrapping_neg(), s))),
            _ => return Ok(result),
        };
        Ok(Value::Opaque(Arc::new(Quantity {
            inner: result,
            fast,
        })))
    })
}

/// apimachinery's `int64Amount.AsInt64`.
fn as_int64((value, scale): (i64, i32)) -> Option<i64> {
    match scale {
        0 => Some(value),
        s if s < 0 => None,
        s => scale_up(value, s),
    }
}

/// `value * 10^scale`, `None` on overflow (`positiveScaleInt64`).
fn scale_up(value: i64, scale: i32) -> Option<i64> {
    if value == 0 {
        return Some(0);
    }
    // Past 10^18 every non-zero value overflows: the loop stops there.
    (0..scale).try_fold(value, |v, _| v.checked_mul(10))
}

/// apimachinery's `int64Amount.Add`: `None` when the sum leaves int64 (the
/// quantity becomes an `inf.Dec`).
fn add(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    if b.0 == 0 {
        return Some(a);
    }
    if a.0 == 0 {
        return Some(b);
    }
    let (value, scale) = if a.1 == b.1 {
        (a.0.checked_add(b.0)?, a.1)
    } else if a.1 > b.1 {
        (scale_up(a.0, a.1.checked_sub(b.1)?)?.checked_add(b.0)?, b.1)
    } else {
        (a.0.checked_add(scale_up(b.0, b.1.checked_sub(a.1)?)?)?, a.1)
    };
    Some((value, scale))
}

/// The `int64Amount` of apimachinery's `ParseQuantity(s)` when it takes
/// its fast path, `None` otherwise (or when `s` is not a quantity).
fn parse_fast(s: &str) -> Option<(i64, i32)> {
    if s == "0" {
        return Some((0, 0));
    }
    let (positive, rest) = match s.as_bytes().first()? {
        b'-' => (false, &s[1..]),
        b'+' => (true, &s[1..]),
        _ => (true, s),
    };
    let rest = rest.trim_start_matches('0');
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(rest);
    let (num, rest) = rest.split_at(n);
    let num = if num.is_empty() { "0" } else { num };
    let (denom, suffix) = match rest.strip_prefix('.') {
        Some(after) => after.split_at(digits(after)),
        None => ("", rest),
    };
    let (binary, exponent) = suffix_exponent(suffix)?;
    let places = i32::try_from(num.len() + denom.len()).ok()?;
    let (scale, precision, mantissa) = if binary {
        if denom.is_empty() {
            // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1.
            let len = i32::try_from(num.len()).ok()?;
            (0, 15 - len - exponent * 3 / 10 - 1, 1_i64 << exponent)
        } else {
            (0, -1, 1)
        }
    } else {
        (exponent, 18 - places, 1)
    };
    if precision < 0 {
        return None;
    }
    let scale = scale.checked_sub(i32::try_from(denom.len()).ok()?)?;
    if scale < -9 {
        return None;
    }
    let value: i64 = format!("{num}{denom}").parse().ok()?;
    let result = value.checked_mul(mantissa)?;
    Some((if positive { result } else { -result }, scale))
}

/// apimachinery's suffixes: whether binary, and the exponent (of 2 or 10).
fn suffix_exponent(suffix: &str) -> Option<(bool, i32)> {
    Some(match suffix {
        "" => (false, 0),
        "n" => (false, -9),
        "u" => (false, -6),
        "m" => (false, -3),
        "k" => (false, 3),
        "M" => (false, 6),
        "G" => (false, 9),
        "T" => (false, 12),
        "P" => (false, 15),
        "E" => (false, 18),
        "Ki" => (true, 10),
        "Mi" => (true, 20),
        "Gi" => (true, 30),
        "Ti" => (true, 40),
        "Pi" => (true, 50),
        "Ei" => (true, 60),
        s => {
            let exp = s.strip_prefix(['e', 'E'])?;
            (false, exp.parse::<i32>().ok()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{add, as_int64, parse_fast};

    #[test]
    fn parse_fast_follows_apimachinery() {
        assert_eq!(parse_fast("50k"), Some((50, 3)));
        assert_eq!(parse_fast("1.5"), Some((15, -1)));
        assert_eq!(parse_fast("1.5Gi"), None);
        assert_eq!(parse_fast("2Gi"), Some((2 << 30, 0)));
        assert_eq!(parse_fast("-007"), Some((-7, 0)));
        assert_eq!(parse_fast("1n"), Some((1, -9)));
        assert_eq!(parse_fast("1.5n"), None);
        assert_eq!(parse_fast("9999999999999999999999999999999999999G"), None);
        // An exponent at the edge of i32 is no overflow.
        assert_eq!(parse_fast("1.5e-2147483648"), None);
        assert_eq!(parse_fast("1e2147483647"), Some((1, i32::MAX)));
        assert_eq!(as_int64((0, i32::MAX)), Some(0));
        assert_eq!(as_int64((1, i32::MAX)), None);
        assert_eq!(add((1, i32::MAX), (1, -9)), None);
        assert_eq!(as_int64((50, 3)), Some(50_000));
        assert_eq!(as_int64((15, -1)), None);
        assert_eq!(add((50, 3), (20, 0)), Some((50_020, 0)));
        assert_eq!(add((i64::MAX, 0), (1, 0)), None);
    }
}
