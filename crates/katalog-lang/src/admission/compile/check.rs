//! A check lowered: the tests on the checked values, their quantifier, the
//! `forEach` scopes and the typed literals, for validations, conditions
//! and mutations alike.

use crate::admission::CheckIr;
use crate::common::path::{Path, Segment};
use crate::error::ErrorKind;
use crate::front::document::{Check, Quantifier};
use crate::front::source::DocPath;

use super::{Ctx, number};

/// The tests of `c` on the values of `checked` (`self` in its CEL).
pub(super) fn check(ctx: &mut Ctx, c: &Check, checked: &Path, at: &DocPath) -> Option<CheckIr> {
    let mut ok = true;
    let mut ir = CheckIr {
        exists: c.exists,
        absent: c.absent,
        equals: c.equals.clone(),
        in_: c.in_.clone(),
        not_in: c.not_in.clone(),
        minimum: c.minimum.as_ref().map(number),
        maximum: c.maximum.as_ref().map(number),
        min_length: c.min_length,
        max_length: c.max_length,
        prefix: c.prefix.clone(),
        suffix: c.suffix.clone(),
        immutable: c.immutable,
        unique: c.unique,
        ..Default::default()
    };
    if let Some((lo, hi)) = &c.range {
        if ir.minimum.is_some() || ir.maximum.is_some() {
            ctx.error(
                &at.key("range"),
                ErrorKind::Conflict,
                "give `range` or `minimum`/`maximum`, not both",
            );
            ok = false;
        }
        ir.minimum = Some(number(lo));
        ir.maximum = Some(number(hi));
    }
    if let (Some(lo), Some(hi)) = (ir.minimum, ir.maximum)
        && lo > hi
    {
        ctx.error(
            at,
            ErrorKind::Invalid,
            format!("the minimum {lo} is above the maximum {hi}: nothing can pass"),
        );
        ok = false;
    }
    if let (Some(lo), Some(hi)) = (ir.min_length, ir.max_length)
        && lo > hi
    {
        ctx.error(
            at,
            ErrorKind::Invalid,
            format!("minLength {lo} is above maxLength {hi}: nothing can pass"),
        );
        ok = false;
    }
    if c.exists && c.absent {
        ctx.error(
            at,
            ErrorKind::Conflict,
            "`exists` and `absent` together can never pass",
        );
        ok = false;
    }
    if let Some(p) = &c.pattern {
        match ctx.patterns.anchored(p) {
            Ok(r) => ir.pattern = Some(r),
            Err(e) => {
                ctx.error(&at.key("pattern"), ErrorKind::Pattern, e.to_string());
                ok = false;
            }
        }
    }
    if let Some(expr) = &c.cel {
        match ctx.cel_self(expr, &at.key("cel"), checked) {
            Some(p) => ir.cel = Some(p),
            None => ok = false,
        }
    }
    let any = c.exists
        || c.absent
        || c.equals.is_some()
        || c.in_.is_some()
        || c.not_in.is_some()
        || c.minimum.is_some()
        || c.maximum.is_some()
        || c.range.is_some()
        || c.min_length.is_some()
        || c.max_length.is_some()
        || c.pattern.is_some()
        || c.prefix.is_some()
        || c.suffix.is_some()
        || c.immutable
        || c.unique
        || c.cel.is_some();
    if !any {
        ctx.error(at, ErrorKind::Shape, "the check tests nothing")
            .help = Some("give at least one of exists, absent, equals, in, notIn, minimum, maximum, range, minLength, maxLength, pattern, prefix, suffix, immutable, unique, cel".into());
        ok = false;
    }
    ok.then_some(ir)
}

pub(super) fn quantifier(
    ctx: &mut Ctx,
    q: Option<Quantifier>,
    paths: &[Path],
    at: &DocPath,
) -> Option<Quantifier> {
    if q.is_some() && !paths.iter().any(Path::has_wildcard) {
        ctx.error(
            &at.key("quantifier"),
            ErrorKind::Invalid,
            "`quantifier` says how the elements of a `[*]` path must pass, and this path has no `[*]`",
        )
        .help = Some("e.g. `path: spec.containers[*].image` with `quantifier: any`".into());
        return None;
    }
    Some(q.unwrap_or_default())
}

/// The elements of a `forEach` list: `spec.containers` and
/// `spec.containers[*]` both give `spec.containers[*]`.
pub(super) fn elements_of(list: Path) -> Path {
    if matches!(list.segments().last(), Some(Segment::Wildcard)) {
        return list;
    }
    let mut segs = list.segments().to_vec();
    segs.push(Segment::Wildcard);
    Path::from_segments(segs)
}

/// `spec.containers[*]...` also as `initContainers` and `ephemeralContainers`.
pub(super) fn expand_containers(path: &Path) -> Option<Vec<Path>> {
    let idx = path
        .segments()
        .iter()
        .position(|s| matches!(s, Segment::Key(k) if k == "containers"))?;
    let mut out = vec![path.clone()];
    for alt in ["initContainers", "ephemeralContainers"] {
        let mut segs = path.segments().to_vec();
        segs[idx] = Segment::Key(alt.into());
        out.push(Path::from_segments(segs));
    }
    Some(out)
}

/// `equals`, `in` and `notIn` literals that cannot be values of a field
/// whose type is known (`equals: "false"` on `hostNetwork`).
pub(super) fn typed_literals(
    ctx: &mut Ctx,
    t: crate::admission::types::FieldType,
    path: &Path,
    c: &Check,
    at: &DocPath,
) {
    let lists = [
        ("equals", c.equals.iter().collect::<Vec<_>>()),
        ("in", c.in_.iter().flatten().collect()),
        ("notIn", c.not_in.iter().flatten().collect()),
    ];
    for (key, values) in lists {
        for v in values {
            if !crate::admission::types::mismatches(t, v) {
                continue;
            }
            let shown = crate::common::json::show(v);
            let help = match crate::admission::types::unquoted(t, v) {
                Some(fixed) if key == "equals" => format!("write `equals: {fixed}` (no quotes)"),
                Some(fixed) => format!("write `{fixed}` in `{key}` (no quotes)"),
                None if t == crate::admission::types::FieldType::Boolean => {
                    "a boolean is true or false, without quotes".to_string()
                }
                None => "write the number without quotes".to_string(),
            };
            ctx.error(
                &at.key(key),
                ErrorKind::Invalid,
                format!(
                    "`{path}` is {}, and `{key}` compares it with {shown} ({}): the test can never match",
                    t.name(),
                    crate::common::json::type_name(v)
                ),
            )
            .help = Some(help);
        }
    }
}
