//! Kubernetes' named formats (`format.dns1123Label()`, `format.named(n)`,
//! `<Format>.validate(s)`) as k8s.io/apiserver's format library has them:
//! `format.named(n)` is an `optional<Format>` (`optional.none()` for an
//! unknown name), and the validators give apimachinery's messages
//! (`k8s.io/apimachinery/pkg/util/validation` and
//! `pkg/api/validate/content`, v0.36.3). `format.byte()` accepts padded
//! base64 only, as kube-openapi's `strfmt` does; `uuid`, `date` and
//! `datetime` give kube-openapi's one-line messages. `uri` is kube-cel's
//! (Go's `url.ParseRequestURI` messages are not reproduced).

use std::sync::{Arc, LazyLock};

use kube_cel::cel::objects::{Opaque, OpaqueEq, OptionalValue};
use kube_cel::cel::{ExecutionError, FunctionContext, Value};
use regex::Regex;

use super::strict::{StrictFunction, call_registered, no_overload, resolved_args};

/// The format names, as `format.NAME()` and `format.named('NAME')` spell
/// them.
pub(super) const NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// A named format: one of [`NAMES`].
#[derive(Debug)]
struct Format(&'static str);

impl OpaqueEq for Format {
    fn opaque_eq(&self, other: &dyn Opaque) -> bool {
        other
            .downcast_ref::<Format>()
            .is_some_and(|o| o.0 == self.0)
    }
}

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.NamedFormat"
    }
}

/// `format.NAME()`.
pub(super) fn constant(name: &'static str) -> StrictFunction {
    Box::new(move |ftx: &mut FunctionContext| {
        if !ftx.args.is_empty() {
            return Err(no_overload(ftx, None, &resolved_args(ftx)?));
        }
        Ok(Value::Opaque(Arc::new(Format(name))))
    })
}

/// `format.named(name)`: `optional.of(format)`, or `optional.none()`.
pub(super) fn named(ftx: &mut FunctionContext) -> Result<Value, ExecutionError> {
    let args = resolved_args(ftx)?;
    let [Value::String(name)] = args.as_slice() else {
        return Err(no_overload(ftx, None, &args));
    };
    let found = NAMES.iter().find(|n| **n == name.as_str());
    let optional = match found {
        Some(n) => OptionalValue::of(Value::Opaque(Arc::new(Format(n)))),
        None => OptionalValue::none(),
    };
    Ok(Value::Opaque(Arc::new(optional)))
}

/// `<Format>.validate(s)`: `optional.none()` when `s` is valid, else
/// `optional.of([messages])`.
pub(super) fn validate(ftx: &mut FunctionContext) -> Result<Value, ExecutionError> {
    let args = resolved_args(ftx)?;
    let this = ftx.this.clone();
    let format = match &this {
        Some(Value::Opaque(o)) => o.downcast_ref::<Format>().map(|f| f.0),
        _ => None,
    };
    let (Some(format), [Value::String(s)]) = (format, args.as_slice()) else {
        return Err(no_overload(ftx, this.as_ref(), &args));
    };
    let errors = match messages(format, s) {
        Some(errors) => errors,
        None => {
            // kube-cel's validator (`uri`), on its own format value.
            let theirs = call_registered(&format!("format.{format}"), None, Vec::new())?;
            return call_registered("validate", Some(theirs), args);
        }
    };
    let optional = if errors.is_empty() {
        OptionalValue::none()
    } else {
        OptionalValue::of(Value::List(Arc::new(
            errors
                .into_iter()
                .map(|e| Value::String(Arc::new(e)))
                .collect(),
        )))
    };
    Ok(Value::Opaque(Arc::new(optional)))
}

/// apimachinery's messages for `s` in `format`; `None` for a format left
/// to kube-cel.
fn messages(format: &str, s: &str) -> Option<Vec<String>> {
    let one = |ok: bool, message: &str| {
        if ok {
            Vec::new()
        } else {
            vec![message.to_owned()]
        }
    };
    Some(match format {
        "dns1123Label" => dns1123_label(s),
        "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
        "dns1123Subdomain" => dns1123_subdomain(s, "characters"),
        "dns1123SubdomainPrefix" => dns1123_subdomain(&mask_trailing_dash(s), "characters"),
        "dns1035Label" => dns1035_label(s),
        "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
        "qualifiedName" => label_key(s),
        "labelValue" => label_value(s),
        "byte" => one(is_std_base64(s), "invalid base64"),
        "uuid" | "date" | "datetime" => {
            let message = match format {
                "uuid" => "does not match the UUID format",
                "date" => "invalid date",
                _ => "invalid datetime",
            };
            // kube-cel's decision, kube-openapi's message.
            let theirs = call_registered(&format!("format.{format}"), None, Vec::new()).ok()?;
            let valid = matches!(
                call_registered("validate", Some(theirs), vec![Value::String(Arc::new(s.to_owned()))]),
                Ok(Value::Opaque(o)) if o.downcast_ref::<OptionalValue>().is_some_and(|v| v.value().is_none())
            );
            one(valid, message)
        }
        _ => return None,
    })
}

