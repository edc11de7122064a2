//! Durations and timestamps in cel-go's ranges.
//!
//! cel-go keeps a duration in an int64 of nanoseconds (about ±292 years)
//! and a timestamp between 0001-01-01T00:00:00Z and
//! 9999-12-31T23:59:59.999999999Z. A value outside is an error where it is
//! made (`duration('320000000000s')`, `timestamp('0000-01-01T00:00:00Z')`:
//! the kube-apiserver refuses such literals at compile time) or computed
//! (`duration('9000000000s') + duration('9000000000s')` is "integer
//! overflow", `duration('1s') + timestamp('9999-12-31T23:59:59Z')`
//! "timestamp overflow", and the difference of two timestamps more than
//! 292 years apart "integer overflow"). cel 0.13 keeps both in chrono's far
//! wider ranges and checks only `timestamp ± duration`.
//!
//! `duration()` and `timestamp()` check what they make ([`duration`],
//! [`timestamp`], called by the parent module's overrides). The arithmetic
//! is cel 0.13's own (`_+_` and `_-_` are built into its interpreter), so
//! [`wrap_arithmetic`] puts each `+` and `-` of an expression that makes
//! durations or timestamps under a call of [`IN_RANGE`], which passes a
//! value in range through and fails on one out of range. Only such
//! expressions: the values a rule binds are JSON, so a duration or a
//! timestamp comes from one of those calls, never from a variable.

use kube_cel::cel::common::ast::{CallExpr, Expr, operators};
use kube_cel::cel::{ExecutionError, FunctionContext, IdedExpr, Value};

use super::ast::{children, children_mut, max_id};

/// The call [`wrap_arithmetic`] puts around `a + b` and `a - b`
/// ([`in_range`]).
pub(super) const IN_RANGE: &str = "@katalog_in_range";

/// The calls that make a duration or a timestamp.
const MAKERS: &[&str] = &["duration", "timestamp", super::MESSAGE_FUNCTION];

/// Unix seconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
const SECONDS: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// Whether `t` is in cel-go's timestamp range.
pub(super) fn timestamp_in_range(t: &chrono::DateTime<chrono::FixedOffset>) -> bool {
    SECONDS.contains(&t.timestamp())
}

/// Whether `d` is in cel-go's duration range (an int64 of nanoseconds).
pub(super) fn duration_in_range(d: &chrono::Duration) -> bool {
    d.num_nanoseconds().is_some()
}

/// The nanoseconds of a duration as Go's `time.ParseDuration` reads it
/// (`1h30m`, `-1.5s`, `320000000000s`), unbounded; `None` when it does
/// not read it (cel's own parser reports the error then).
pub(super) fn go_duration_nanos(text: &str) -> Option<i128> {
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let whole_len = digits(rest);
        let whole: i128 = if whole_len == 0 {
            0
        } else {
            rest[..whole_len].parse().ok()?
        };
        rest = &rest[whole_len..];
        let (mut fraction, mut scale) = (0i128, 1i128);
        let mut fraction_len = 0;
        if let Some(after) = rest.strip_prefix('.') {
            fraction_len = digits(after);
            // Digits past the nanosecond do not change the result.
            for d in after[..fraction_len].bytes().take(30) {
                fraction = fraction * 10 + i128::from(d - b'0');
                scale *= 10;
            }
            rest = &after[fraction_len..];
        }
        if whole_len == 0 && fraction_len == 0 {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let unit: i128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total = total.checked_add(
            whole
                .checked_mul(unit)?
                .checked_add(fraction * unit / scale)?,
        )?;
    }
    Some(if negative { -total } else { total })
}

/// `value`, a duration or a timestamp just made from a string, or the
/// error cel-go gives for it out of range.
pub(super) fn made(ftx: &FunctionContext, value: Value) -> Result<Value, ExecutionError> {
    match &value {
        Value::Duration(d) if !duration_in_range(d) => {
            Err(ftx.error("invalid duration argument: out of range"))
        }
        Value::Timestamp(t) if !timestamp_in_range(t) => {
            Err(ftx.error("invalid timestamp argument: out of range"))
        }
        _ => Ok(value),
    }
}

/// [`IN_RANGE`]: the `a + b` or `a - b` it is given, evaluated, unless
/// that is a duration or a timestamp out of range (cel-go's messages).
/// The operands are evaluated here and added as the interpreter adds
/// them, except `duration + timestamp`, which cel 0.13's interpreter
/// has no overload for (it has `timestamp + duration`).
pub(super) fn in_range(ftx: &mut FunctionContext) -> Result<Value, ExecutionError> {
    let value = match ftx.args {
        [
            IdedExpr {
                expr: Expr::Call(call),
                ..
            },
        ] if call.target.is_none() && call.args.len() == 2 => {
            let a = Value::resolve(&call.args[0], ftx.ptx)?;
            let b = Value::resolve(&call.args[1], ftx.ptx)?;
            match (call.func_name.as_str(), a, b) {
                (operators::ADD, Value::Duration(d), Value::Timestamp(t))
                | (operators::ADD, Value::Timestamp(t), Value::Duration(d)) => t
                    .checked_add_signed(d)
                    .map(Value::Timestamp)
                    .ok_or_else(|| ftx.error("timestamp overflow"))?,
                (operators::SUBSTRACT, Value::Timestamp(t), Value::Duration(d)) => t
                    .checked_sub_signed(d)
                    .map(Value::Timestamp)
                    .ok_or_else(|| ftx.error("timestamp overflow"))?,
                (op, a, b) => super::strict::call_registered(op, None, vec![a, b])?,
            }
        }
        [arg] => Value::resolve(arg, ftx.ptx)?,
        _ => return Err(ftx.error("expects one argument")),
    };
    match &value {
        Value::Duration(d) if !duration_in_range(d) => Err(ftx.error("integer overflow")),
        Value::Timestamp(t) if !timestamp_in_range(t) => Err(ftx.error("timestamp overflow")),
        _ => Ok(value),
    }
}

/// Puts every `a + b` and `a - b` of `expr` under [`IN_RANGE`] when `expr`
/// calls one of [`MAKERS`] (see the module documentation); the new nodes
/// get ids above every id in `expr`.
pub(super) fn wrap_arithmetic(expr: &mut IdedExpr) {
    if !makes_time(expr) {
        return;
    }
    let mut next = max_id(expr).saturating_add(1);
    wrap(expr, &mut next);
}

fn makes_time(expr: &IdedExpr) -> bool {
    if let Expr::Call(call) = &expr.expr
        && call.target.is_none()
        && MAKERS.contains(&call.func_name.as_str())
    {
        return true;
    }
    children(expr).into_iter().any(makes_time)
}

fn wrap(expr: &mut IdedExpr, next: &mut u64) {
    for child in children_mut(expr) {
        wrap(child, next);
    }
    let Expr::Call(call) = &expr.expr else {
        return;
    };
    // Not a macro's step (`@result + [x]`): never a duration.
    let arithmetic = call.target.is_none()
        && call.args.len() == 2
        && matches!(
            call.func_name.as_str(),
            operators::ADD | operators::SUBSTRACT
        )
        && !matches!(&call.args[0].expr, Expr::Ident(n) if n.starts_with('@'));
    if arithmetic {
        let inner = std::mem::take(expr);
        *expr = IdedExpr {
            id: *next,
            expr: Expr::Call(CallExpr {
                func_name: IN_RANGE.to_owned(),
                target: None,
                args: vec![inner],
            }),
        };
        *next = next.saturating_add(1);
    }
}
