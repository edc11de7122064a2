//! `-o jsonpath=TEMPLATE` as kubectl has it (`k8s.io/client-go/util/jsonpath`):
//! text with `{expressions}` in it, `{range EXPR}...{end}` to loop and
//! `{"\n"}` for literal text. Each expression is a kubectl path
//! (`.items[*].metadata.name`, `..name`, `[?(@.kind=="Pod")]`), turned into
//! an RFC 9535 JSONPath and run by the `jsonpath-rust` crate. Several
//! results are joined by a space; strings print without quotes, anything
//! else as compact JSON; a path that finds nothing prints nothing (kubectl's
//! `--allow-missing-template-keys`, on by default).

use jsonpath_rust::JsonPath as _;
use serde_json::Value;

/// A piece of a template.
#[derive(Debug, PartialEq)]
enum Piece {
    Text(String),
    Path(String),
    Range(String, Vec<Piece>),
}

/// Render `template` over `value`.
pub fn render(template: &str, value: &Value) -> Result<String, String> {
    let pieces = parse(template)?;
    let mut out = String::new();
    run(&pieces, value, value, &mut out)?;
    Ok(out)
}

fn parse(template: &str) -> Result<Vec<Piece>, String> {
    let mut stack: Vec<(String, Vec<Piece>)> = vec![(String::new(), Vec::new())];
    let mut rest = template;
    while !rest.is_empty() {
        let Some(open) = rest.find('{') else {
            push(&mut stack, Piece::Text(rest.to_string()));
            break;
        };
        if open > 0 {
            push(&mut stack, Piece::Text(rest[..open].to_string()));
        }
        let after = &rest[open + 1..];
        let close = closing_brace(after).ok_or("unclosed `{`")?;
        let inner = after[..close].trim();
        rest = &after[close + 1..];
        if let Some(lit) = inner.strip_prefix('"') {
            let lit = lit.strip_suffix('"').ok_or("unclosed string literal")?;
            push(&mut stack, Piece::Text(unescape(lit)));
        } else if let Some(path) = inner.strip_prefix("range ") {
            stack.push((path.trim().to_string(), Vec::new()));
        } else if inner == "end" {
            if stack.len() < 2 {
                return Err("`{end}` without `{range}`".into());
            }
            let (path, body) = stack.pop().unwrap_or_default();
            push(&mut stack, Piece::Range(path, body));
        } else {
            push(&mut stack, Piece::Path(inner.to_string()));
        }
    }
    if stack.len() != 1 {
        return Err("`{range}` without `{end}`".into());
    }
    Ok(stack.pop().map(|(_, p)| p).unwrap_or_default())
}

fn push(stack: &mut [(String, Vec<Piece>)], p: Piece) {
    if let Some((_, pieces)) = stack.last_mut() {
        pieces.push(p);
    }
}

/// The `}` that closes an expression, outside quotes and brackets.
fn closing_brace(s: &str) -> Option<usize> {
    let mut quote = None;
    let mut depth = 0usize;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => depth = depth.saturating_sub(1),
            (None, '}') if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

fn run(pieces: &[Piece], root: &Value, current: &Value, out: &mut String) -> Result<(), String> {
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Path(path) => {
                let found = query(path, root, current)?;
                let texts: Vec<String> = found.iter().map(|v| text(v)).collect();
                out.push_str(&texts.join(" "));
            }
            Piece::Range(path, body) => {
                for v in query(path, root, current)? {
                    run(body, root, v, out)?;
                }
            }
        }
    }
    Ok(())
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn query<'v>(path: &str, root: &'v Value, current: &'v Value) -> Result<Vec<&'v Value>, String> {
    let (target, path) = match path.strip_prefix('$') {
        Some(rest) => (root, rest),
        None => (current, path.strip_prefix('@').unwrap_or(path)),
    };
    let rfc = to_rfc9535(path)?;
    target
        .query(&rfc)
        .map_err(|e| format!("`{path}` is not a path ({e})"))
}

/// `.metadata.labels.app\.kubernetes\.io/name` → `$.metadata.labels['app.kubernetes.io/name']`.
fn to_rfc9535(path: &str) -> Result<String, String> {
    let mut out = String::from("$");
    let chars: Vec<char> = path.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let recursive = chars.get(i + 1) == Some(&'.');
                i += if recursive { 2 } else { 1 };
                let mut name = String::new();
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    name.push(chars[i]);
                    i += 1;
                }
                if recursive {
                    out.push_str("..");
                } else if name.is_empty() {
                    continue;
                }
                if name == "*" {
                    out.push_str(if recursive { "*" } else { "[*]" });
                } else if !name.is_empty() {
                    let shorthand = name.chars().enumerate().all(|(j, c)| {
                        c == '_' || c.is_ascii_alphabetic() || (j > 0 && c.is_ascii_digit())
                    });
                    match (shorthand, recursive) {
                        (true, true) => out.push_str(&name),
                        (true, false) => {
                            out.push('.');
                            out.push_str(&name);
                        }
                        (false, _) => out.push_str(&format!(
                            "[{}]",
                            serde_json::to_string(&name).unwrap_or_default()
                        )),
                    }
                }
            }
            '[' => {
                let start = i;
                let mut depth = 0;
                let mut quote = None;
                while i < chars.len() {
                    let c = chars[i];
                    match (quote, c) {
                        (Some(q), c) if c == q => quote = None,
                        (Some(_), _) => {}
                        (None, '"' | '\'') => quote = Some(c),
                        (None, '[') => depth += 1,
                        (None, ']') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                if i >= chars.len() {
                    return Err(format!("unclosed `[` in `{path}`"));
                }
                out.extend(&chars[start..=i]);
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            _ => {
                // A name without a leading dot (`{metadata.name}`).
                let mut name = String::new();
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    name.push(chars[i]);
                    i += 1;
                }
                out.push_str(&format!(
                    "[{}]",
                    serde_json::to_string(&name).unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        json!({"apiVersion": "v1", "kind": "List", "items": [
            {"kind": "Pod", "metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web"}}, "spec": {"n": 1}},
            {"kind": "Pod", "metadata": {"name": "b"}, "spec": {"n": 2}},
        ]})
    }

    #[test]
    fn kubectl_templates() {
        let l = list();
        let r = |t: &str| render(t, &l).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(r("{.items[*].metadata.name}"), "a b");
        assert_eq!(r("{.kind}/{.items[0].spec.n}"), "List/1");
        assert_eq!(
            r("{range .items[*]}{.metadata.name}{\"\\t\"}{.spec.n}{\"\\n\"}{end}"),
            "a\t1\nb\t2\n"
        );
        assert_eq!(
            r("{.items[0].metadata.labels.app\\.kubernetes\\.io/name}"),
            "web"
        );
        assert_eq!(r("{.items[?(@.spec.n==2)].metadata.name}"), "b");
        assert_eq!(r("{.items[1].spec}"), "{\"n\":2}");
        assert_eq!(r("{..name}"), "a b");
        assert_eq!(r("{.nothing.here}"), "");
        assert_eq!(r("{$.items[*].kind}"), "Pod Pod");
    }

    #[test]
    fn broken_templates_are_errors() {
        assert!(render("{.items[0}", &list()).is_err());
        assert!(render("{range .items[*]}{.x}", &list()).is_err());
        assert!(render("{end}", &list()).is_err());
        assert!(render("{.a", &list()).is_err());
    }
}
