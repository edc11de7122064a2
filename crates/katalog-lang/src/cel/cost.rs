//! The static cost of a CEL expression as the kube-apiserver estimates it:
//! cel-go's estimator (`checker/cost.go` of cel-go v0.26.0) with the
//! Kubernetes libraries' `CostEstimator` (`k8s.io/apiserver/pkg/cel/library/cost.go`
//! of v0.36.3) and the cost options of its base environment (a presence test,
//! `has(x.f)`, costs nothing; the lists extension's own estimators).
//!
//! The model, as cel-go's: reading a variable costs 1, a field of a map or
//! an object 1 (of a `dyn` value 0), a literal 0, making a list 10 and a map
//! 30, a call 1 plus its arguments, except the functions whose cost grows
//! with their input (string comparisons and concatenation, `contains`,
//! `startsWith`, `matches`, `in`, the Kubernetes string, regex, list, IP and
//! format functions: a tenth of a unit per character, a quarter per
//! character of a regex), `&&` and `||` their arguments only, and a
//! comprehension its range plus, per item, its condition and step. Each
//! cost is a range `[min, max]`: the size of a value is a range too, exact
//! for a literal, derived for a concatenation or a call's result, from the
//! schema where one is known, and unknown (`[0, 2^64-1]`) for a `dyn` value,
//! the case of every variable here; the sums and products saturate at
//! `2^64-1`.
//!
//! The estimate is computed on the parser's tree before katalog's own
//! macro expansion (`macros.rs` rewrites `all` and `exists` and the
//! two-variable comprehensions for its evaluators): the macros that cel
//! 0.13's parser leaves as calls are expanded here as cel-go expands them.
//! Types are inferred as far as the cost needs them (the overloads a call
//! may resolve to, the kind of a selected value, fixed-size scalars), with
//! every variable `dyn`, as the cel-go oracle declares them.

mod expand;
pub(super) mod overloads;

use std::collections::HashMap;

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, MapEntryExpr,
};

use super::ast::max_id;
use expand::{ACCU, expand};
use overloads::{T, resolve};

/// The apiserver's limit on a CRD validation rule's estimated cost
/// (`StaticEstimatedCostLimit` of `k8s.io/apiextensions-apiserver`).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// The apiserver's runtime cost limit of one evaluation
/// (`PerCallLimit` of `k8s.io/apiserver/pkg/apis/cel/config.go`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// The apiserver's runtime budget of all the expressions of one
/// ValidatingAdmissionPolicyBinding or custom resource (`RuntimeCELCostBudget`).
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;

const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
/// `cel.MaxNameFormatRegexSize` of the Kubernetes format library.
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;
/// `cel.MaxFormatSize`.
const MAX_FORMAT_SIZE: u64 = 64;

/// A cost or a size range, as cel-go's `CostEstimate` and `SizeEstimate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    pub min: u64,
    pub max: u64,
}

type Size = Estimate;

const UNKNOWN: Estimate = Estimate {
    min: 0,
    max: u64::MAX,
};

impl Estimate {
    const fn fixed(n: u64) -> Estimate {
        Estimate { min: n, max: n }
    }

