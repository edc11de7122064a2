//! Library functions as cel-go v0.26 has them where cel 0.13 or kube-cel
//! 0.8 differ (registered by the parent module's `base_context`, after
//! theirs, so they replace them):
//!
//! * `@katalog_sort_by(list, keys)` ([`SORT_BY`]), what the lists
//!   extension's `sortBy` macro becomes (`cel/macros.rs`): cel-go's
//!   `@sortByAssociatedKeys`, with its ordering and errors.
//! * `orValue` and `or` evaluate their argument only when the optional is
//!   empty, as cel-go's planner does.
//! * cel-go's math extension's bit operations (on ints and uints, a shift
//!   of 64 bits or more is 0) and `math.greatest` / `math.least`, comparing
//!   int, uint and double exactly as cel-go does.

use std::cmp::Ordering;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{ExecutionError, FunctionContext, Value};

use super::strict::{StrictFunction, no_overload, resolved_args};

/// `@katalog_sort_by(list, keys)`: the elements of `list` in the order
/// that sorts `keys` (one key per element), as cel-go's
/// `@sortByAssociatedKeys`.
pub(super) const SORT_BY: &str = "@katalog_sort_by";

/// [`SORT_BY`]. The keys must all be of the type of the first, one of
/// cel-go's comparable types ("list elements must have the same type",
/// "list elements must be comparable"). Go's `sort.Slice` sorts up to 12
/// elements by insertion, which keeps equal keys in their order; longer
/// lists are sorted stably here (Go's pattern-defeating quicksort may
/// reorder elements with equal keys).
pub(super) fn sort_by(
    ftx: &FunctionContext,
    list: Value,
    keys: Value,
) -> Result<Value, ExecutionError> {
    let (Value::List(items), Value::List(keys)) = (&list, &keys) else {
        return Err(no_overload(ftx, Some(&list), &[keys]));
    };
    if items.len() != keys.len() {
        return Err(ftx.error(format!(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys \
             list, but got {} and {} elements respectively",
            items.len(),
            keys.len()
        )));
    }
    let Some(first) = keys.first() else {
        return Ok(list);
    };
    if !comparable(first) {
        return Err(ftx.error("list elements must be comparable"));
    }
    if keys
        .iter()
        .any(|k| std::mem::discriminant(k) != std::mem::discriminant(first))
    {
        return Err(ftx.error("list elements must have the same type"));
    }
    let less = |a: usize, b: usize| key_order(&keys[a], &keys[b]) == Ordering::Less;
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if order.len() <= 12 {
        // Go's insertionSortLessFunc.
        for i in 1..order.len() {
            let mut j = i;
            while j > 0 && less(order[j], order[j - 1]) {
                order.swap(j, j - 1);
                j -= 1;
            }
        }
    } else {
        order.sort_by(|&a, &b| key_order(&keys[a], &keys[b]));
    }
    Ok(Value::List(Arc::new(
        order.into_iter().map(|i| items[i].clone()).collect(),
    )))
}

/// cel-go's comparable types (those with `traits.Comparer`).
fn comparable(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_)
            | Value::UInt(_)
            | Value::Float(_)
            | Value::Bool(_)
            | Value::String(_)
            | Value::Bytes(_)
            | Value::Duration(_)
            | Value::Timestamp(_)
    )
}

/// The order of two keys of one type; a NaN is neither less nor greater
/// than anything (cel-go's comparison fails, which `sort.Slice` reads as
/// "not less"), and equal to another NaN, so the order is total.
fn key_order(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => match (x.is_nan(), y.is_nan()) {
            (false, false) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
        },
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        _ => a.partial_cmp(b).unwrap_or(Ordering::Equal),
    }
}

/// `opt.orValue(x)`: the optional's value, else `x`, evaluated only then;
/// a receiver that is not an optional is the result (cel-go's
/// `evalOptionalOrValue`).
pub(super) fn or_value(
    ftx: &FunctionContext,
    This(this): This<Value>,
) -> Result<Value, ExecutionError> {
    match optional(&this) {
        Some(Some(v)) => Ok(v.clone()),
        Some(None) => only_arg(ftx),
        None => Ok(this),
    }
}

/// `opt.or(other)`: the optional if it has a value, else `other`,
/// evaluated only then (cel-go's `evalOptionalOr`).
pub(super) fn or(ftx: &FunctionContext, This(this): This<Value>) -> Result<Value, ExecutionError> {
    match optional(&this) {
        Some(None) => only_arg(ftx),
        _ => Ok(this),
    }
}

/// `Some(value)` of an optional, `None` for any other value.
fn optional(v: &Value) -> Option<Option<&Value>> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<OptionalValue>().map(OptionalValue::value),
        _ => None,
    }
}

/// The call's one argument, evaluated.
fn only_arg(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    match ftx.args {
        [arg] => Value::resolve(arg, ftx.ptx),
        args => Err(ftx.error(format!(
            "{} takes one argument, got {}",
            ftx.name,
            args.len()
        ))),
    }
}

/// `math.bitAnd`, `math.bitOr`, `math.bitXor` on two ints or two uints.
pub(super) fn bit_op(name: &'static str) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let [a, b] = two_args(ftx)?;
        // The same bits whether they are read as an int or a uint.
        let op = |x: u64, y: u64| match name {
            "math.bitAnd" => x & y,
            "math.bitOr" => x | y,
            _ => x ^ y,
        };
        #[allow(clippy::cast_sign_loss, clippy::cast_possible_wrap)]
        match (&a, &b) {
            (Value::Int(x), Value::Int(y)) => Ok(Value::Int(op(*x as u64, *y as u64) as i64)),
            (Value::UInt(x), Value::UInt(y)) => Ok(Value::UInt(op(*x, *y))),
            _ => Err(no_overload(ftx, None, &[a, b])),
        }
    })
}