const DNS1123_LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

/// Whether all of `s` matches `pattern` (one of the constants above).
fn full_match(pattern: &'static str, s: &str) -> bool {
    static COMPILED: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
        [
            DNS1123_LABEL,
            DNS1123_SUBDOMAIN,
            DNS1035_LABEL,
            LABEL_KEY,
            LABEL_VALUE,
        ]
        .into_iter()
        .map(|p| {
            let re = Regex::new(&format!("^(?:{p})$")).expect("a valid constant pattern");
            (p, re)
        })
        .collect()
    });
    COMPILED
        .iter()
        .find(|(p, _)| *p == pattern)
        .is_some_and(|(_, re)| re.is_match(s))
}

/// apimachinery's `RegexError`.
fn regex_error(message: &str, pattern: &str, examples: &[&str]) -> String {
    let mut out = format!("{message} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{pattern}')"));
    out
}

/// `maskTrailingDash` of apimachinery's generic name validation (the last
/// two bytes become `a`, as there).
fn mask_trailing_dash(s: &str) -> String {
    if s.len() > 1 && s.ends_with('-') {
        match s.get(..s.len() - 2) {
            Some(head) => format!("{head}a"),
            // The byte before the dash ends a multi-byte character: Go
            // cuts it; the result is invalid either way.
            None => "\u{0}".to_owned(),
        }
    } else {
        s.to_owned()
    }
}

fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    if !full_match(DNS1123_LABEL, s) {
        if full_match(DNS1123_SUBDOMAIN, s) {
            errs.push("must not contain dots".to_owned());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
                 or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `unit`: `characters` in pkg/util/validation, `bytes` in
/// pkg/api/validate/content (a label key's prefix).
fn dns1123_subdomain(s: &str, unit: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(format!("must be no more than 253 {unit}"));
    }
    if !full_match(DNS1123_SUBDOMAIN, s) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN,
            &["example.com"],
        ));
    }
    errs
}

fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    if !full_match(DNS1035_LABEL, s) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

const LABEL_KEY_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
                                 must start and end with an alphanumeric character";

/// apimachinery's `content.IsLabelKey` (`IsQualifiedName`).
fn label_key(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix, "bytes")
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')",
                regex_error(
                    LABEL_KEY_MESSAGE,
                    LABEL_KEY,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_owned());
    }
    if !full_match(LABEL_KEY, name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_MESSAGE,
                LABEL_KEY,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// apimachinery's `content.IsLabelValue`.
fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 bytes".to_owned());
    }
    if !full_match(LABEL_VALUE, s) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Whether `s` is base64 as kube-openapi's `strfmt` checks a `byte`
/// string (govalidator's pattern): the standard alphabet in groups of
/// four, padded; not empty, no line breaks.
fn is_std_base64(s: &str) -> bool {
    static BASE64: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$",
        )
        .expect("a valid constant pattern")
    });
    BASE64.is_match(s)
}

#[cfg(test)]
mod tests {
    use super::{is_std_base64, label_key, mask_trailing_dash};

    #[test]
    fn base64_as_go_std_encoding() {
        assert!(is_std_base64("aGVsbG8="));
        assert!(!is_std_base64(""));
        assert!(!is_std_base64("aGVs\nbG8="));
        assert!(!is_std_base64("aGVsbG8"));
        assert!(!is_std_base64("aGVsbG==="));
        assert!(!is_std_base64("a=VsbG8="));
    }

    #[test]
    fn label_key_and_prefix_mask_as_apimachinery() {
        assert!(label_key("example.com/MyName").is_empty());
        assert_eq!(label_key("/a"), ["prefix part must be non-empty"]);
        assert_eq!(label_key("a/b/c").len(), 1);
        assert_eq!(mask_trailing_dash("ab-"), "aa");
        assert_eq!(mask_trailing_dash("-"), "-");
    }
}