    fn add(self, o: Estimate) -> Estimate {
        Estimate {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }

    fn mul(self, o: Estimate) -> Estimate {
        Estimate {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }

    fn factor(self, f: f64) -> Estimate {
        Estimate {
            min: by_factor(self.min, f),
            max: by_factor(self.max, f),
        }
    }

    fn union(self, o: Estimate) -> Estimate {
        Estimate {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// cel-go's `multiplyByCostFactor`: `ceil(x * f)`, saturating.
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
fn by_factor(x: u64, f: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && f > 0.0 && xf > u64::MAX as f64 / f {
        return u64::MAX;
    }
    let c = (xf * f).ceil();
    if c >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        c as u64
    }
}

/// An entry size: a container's kind, and the size of its keys (indices)
/// and values (`entrySizeEstimate`).
#[derive(Clone, Copy, Debug)]
struct EntrySize {
    list: bool,
    key: Size,
    val: Size,
}

fn union_entries(a: Option<EntrySize>, b: Option<EntrySize>) -> Option<EntrySize> {
    let (a, b) = (a?, b?);
    Some(EntrySize {
        list: a.list,
        key: a.key.union(b.key),
        val: a.val.union(b.val),
    })
}

struct Local {
    ty: T,
    size: Option<Size>,
    entry: Option<EntrySize>,
}

/// What the estimate could not follow as cel-go does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unsupported {
    /// A function the overload table does not have.
    Function(String),
    /// A message construction (`Foo{a: 1}`).
    Message,
}

/// The static cost estimate of a parsed expression (before katalog's macro
/// expansion), with every variable `dyn` and of unknown size.
pub fn estimate(parsed: &IdedExpr) -> Result<Estimate, Unsupported> {
    let mut next = max_id(parsed).saturating_add(1);
    let expr = expand(parsed, &mut next);
    let mut c = Coster {
        types: HashMap::new(),
        overloads: HashMap::new(),
        sizes: HashMap::new(),
        entries: HashMap::new(),
        locals: HashMap::new(),
        unsupported: None,
    };
    c.ty(&expr);
    c.locals.clear();
    let cost = c.cost(&expr);
    match c.unsupported {
        Some(u) => Err(u),
        None => Ok(cost),
    }
}

struct Coster {
    /// The inferred type of each node.
    types: HashMap<u64, T>,
    /// The overloads each call resolved to.
    overloads: HashMap<u64, Vec<&'static str>>,
    sizes: HashMap<u64, Size>,
    entries: HashMap<u64, EntrySize>,
    locals: HashMap<String, Vec<Local>>,
    unsupported: Option<Unsupported>,
}

fn call_name(call: &CallExpr) -> (String, bool) {
    // A namespaced function (`optional.none()`, `sets.contains(...)`) is
    // parsed as a member call on an identifier.
    if let Some(t) = &call.target
        && let Expr::Ident(ns) = &t.expr
    {
        let full = format!("{ns}.{}", call.func_name);
        if matches!(
            ns.as_str(),
            "optional" | "sets" | "lists" | "strings" | "format" | "jsonpatch" | "ip" | "cel"
        ) {
            return (full, false);
        }
    }
    (call.func_name.clone(), call.target.is_some())
}

impl Coster {
    fn push(&mut self, name: &str, local: Local) {
        self.locals.entry(name.to_owned()).or_default().push(local);
    }

    fn pop(&mut self, name: &str) {
        if let Some(v) = self.locals.get_mut(name) {
            v.pop();
        }
    }

    fn peek(&self, name: &str) -> Option<&Local> {
        self.locals.get(name).and_then(|v| v.last())
    }

    fn type_of(&self, e: &IdedExpr) -> T {
        self.types.get(&e.id).cloned().unwrap_or(T::Dyn)
    }

    /// The type pass: the type of each node and the overloads of each call.
    fn ty(&mut self, e: &IdedExpr) -> T {
        let t = match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => T::Bool,
                LiteralValue::Bytes(_) => T::Bytes,
                LiteralValue::Double(_) => T::Double,
                LiteralValue::Int(_) => T::Int,
                LiteralValue::Null => T::Null,
                LiteralValue::String(_) => T::String,
                LiteralValue::UInt(_) => T::Uint,
            },
            Expr::Ident(name) => self.peek(name).map_or(T::Dyn, |l| l.ty.clone()),
            Expr::Select(s) => {
                let operand = self.ty(&s.operand);
                if s.test {
                    T::Bool
                } else {
                    match operand {
                        T::Map(_, v) => *v,
                        _ => T::Dyn,
                    }
                }
            }
            Expr::List(l) => {
                let mut elem: Option<T> = None;
                for el in &l.elements {
                    let t = self.ty(el);
                    elem = Some(match elem {
                        None => t,
                        Some(prev) if prev == t => prev,
                        Some(_) => T::Dyn,
                    });
                }
                T::List(Box::new(elem.unwrap_or(T::Dyn)))
            }
            Expr::Map(m) => {
                let (mut k, mut v): (Option<T>, Option<T>) = (None, None);
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(MapEntryExpr { key, value, .. }) = &entry.expr {
                        let kt = self.ty(key);
                        let vt = self.ty(value);
                        k = Some(match k {
                            None => kt,
                            Some(p) if p == kt => p,
                            Some(_) => T::Dyn,
                        });
                        v = Some(match v {
                            None => vt,
                            Some(p) if p == vt => p,
                            Some(_) => T::Dyn,
                        });
                    }
                }
                T::Map(Box::new(k.unwrap_or(T::Dyn)), Box::new(v.unwrap_or(T::Dyn)))
            }
            Expr::Struct(_) => {
                self.unsupported.get_or_insert(Unsupported::Message);
                T::Dyn
            }
            Expr::Comprehension(c) => self.ty_comprehension(c),
            Expr::Call(call) => self.ty_call(e.id, call),
            Expr::Unspecified => T::Dyn,
        };
        self.types.insert(e.id, t.clone());
        t
    }