/// The two arguments of a call, evaluated.
fn two_args(ftx: &FunctionContext) -> Result<[Value; 2], ExecutionError> {
    let args = resolved_args(ftx)?;
    let count = args.len();
    <[Value; 2]>::try_from(args).map_err(|_| ExecutionError::InvalidArgumentCount {
        expected: 2,
        actual: count,
    })
}

/// `math.bitNot` of an int or a uint.
pub(super) fn bit_not(ftx: &FunctionContext, v: Value) -> Result<Value, ExecutionError> {
    match v {
        Value::Int(x) => Ok(Value::Int(!x)),
        Value::UInt(x) => Ok(Value::UInt(!x)),
        v => Err(no_overload(ftx, None, &[v])),
    }
}

/// `math.bitShiftLeft` / `math.bitShiftRight` of an int or a uint by an
/// int, as Go shifts: by 64 bits or more the result is 0, and an int is
/// shifted right as unsigned (no sign extension), as cel-go does.
pub(super) fn bit_shift(left: bool) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let [v, bits] = two_args(ftx)?;
        let shift = |x: u64, bits: i64| -> u64 {
            match u32::try_from(bits) {
                Ok(b) if b < 64 => {
                    if left {
                        x << b
                    } else {
                        x >> b
                    }
                }
                _ => 0,
            }
        };
        match (&v, &bits) {
            (Value::Int(_) | Value::UInt(_), Value::Int(b)) if *b < 0 => {
                Err(ftx.error(format!("{}() negative offset: {b}", ftx.name)))
            }
            (Value::Int(x), Value::Int(b)) =>
            {
                #[allow(clippy::cast_sign_loss, clippy::cast_possible_wrap)]
                Ok(Value::Int(shift(*x as u64, *b) as i64))
            }
            (Value::UInt(x), Value::Int(b)) => Ok(Value::UInt(shift(*x, *b))),
            _ => Err(no_overload(ftx, None, &[v, bits])),
        }
    })
}

/// `math.greatest` (`greatest` true) and `math.least`: of its arguments,
/// or of the one list argument's elements, numbers of any of the three
/// types compared exactly; the first wins a tie (cel-go's `math.@max` and
/// `math.@min`).
pub(super) fn extremum(greatest: bool) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        let args = resolved_args(ftx)?;
        let op = if greatest { "math.@max" } else { "math.@min" };
        let values: &[Value] = match args.as_slice() {
            [Value::List(items)] => {
                if items.is_empty() {
                    return Err(ftx.error(format!("{op}(list) argument must not be empty")));
                }
                items
            }
            args => args,
        };
        let number = |v: &Value| matches!(v, Value::Int(_) | Value::UInt(_) | Value::Float(_));
        if values.is_empty() || !values.iter().all(number) {
            return Err(no_overload(ftx, None, &args));
        }
        let mut best = &values[0];
        for v in &values[1..] {
            let order = compare_numbers(best, v)
                .ok_or_else(|| ftx.error(format!("NaN values cannot be ordered: {op}")))?;
            let replace = if greatest {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            if order == replace {
                best = v;
            }
        }
        Ok(best.clone())
    })
}

/// `a` against `b` as cel-go's `Compare` of numbers: exact across int,
/// uint and double; `None` (an error) when `a` is NaN, or a double
/// compared with NaN; an int or a uint compared with NaN is equal.
#[allow(clippy::cast_precision_loss)]
fn compare_numbers(a: &Value, b: &Value) -> Option<Ordering> {
    let double_int = |d: f64, i: i64| -> Ordering {
        if d < -9_223_372_036_854_775_808.0 {
            Ordering::Less
        } else if d > 9_223_372_036_854_775_807.0 {
            Ordering::Greater
        } else {
            d.partial_cmp(&(i as f64)).unwrap_or(Ordering::Equal)
        }
    };
    let double_uint = |d: f64, u: u64| -> Ordering {
        if d < 0.0 {
            Ordering::Less
        } else if d > 18_446_744_073_709_551_615.0 {
            Ordering::Greater
        } else {
            d.partial_cmp(&(u as f64)).unwrap_or(Ordering::Equal)
        }
    };
    let int_uint = |i: i64, u: u64| -> Ordering {
        match u64::try_from(i) {
            Ok(i) => i.cmp(&u),
            Err(_) => Ordering::Less,
        }
    };
    Some(match (a, b) {
        (Value::Float(x), _) if x.is_nan() => return None,
        (Value::Float(_), Value::Float(y)) if y.is_nan() => return None,
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y)?,
        (Value::Float(x), Value::Int(y)) => double_int(*x, *y),
        (Value::Float(x), Value::UInt(y)) => double_uint(*x, *y),
        (Value::Int(x), Value::Float(y)) => double_int(*y, *x).reverse(),
        (Value::UInt(x), Value::Float(y)) => double_uint(*y, *x).reverse(),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::UInt(x), Value::UInt(y)) => x.cmp(y),
        (Value::Int(x), Value::UInt(y)) => int_uint(*x, *y),
        (Value::UInt(x), Value::Int(y)) => int_uint(*y, *x).reverse(),
        _ => return None,
    })
}