    fn ty_comprehension(&mut self, c: &ComprehensionExpr) -> T {
        let range = self.ty(&c.iter_range);
        let mut accu = self.ty(&c.accu_init);
        let (first, second) = match (&range, c.iter_var2.is_some()) {
            (T::List(e), false) => ((**e).clone(), T::Dyn),
            (T::List(e), true) => (T::Int, (**e).clone()),
            (T::Map(k, v), _) => ((**k).clone(), (**v).clone()),
            _ => (T::Dyn, T::Dyn),
        };
        let local = |ty: T| Local {
            ty,
            size: None,
            entry: None,
        };
        self.push(&c.iter_var, local(first));
        if let Some(v) = &c.iter_var2 {
            self.push(v, local(second));
        }
        for round in 0..2 {
            self.push(&c.accu_var, local(accu.clone()));
            self.ty(&c.loop_cond);
            let step = self.ty(&c.loop_step);
            self.pop(&c.accu_var);
            // An accumulator that starts empty takes the type of the step
            // (`[]` becomes the list of what `map` adds), as cel-go's
            // checker unifies them.
            let empty = matches!(&accu, T::List(e) if **e == T::Dyn)
                || matches!(&accu, T::Map(k, v) if **k == T::Dyn && **v == T::Dyn);
            if round == 0 && empty && step != accu && step != T::Dyn {
                accu = step;
            } else {
                break;
            }
        }
        if let Some(v) = &c.iter_var2 {
            self.pop(v);
        }
        self.pop(&c.iter_var);
        self.push(&c.accu_var, local(accu));
        let result = self.ty(&c.result);
        self.pop(&c.accu_var);
        result
    }

    fn ty_call(&mut self, id: u64, call: &CallExpr) -> T {
        let (name, member) = call_name(call);
        let mut args = Vec::new();
        if member && let Some(t) = &call.target {
            args.push(self.ty(t));
        }
        for a in &call.args {
            args.push(self.ty(a));
        }
        if name == "dyn" {
            return T::Dyn;
        }
        match resolve(&name, member, &args) {
            Some(r) => {
                self.overloads.insert(id, r.ids);
                r.result
            }
            None => {
                self.unsupported
                    .get_or_insert(Unsupported::Function(name.clone()));
                self.overloads.insert(id, vec!["unknown"]);
                T::Dyn
            }
        }
    }

    // The cost pass: cel-go's `coster`.

    fn cost(&mut self, e: &IdedExpr) -> Estimate {
        match &e.expr {
            Expr::Literal(_) => Estimate::fixed(0),
            Expr::Ident(_) => Estimate::fixed(1),
            Expr::Select(s) => {
                if s.test {
                    // has(): free in Kubernetes (`PresenceTestHasCost(false)`).
                    return self.cost(&s.operand);
                }
                let sum = self.cost(&s.operand);
                match self.type_of(&s.operand) {
                    T::Map(..) | T::Struct(_) => sum.add(Estimate::fixed(1)),
                    _ => sum,
                }
            }
            Expr::Call(call) => self.cost_call(e, call),
            Expr::List(l) => {
                let mut sum = Estimate::fixed(0);
                let mut item = Size {
                    min: if l.elements.is_empty() { 0 } else { u64::MAX },
                    max: 0,
                };
                for el in &l.elements {
                    sum = sum.add(self.cost(el));
                    item = item.union(self.size_or_unknown(el));
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        list: true,
                        key: Size::fixed(1),
                        val: item,
                    },
                );
                sum.add(Estimate::fixed(LIST_CREATE))
            }
            Expr::Map(m) => {
                let mut sum = Estimate::fixed(0);
                let empty = m.entries.is_empty();
                let start = Size {
                    min: if empty { 0 } else { u64::MAX },
                    max: 0,
                };
                let (mut key, mut val) = (start, start);
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(en) = &entry.expr {
                        sum = sum.add(self.cost(&en.key)).add(self.cost(&en.value));
                        key = key.union(self.size_or_unknown(&en.key));
                        val = val.union(self.size_or_unknown(&en.value));
                    }
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        list: false,
                        key,
                        val,
                    },
                );
                sum.add(Estimate::fixed(MAP_CREATE))
            }
            Expr::Struct(_) | Expr::Unspecified => Estimate::fixed(0),
            Expr::Comprehension(c) => {
                if is_bind(c) {
                    self.cost_bind(e, c)
                } else {
                    self.cost_comprehension(e, c)
                }
            }
        }
    }

    fn local(&mut self, name: &str, e: &IdedExpr) {
        let local = Local {
            ty: self.type_of(e),
            size: self.compute_size(e),
            entry: self.compute_entry(e),
        };
        self.push(name, local);
    }

    fn iter_local(&mut self, name: &str, range: &IdedExpr, key: bool) {
        let entry = self.compute_entry(range);
        let list = match entry {
            Some(en) => en.list,
            None => matches!(self.type_of(range), T::List(_)),
        };
        let size = entry.map(|en| if key { en.key } else { en.val });
        let ty = match (self.type_of(range), key, list) {
            (T::List(e), false, _) => *e,
            (T::List(_), true, _) => T::Int,
            (T::Map(k, _), true, _) => *k,
            (T::Map(_, v), false, _) => *v,
            _ => T::Dyn,
        };
        self.push(
            name,
            Local {
                ty,
                size,
                entry: None,
            },
        );
    }

    fn cost_comprehension(&mut self, e: &IdedExpr, c: &ComprehensionExpr) -> Estimate {
        let mut sum = self.cost(&c.iter_range).add(self.cost(&c.accu_init));
        self.local(&c.accu_var, &c.accu_init);
        let range_list = match self.compute_entry(&c.iter_range) {
            Some(en) => en.list,
            None => matches!(self.type_of(&c.iter_range), T::List(_)),
        };
        match &c.iter_var2 {
            Some(v) => {
                self.iter_local(&c.iter_var, &c.iter_range, true);
                self.iter_local(v, &c.iter_range, false);
            }
            None => self.iter_local(&c.iter_var, &c.iter_range, !range_list),
        }
        let loop_cost = self.cost(&c.loop_cond);
        let step_cost = self.cost(&c.loop_step);
        self.pop(&c.iter_var);
        if let Some(v) = &c.iter_var2 {
            self.pop(v);
        }
        sum = sum.add(self.cost(&c.result));
        self.pop(&c.accu_var);
        let range = self.size_or_unknown(&c.iter_range);
        sum = sum.add(range.mul(step_cost.add(loop_cost)));
        match &c.accu_init.expr {
            Expr::Literal(_) => {
                if let Some(s) = self.compute_size(&c.accu_init) {
                    self.sizes.insert(e.id, s);
                }
            }
            Expr::List(_) | Expr::Map(_) => {
                self.sizes.insert(e.id, range);
                if let Some(en) = self.compute_entry(&c.loop_step) {
                    self.entries.insert(e.id, en);
                }
            }
            _ => {}
        }
        sum
    }

    fn cost_bind(&mut self, e: &IdedExpr, c: &ComprehensionExpr) -> Estimate {
        let mut sum = self.cost(&c.iter_range).add(self.cost(&c.accu_init));
        self.local(&c.accu_var, &c.accu_init);
        sum = sum.add(self.cost(&c.result));
        self.pop(&c.accu_var);
        if let Some(s) = self.compute_size(&c.result) {
            self.sizes.insert(e.id, s);
        }
        if let Some(en) = self.compute_entry(&c.result) {
            self.entries.insert(e.id, en);
        }
        sum
    }

    fn cost_call(&mut self, e: &IdedExpr, call: &CallExpr) -> Estimate {
        let (name, member) = call_name(call);
        if name == "dyn" && call.args.len() == 1 {
            let cost = self.cost(&call.args[0]);
            if let Some(s) = self.compute_size(&call.args[0]) {
                self.sizes.insert(e.id, s);
            }
            if let Some(en) = self.compute_entry(&call.args[0]) {
                self.entries.insert(e.id, en);
            }
            return Estimate::fixed(1).add(cost);
        }
        let mut arg_costs = Vec::new();
        for a in &call.args {
            arg_costs.push(self.cost(a));
        }
        let ids = self.overloads.get(&e.id).cloned().unwrap_or_default();
        if ids.is_empty() {
            return Estimate::fixed(0);
        }
        let mut sum = Estimate::fixed(0);
        let target = match (&call.target, member) {
            (Some(t), true) => {
                sum = sum.add(self.cost(t));
                Some(&**t)
            }
            _ => None,
        };
        let mut fn_cost = Estimate {
            min: u64::MAX,
            max: 0,
        };
        let mut result: Option<Size> = None;
        for id in ids {
            let (cost, size) = self.function_cost(e, &name, id, target, &call.args, &arg_costs);
            fn_cost = fn_cost.union(cost);
            if let Some(s) = size {
                result = Some(result.map_or(s, |r| r.union(s)));
            }
            match id {
                "index_list" | "index_map" => {
                    result = self.compute_entry(&call.args[0]).map(|en| en.val);
                }
                _ => {}
            }
            if result.is_none() {
                result = self.compute_size(e);
            }
        }
        if let Some(s) = result {
            self.sizes.insert(e.id, s);
        }
        sum.add(fn_cost)
    }

    /// The size of a node (cel-go's `sizeEstimate` of the Kubernetes
    /// estimator is the same as `sizeOrUnknown` here: no schema).
    fn size_or_unknown(&self, e: &IdedExpr) -> Size {
        self.compute_size(e).unwrap_or(UNKNOWN)
    }

    fn compute_size(&self, e: &IdedExpr) -> Option<Size> {
        if let Some(s) = self.sizes.get(&e.id) {
            return Some(*s);
        }
        let literal = match &e.expr {
            Expr::Literal(LiteralValue::String(s)) => Some(s.inner().chars().count()),
            Expr::Literal(LiteralValue::Bytes(b)) => Some(b.inner().len()),
            Expr::Literal(_) => Some(1),
            Expr::List(l) => Some(l.elements.len()),
            Expr::Map(m) => Some(m.entries.len()),
            _ => None,
        };
        if let Some(n) = literal {
            return Some(Size::fixed(u64::try_from(n).unwrap_or(u64::MAX)));
        }
        if self.type_of(e).is_scalar() {
            return Some(Size::fixed(1));
        }
        if let Expr::Ident(name) = &e.expr
            && let Some(l) = self.peek(name)
        {
            return l.size;
        }
        None
    }

    fn compute_entry(&self, e: &IdedExpr) -> Option<EntrySize> {
        if let Some(en) = self.entries.get(&e.id) {
            return Some(*en);
        }
        if let Expr::Ident(name) = &e.expr {
            return self.peek(name).and_then(|l| l.entry);
        }
        None
    }

    /// The cost of one overload, without its arguments', and the size of
    /// its result if known: the Kubernetes estimator first, then the
    /// lists extension's, then cel-go's (`functionCost`).
    fn function_cost(
        &mut self,
        e: &IdedExpr,
        name: &str,
        id: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
        arg_costs: &[Estimate],
    ) -> (Estimate, Option<Size>) {
        let arg_sum = arg_costs.iter().fold(Estimate::fixed(0), |s, c| s.add(*c));
        if let Some((cost, size)) = self.list_extension(id, target, args) {
            return (cost.add(arg_sum), size);
        }
        if let Some((cost, size)) = self.kubernetes(name, id, target, args) {
            return (cost.add(arg_sum), size);
        }
        let size = |i: usize| self.size_or_unknown(&args[i]);
        let fixed = |n| Estimate::fixed(n);
        match id {
            "string_format" if target.is_some() => {
                let t = self.size_or_unknown(target.expect("a target"));
                return (t.factor(STRING_TRAVERSAL).add(arg_sum), None);
            }
            "string_to_bytes" if args.len() == 1 => {
                let sz = size(0);
                return (
                    sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    Some(Size {
                        min: sz.min,
                        max: sz.max.wrapping_mul(4),
                    }),
                );
            }
            "bytes_to_string" if args.len() == 1 => {
                let sz = size(0);
                return (
                    sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    Some(Size {
                        min: sz.min / 4,
                        max: sz.max,
                    }),
                );
            }
            "strings_quote" if args.len() == 1 => {
                let sz = size(0);
                return (
                    sz.factor(STRING_TRAVERSAL).add(arg_sum),
                    Some(Size {
                        min: sz.min.wrapping_add(2),
                        max: sz.max.wrapping_mul(2).wrapping_add(2),
                    }),
                );
            }
            "starts_with_string" | "ends_with_string" if args.len() == 1 => {
                return (size(0).factor(STRING_TRAVERSAL).add(arg_sum), None);
            }
            "in_list" if args.len() == 2 => {
                return (size(1).factor(1.0).add(arg_sum), None);
            }
            "matches_string" if target.is_some() && args.len() == 1 => {
                let t = self.size_or_unknown(target.expect("a target"));
                let s = t.add(Size::fixed(1)).factor(STRING_TRAVERSAL);
                let r = size(0).factor(REGEX_LENGTH);
                return (s.mul(r).add(arg_sum), None);
            }
            "contains_string" if target.is_some() && args.len() == 1 => {
                let t = self.size_or_unknown(target.expect("a target"));
                let s = t.factor(STRING_TRAVERSAL);
                let sub = size(0).factor(STRING_TRAVERSAL);
                return (s.mul(sub).add(arg_sum), None);
            }
            "logical_or" | "logical_and" => {
                let (l, r) = (arg_costs[0], arg_costs[1]);
                return (
                    Estimate {
                        min: l.min,
                        max: l.add(r).max,
                    },
                    None,
                );
            }
            "conditional" => {
                let sz = size(1).union(size(2));
                let entry =
                    union_entries(self.compute_entry(&args[1]), self.compute_entry(&args[2]));
                if let Some(en) = entry {
                    self.entries.insert(e.id, en);
                }
                let cost = arg_costs[0].add(arg_costs[1].union(arg_costs[2]));
                return (cost, Some(sz));
            }
            "add_string" | "add_bytes" | "add_list" if args.len() == 2 => {
                let result = size(0).add(size(1));
                let entry =
                    union_entries(self.compute_entry(&args[0]), self.compute_entry(&args[1]));
                if let Some(en) = entry {
                    self.entries.insert(e.id, en);
                }
                if id == "add_list" {
                    return (fixed(1).add(arg_sum), Some(result));
                }
                return (result.factor(STRING_TRAVERSAL).add(arg_sum), Some(result));
            }
            "less_string"
            | "greater_string"
            | "less_equals_string"
            | "greater_equals_string"
            | "less_bytes"
            | "greater_bytes"
            | "less_equals_bytes"
            | "greater_equals_bytes"
            | "equals"
            | "not_equals" => {
                let (l, r) = (size(0), size(1));
                let smallest = l.max.min(r.max);
                let min = u64::from(smallest > 0);
                return (
                    Estimate { min, max: smallest }
                        .factor(STRING_TRAVERSAL)
                        .add(arg_sum),
                    None,
                );
            }
            _ => {}
        }
        (fixed(1).add(arg_sum), None)
    }

    /// The lists extension's estimators (cel-go `ext/lists.go`, version 3).
    fn list_extension(
        &self,
        id: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<(Estimate, Option<Size>)> {
        let allocating = |factor: f64, size: Size| {
            let cost = size
                .factor(factor)
                .add(Estimate::fixed(1))
                .add(Estimate::fixed(LIST_CREATE));
            Some((cost, Some(size)))
        };
        // cel-go's `nodeAsIntValue`: a negative literal is 0.
        let int_literal = |e: &IdedExpr, default: u64| match &e.expr {
            Expr::Literal(LiteralValue::Int(i)) => u64::try_from(*i.inner()).unwrap_or(0),
            _ => default,
        };
        match id {
            "list_slice" => {
                let t = target?;
                if args.len() != 2 {
                    return None;
                }
                let sz = self.size_or_unknown(t);
                let start = int_literal(&args[0], 0);
                let end = int_literal(&args[1], sz.max);
                allocating(1.0, Size::fixed(end.wrapping_sub(start)))
            }
            "list_flatten" | "list_flatten_int" => {
                let t = target?;
                if args.len() > 1 {
                    return None;
                }
                let depth = args.first().map_or(1, |a| int_literal(a, u64::MAX));
                #[allow(clippy::cast_precision_loss)]
                allocating(depth as f64, self.size_or_unknown(t))
            }
            "lists_range" => {
                if target.is_some() || args.len() != 1 {
                    return None;
                }
                allocating(1.0, Size::fixed(int_literal(&args[0], u64::MAX)))
            }
            "list_reverse" => allocating(1.0, self.size_or_unknown(target?)),
            "list_sets_contains_list"
            | "list_sets_intersects_list"
            | "list_sets_equivalent_list" => {
                if args.len() != 2 {
                    return None;
                }
                let factor = if id == "list_sets_equivalent_list" {
                    2.0
                } else {
                    1.0
                };
                let product = self
                    .size_or_unknown(&args[0])
                    .mul(self.size_or_unknown(&args[1]));
                Some((product.factor(factor).add(Estimate::fixed(1)), None))
            }
            "list_distinct" => {
                let sz = self.size_or_unknown(target?);
                allocating(2.0, sz.mul(sz))
            }
            // cel-go's `estimateListSortBy`: the sort of the keys list
            // (`sortBy`'s expansion) costs as `sort()` of it.
            _ if id.starts_with("list_") && id.ends_with("_sortByAssociatedKeys") => {
                let sz = self.size_or_unknown(args.first()?);
                let factor = if id == "list_string_sortByAssociatedKeys"
                    || id == "list_bytes_sortByAssociatedKeys"
                {
                    2.0 + STRING_TRAVERSAL
                } else {
                    2.0
                };
                allocating(factor, sz.mul(sz))
            }
            _ if id.starts_with("list_") && id.ends_with("_sort") => {
                let sz = self.size_or_unknown(target?);
                let factor = if id == "list_string_sort" || id == "list_bytes_sort" {
                    2.0 + STRING_TRAVERSAL
                } else {
                    2.0
                };
                allocating(factor, sz.mul(sz))
            }
            _ => None,
        }
    }

    /// The Kubernetes libraries' `EstimateCallCost`, by function name.
    fn kubernetes(
        &self,
        name: &str,
        id: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Option<(Estimate, Option<Size>)> {
        let one = || Some((Estimate::fixed(1), None));
        // The target of a member call is the first argument of cel-go's
        // AstNode list only for calls written as functions: here the
        // arguments are the ones after the target.
        let traversal = |e: &IdedExpr| self.size_or_unknown(e).factor(STRING_TRAVERSAL);
        match name {
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
                let t = target?;
                let size = self.size_or_unknown(t);
                match self.type_of(t) {
                    T::List(el) => {
                        let mut el_cost = Estimate::fixed(1);
                        if el.is_string_or_bytes() {
                            // The element's size: unknown without a schema.
                            el_cost = el_cost.add(UNKNOWN.factor(STRING_TRAVERSAL));
                        }
                        Some((size.mul(el_cost), None))
                    }
                    T::Map(k, _) => {
                        let mut el_cost = Estimate::fixed(1);
                        if k.is_string_or_bytes() {
                            el_cost = el_cost.add(UNKNOWN.factor(STRING_TRAVERSAL));
                        }
                        Some((size.mul(el_cost), None))
                    }
                    _ => Some((size.factor(STRING_TRAVERSAL), None)),
                }
            }
            "url" | "jsonpatch.escapeKey" if args.len() == 1 => {
                let sz = self.size_or_unknown(&args[0]);
                Some((sz.factor(STRING_TRAVERSAL), Some(sz)))
            }
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let sz = self.size_or_unknown(target?);
                Some((sz.factor(STRING_TRAVERSAL), Some(sz)))
            }
            "replace" if target.is_some() && args.len() >= 2 => {
                let sz = self.size_or_unknown(target?);
                let to = self.size_or_unknown(&args[0]);
                let with = self.size_or_unknown(&args[1]);
                Some((
                    sz.factor(2.0 * STRING_TRAVERSAL),
                    Some(replace_size(sz, to, with)),
                ))
            }
            "split" => {
                let sz = self.size_or_unknown(target?);
                let mut max = sz.max;
                if args.len() > 1
                    && let Expr::Literal(LiteralValue::Int(i)) = &args[1].expr
                {
                    #[allow(clippy::cast_sign_loss)]
                    {
                        max = *i.inner() as u64;
                    }
                }
                Some((
                    sz.factor(2.0 * STRING_TRAVERSAL),
                    Some(Size { min: 0, max }),
                ))
            }
            "join" => {
                let t = target?;
                let list = self.size_or_unknown(t);
                let mut sz = Size::fixed(0);
                if let T::List(_) | T::Map(..) = self.type_of(t) {
                    sz = list.mul(UNKNOWN);
                }
                if let Some(sep) = args.first() {
                    let sep = self.size_or_unknown(sep);
                    let separators = Size {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    sz = sz.add(sep.mul(separators));
                }
                Some((sz.factor(STRING_TRAVERSAL), Some(sz)))
            }
            "find" | "findAll" if target.is_some() && !args.is_empty() => {
                let sz = self.size_or_unknown(target?);
                let s = sz.add(Size::fixed(1)).factor(STRING_TRAVERSAL);
                let r = self.size_or_unknown(&args[0]).factor(REGEX_LENGTH);
                Some((
                    s.mul(r),
                    Some(Size {
                        min: 0,
                        max: sz.max,
                    }),
                ))
            }
            "cidr" | "isIP" | "isCIDR" if !args.is_empty() => Some((traversal(&args[0]), None)),
            "ip" => {
                if id == "cidr_ip" {
                    return one();
                }
                Some((traversal(args.first()?), None))
            }
            "ip.isCanonical" if !args.is_empty() => Some((
                self.size_or_unknown(&args[0])
                    .factor(2.0 * STRING_TRAVERSAL),
                None,
            )),
            "masked"
            | "prefixLength"
            | "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => one(),
            "containsIP" | "containsCIDR" if !args.is_empty() => {
                let sz = Size { min: 4, max: 16 };
                let mut cost = sz.add(sz).factor(STRING_TRAVERSAL);
                if name == "containsCIDR" {
                    cost = cost
                        .add(sz.factor(STRING_TRAVERSAL))
                        .add(Estimate::fixed(1));
                }
                if id == "cidr_contains_ip_string" || id == "cidr_contains_cidr_string" {
                    // cel-go's args[0] of a member call is its first
                    // argument after the target.
                    cost = cost.add(traversal(&args[0]));
                }
                Some((cost, None))
            }
            "quantity" | "isQuantity" | "semver" | "isSemver" if !args.is_empty() => {
                Some((traversal(&args[0]), None))
            }
            "validate" if !args.is_empty() => Some((
                traversal(&args[0]).factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH),
                None,
            )),
            "format.named" | "sign" | "asInteger" | "isInteger" | "asApproximateFloat"
            | "isGreaterThan" | "isLessThan" | "compareTo" | "add" | "sub" | "major" | "minor"
            | "patch" | "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath"
            | "getQuery" => one(),
            "_==_" if args.len() == 2 => {
                let (l, r) = (self.type_of(&args[0]), self.type_of(&args[1]));
                if l != r {
                    return None;
                }
                match l {
                    T::Opaque(_) => one(),
                    T::Struct("kubernetes.NamedFormat") => Some((
                        Estimate {
                            min: 1,
                            max: MAX_FORMAT_SIZE,
                        }
                        .factor(STRING_TRAVERSAL),
                        None,
                    )),
                    T::Struct("kubernetes.URL") => {
                        let size = match self.compute_size(&args[1]) {
                            Some(s) => s,
                            None => Size::fixed(1),
                        };
                        Some((
                            Estimate {
                                min: 1,
                                max: size.max,
                            }
                            .factor(STRING_TRAVERSAL),
                            None,
                        ))
                    }
                    T::Struct(_) => one(),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// The size of `replace`'s result (the Kubernetes estimator's).
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
fn replace_size(sz: Size, to: Size, with: Size) -> Size {
    let (mut count, mut retained) = (Size::fixed(0), Size::fixed(0));
    if to.min == 0 {
        count.max = sz.max.saturating_add(1);
        retained.max = sz.max;
    } else if with.max <= to.min {
        retained.max = sz.max;
    } else {
        count.max = (sz.max as f64 / to.min as f64).ceil() as u64;
    }
    if to.max == 0 {
        count.min = sz.min.saturating_add(1);
        retained.min = sz.min;
    } else if to.max <= with.min {
        retained.min = sz.min;
    } else {
        count.min = (sz.min as f64 / to.max as f64).ceil() as u64;
    }
    count.mul(with).add(retained)
}

/// cel-go's `isBind`: a comprehension over an empty list literal whose
/// condition is `false` and whose accumulator is not a macro's.
fn is_bind(c: &ComprehensionExpr) -> bool {
    matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
        && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
        && c.accu_var != ACCU
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate_of(expr: &str) -> Estimate {
        let program = crate::cel::CelProgram::compile(expr).expect("compiles");
        program.estimated_cost().expect("an estimate")
    }

    #[test]
    fn sizes_and_saturation_follow_cel_go() {
        // Figures from the cel-go oracle (testenv/celoracle --cost).
        assert_eq!(
            estimate_of("[1, 2, 3].all(x, x > 0)"),
            Estimate { min: 20, max: 26 }
        );
        assert_eq!(estimate_of("object.spec.replicas > 1"), Estimate::fixed(2));
        // `sortBy`, expanded as cel-go's `sortByMacro` (the keys mapped,
        // `@sortByAssociatedKeys` costed as `sort()` of them).
        assert_eq!(
            estimate_of("object.spec.list.sortBy(x, x.name)"),
            Estimate {
                min: 35,
                max: u64::MAX
            }
        );
        assert_eq!(
            estimate_of("object.a + object.b"),
            Estimate {
                min: 2,
                max: 1_844_674_407_370_955_266
            }
        );
        assert_eq!(
            estimate_of("object.spec.containers.all(c, c.name != 'x')"),
            Estimate {
                min: 2,
                max: u64::MAX
            }
        );
    }
}
