//! Field paths: the one syntax a Katalog uses to name a place in an object.
//!
//! ```text
//! spec.schedule                         keys separated by dots
//! metadata.annotations["example.com/x"] a quoted key may hold dots, slashes, anything
//! spec.containers[0].image              a list element by index
//! spec.containers[*].image              every element (admission rules only)
//! ```
//!
//! Quoted keys use JSON string syntax (`"a\"b"`); single quotes work too
//! (`['a.b']`). A plain key is made of letters, digits, `_`, `-`, `$`, `@`.

use std::fmt;

use serde_json::{Map, Value};

/// One step of a [`Path`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    Key(String),
    Index(usize),
    /// `[*]`: every element of a list.
    Wildcard,
}

/// A parsed path. The empty path names the whole value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path {
    segments: Vec<Segment>,
}

/// Why a path did not parse; `offset` is a byte offset into the path text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid path `{text}` at character {}: {reason}", offset + 1)]
pub struct PathError {
    pub text: String,
    pub offset: usize,
    pub reason: String,
}

/// Why [`Path::set`] could not write `path`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetError {
    /// The value at `at`, on the way to `path`, exists and is not an object.
    #[error("cannot set `{path}`: `{at}` is not an object")]
    NotAnObject { path: Path, at: Path },
    /// The list element `at`, on the way to `path`, does not exist.
    #[error("cannot set `{path}`: no list element at `{at}`")]
    NoListElement { path: Path, at: Path },
    /// `path` ends with an index and there is no such list element.
    #[error("cannot set `{path}`: no list element there")]
    NoLastElement { path: Path },
    /// `path` has a `[*]`: it names no one place.
    #[error("cannot set `{path}`: it has a wildcard")]
    Wildcard { path: Path },
}

fn is_plain_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$' | '@')
}

impl Path {
    pub fn root() -> Self {
        Self::default()
    }

    pub fn from_segments(segments: Vec<Segment>) -> Self {
        Self { segments }
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    pub fn has_wildcard(&self) -> bool {
        self.segments.iter().any(|s| matches!(s, Segment::Wildcard))
    }

    /// True when the path uses only object keys (no index, no wildcard).
    pub fn is_keys_only(&self) -> bool {
        self.segments.iter().all(|s| matches!(s, Segment::Key(_)))
    }

    pub fn starts_with(&self, prefix: &Path) -> bool {
        self.segments.starts_with(&prefix.segments)
    }

    /// True when the two paths name overlapping subtrees, `[*]` standing
    /// for any index: one is at or below something the other names
    /// (`spec.users[*].token` meets `spec.users[0]`, `spec` and
    /// `spec.users[2].token.value`, not `spec.users[0].name`).
    pub fn meets(&self, other: &Path) -> bool {
        self.segments
            .iter()
            .zip(&other.segments)
            .all(|(a, b)| match (a, b) {
                (Segment::Wildcard, Segment::Index(_) | Segment::Wildcard)
                | (Segment::Index(_), Segment::Wildcard) => true,
                (a, b) => a == b,
            })
    }

    /// True when one path is a prefix of the other (they name overlapping subtrees).
    pub fn overlaps(&self, other: &Path) -> bool {
        self.starts_with(other) || other.starts_with(self)
    }

    pub fn join(&self, other: &Path) -> Path {
        let mut segments = self.segments.clone();
        segments.extend(other.segments.iter().cloned());
        Path { segments }
    }

    pub fn child(&self, key: impl Into<String>) -> Path {
        let mut segments = self.segments.clone();
        segments.push(Segment::Key(key.into()));
        Path { segments }
    }

    pub fn index(&self, index: usize) -> Path {
        let mut segments = self.segments.clone();
        segments.push(Segment::Index(index));
        Path { segments }
    }

    /// Parse the textual form.
    pub fn parse(text: &str) -> Result<Path, PathError> {
        let err = |offset: usize, reason: &str| PathError {
            text: text.to_string(),
            offset,
            reason: reason.to_string(),
        };
        let bytes = text.as_bytes();
        let mut segments = Vec::new();
        let mut i = 0;
        if text.is_empty() {
            return Err(err(0, "a path may not be empty"));
        }
        let mut expect_key = true;
        while i < bytes.len() {
            let c = bytes[i] as char;
            if c == '[' {
                let (segment, next) = parse_bracket(text, i).map_err(|(o, r)| err(o, &r))?;
                segments.push(segment);
                i = next;
                expect_key = false;
            } else if c == '.' {
                if expect_key {
                    return Err(err(i, "expected a key before `.`"));
                }
                i += 1;
                if i >= bytes.len() {
                    return Err(err(i - 1, "a path may not end with `.`"));
                }
                if bytes[i] == b'[' || bytes[i] == b'.' {
                    return Err(err(i, "expected a key after `.`"));
                }
                expect_key = true;
            } else if expect_key {
                let start = i;
                while i < bytes.len() && is_plain_key_char(text[i..].chars().next().unwrap_or('.'))
                {
                    i += 1;
                }
                if i == start {
                    let bad = text[i..].chars().next().unwrap_or(' ');
                    return Err(err(
                        i,
                        &format!(
                            "unexpected `{bad}`; quote keys with special characters: {}",
                            quoted_suggestion(text, i)
                        ),
                    ));
                }
                segments.push(Segment::Key(text[start..i].to_string()));
                expect_key = false;
            } else {
                // A plain key ran into a character plain keys cannot hold.
                let bad = text[i..].chars().next().unwrap_or(' ');
                return Err(err(
                    i,
                    &format!(
                        "unexpected `{bad}`; quote keys with special characters: {}",
                        quoted_suggestion(text, i)
                    ),
                ));
            }
        }
        Ok(Path { segments })
    }

    /// The value at this path, if present. A wildcard never matches here; use
    /// [`Path::select`] for that.
    pub fn get<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        get_in(&self.segments, value)
    }

    /// Every value the path selects, expanding wildcards, with its concrete path.
    pub fn select<'v>(&self, value: &'v Value) -> Vec<(Path, &'v Value)> {
        let mut out = Vec::new();
        select_into(&self.segments, value, &mut Vec::new(), &mut out);
        out
    }

    /// Remove the value at this path and return it. Objects that become empty
    /// because of the removal are removed too (they only existed to hold it).
    pub fn take(&self, value: &mut Value) -> Option<Value> {
        self.take_keeping(value, 0)
    }

    /// Like [`Path::take`], but the first `keep` ancestors stay even when
    /// they become empty.
    pub fn take_keeping(&self, value: &mut Value, keep: usize) -> Option<Value> {
        let (taken, _) = take_rec(&self.segments, value, keep)?;
        Some(taken)
    }

    pub fn len(&self) -> usize {
        self.segments.len()
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// How many leading segments two paths share.
    pub fn common_prefix_len(&self, other: &Path) -> usize {
        self.segments
            .iter()
            .zip(&other.segments)
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// Set the value at this path, creating intermediate objects. Fails when an
    /// intermediate value exists and is not an object (or a list for an index).
    pub fn set(&self, value: &mut Value, new: Value) -> Result<(), SetError> {
        let Some((last, parents)) = self.segments.split_last() else {
            *value = new;
            return Ok(());
        };
        let mut cur = value;
        for (depth, seg) in parents.iter().enumerate() {
            cur = match seg {
                Segment::Key(k) => {
                    if cur.is_null() {
                        *cur = Value::Object(Map::new());
                    }
                    let Value::Object(m) = cur else {
                        return Err(SetError::NotAnObject {
                            path: self.clone(),
                            at: Path::from_segments(self.segments[..depth].to_vec()),
                        });
                    };
                    m.entry(k.clone()).or_insert(Value::Null)
                }
                Segment::Index(i) => match cur {
                    Value::Array(a) if *i < a.len() => &mut a[*i],
                    _ => {
                        return Err(SetError::NoListElement {
                            path: self.clone(),
                            at: Path::from_segments(self.segments[..=depth].to_vec()),
                        });
                    }
                },
                Segment::Wildcard => return Err(SetError::Wildcard { path: self.clone() }),
            };
        }
        match last {
            Segment::Key(k) => {
                if cur.is_null() {
                    *cur = Value::Object(Map::new());
                }
                match cur {
                    Value::Object(m) => {
                        m.insert(k.clone(), new);
                        Ok(())
                    }
                    _ => Err(SetError::NotAnObject {
                        path: self.clone(),
                        at: Path::from_segments(parents.to_vec()),
                    }),
                }
            }
            Segment::Index(i) => match cur {
                Value::Array(a) if *i < a.len() => {
                    a[*i] = new;
                    Ok(())
                }
                _ => Err(SetError::NoLastElement { path: self.clone() }),
            },
            Segment::Wildcard => Err(SetError::Wildcard { path: self.clone() }),
        }
    }

    /// The RFC 6901 JSON Pointer of a concrete path (no wildcard).
    pub fn to_json_pointer(&self) -> String {
        let mut out = String::new();
        for seg in &self.segments {
            out.push('/');
            match seg {
                Segment::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
                Segment::Index(i) => out.push_str(&i.to_string()),
                Segment::Wildcard => out.push('*'),
            }
        }
        out
    }
}

/// Maps whose keys are commonly DNS-prefixed names with dots
/// (`app.kubernetes.io/name`) or file names (`app.properties`).
const DOTTED_KEY_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "matchLabels",
    "nodeSelector",
    "data",
    "stringData",
    "binaryData",
];

/// The whole path with the key holding the bad character at byte `bad`
/// quoted, so that following the suggestion gives a path that means what
/// was written. Under `labels` (and the other maps of [`DOTTED_KEY_MAPS`])
/// the dots belong to the key: `metadata.labels.app.kubernetes.io/name`
/// becomes `metadata.labels["app.kubernetes.io/name"]`, not
/// `metadata.labels.app.kubernetes["io/name"]`, which parses but names a
/// field no object has.
fn quoted_suggestion(text: &str, bad: usize) -> String {
    // The dotted run of plain text around the bad character.
    let run_start = text[..bad].rfind(']').map_or(0, |p| p + 1);
    let run_end = text[bad..].find('[').map_or(text.len(), |p| bad + p);
    let run = &text[run_start..bad];
    let mut map_key_start = None;
    let mut offset = run_start;
    for word in run.split('.') {
        let after = offset + word.len() + 1;
        if DOTTED_KEY_MAPS.contains(&word) && after <= bad {
            map_key_start = Some(after);
        }
        offset = after;
    }
    let (key_start, key_end) = match map_key_start {
        Some(start) => (start, run_end),
        None => (
            text[..bad].rfind(['.', ']']).map_or(0, |p| p + 1),
            text[bad..].find(['.', '[']).map_or(text.len(), |p| bad + p),
        ),
    };
    let key = &text[key_start..key_end];
    let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""));
    let before = text[..key_start]
        .strip_suffix('.')
        .unwrap_or(&text[..key_start]);
    format!("{before}[{quoted}]{}", &text[key_end..])
}

/// The values `segments` selects below `value`, each with its concrete path:
/// `here` is the path so far, extended and shortened in place, and copied
/// only for a value found.
fn select_into<'v>(
    segments: &[Segment],
    value: &'v Value,
    here: &mut Vec<Segment>,
    out: &mut Vec<(Path, &'v Value)>,
) {
    let Some((first, rest)) = segments.split_first() else {
        out.push((Path::from_segments(here.clone()), value));
        return;
    };
    let mut below = |segment: Segment, v: &'v Value, out: &mut Vec<(Path, &'v Value)>| {
        here.push(segment);
        select_into(rest, v, here, out);
        here.pop();
    };
    match (first, value) {
        (Segment::Key(k), Value::Object(m)) => {
            if let Some(v) = m.get(k) {
                below(Segment::Key(k.clone()), v, out);
            }
        }
        (Segment::Index(i), Value::Array(a)) => {
            if let Some(v) = a.get(*i) {
                below(Segment::Index(*i), v, out);
            }
        }
        (Segment::Wildcard, Value::Array(a)) => {
            for (i, v) in a.iter().enumerate() {
                below(Segment::Index(i), v, out);
            }
        }
        (Segment::Wildcard, Value::Object(m)) => {
            for (k, v) in m {
                below(Segment::Key(k.clone()), v, out);
            }
        }
        _ => {}
    }
}

/// The value at the path of these segments (see [`Path::get`]): for a
/// prefix of a path, without building one.
pub fn get_in<'v>(segments: &[Segment], value: &'v Value) -> Option<&'v Value> {
    let mut cur = value;
    for seg in segments {
        cur = match (seg, cur) {
            (Segment::Key(k), Value::Object(m)) => crate::common::json::member(m, k)?,
            (Segment::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// [`Path::take_keeping`] for the path of these segments.
pub fn take_in(segments: &[Segment], value: &mut Value, keep: usize) -> Option<Value> {
    let (taken, _) = take_rec(segments, value, keep)?;
    Some(taken)
}

/// Returns the taken value and whether the container it came from is now empty.
fn take_rec(segments: &[Segment], value: &mut Value, keep: usize) -> Option<(Value, bool)> {
    let (first, rest) = segments.split_first()?;
    match (first, value) {
        (Segment::Key(k), Value::Object(m)) => {
            if rest.is_empty() {
                let taken = m.shift_remove(k)?;
                return Some((taken, m.is_empty()));
            }
            let child = m.get_mut(k)?;
            let (taken, child_empty) = take_rec(rest, child, keep.saturating_sub(1))?;
            if child_empty && keep == 0 {
                m.shift_remove(k);
            }
            Some((taken, m.is_empty()))
        }
        (Segment::Index(i), Value::Array(a)) => {
            if rest.is_empty() {
                // Removing a list element would shift its siblings: leave null.
                let slot = a.get_mut(*i)?;
                return Some((std::mem::take(slot), false));
            }
            let child = a.get_mut(*i)?;
            let (taken, _) = take_rec(rest, child, keep.saturating_sub(1))?;
            Some((taken, false))
        }
        _ => None,
    }
}

fn parse_bracket(text: &str, open: usize) -> Result<(Segment, usize), (usize, String)> {
    let bytes = text.as_bytes();
    let mut i = open + 1;
    let Some(&c) = bytes.get(i) else {
        return Err((open, "unclosed `[`".into()));
    };
    let segment = match c {
        b'*' => {
            i += 1;
            Segment::Wildcard
        }
        b'0'..=b'9' => {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let n = text[start..i]
                .parse::<usize>()
                .map_err(|_| (start, "list index too large".to_string()))?;
            Segment::Index(n)
        }
        b'"' | b'\'' => {
            let quote = c as char;
            let mut key = String::new();
            i += 1;
            let mut chars = text[i..].char_indices();
            let mut closed = None;
            while let Some((off, ch)) = chars.next() {
                if ch == '\\' {
                    match chars.next() {
                        Some((_, e @ ('"' | '\'' | '\\' | '/'))) => key.push(e),
                        Some((_, 'n')) => key.push('\n'),
                        Some((_, 't')) => key.push('\t'),
                        // The rest of JSON's escapes: what `Display` writes
                        // for control characters parses back.
                        Some((_, 'r')) => key.push('\r'),
                        Some((_, 'b')) => key.push('\u{8}'),
                        Some((_, 'f')) => key.push('\u{c}'),
                        Some((uo, 'u')) => {
                            let hex: String = (0..4)
                                .filter_map(|_| chars.next().map(|(_, h)| h))
                                .collect();
                            match u32::from_str_radix(&hex, 16)
                                .ok()
                                .filter(|_| hex.len() == 4)
                                .and_then(char::from_u32)
                            {
                                Some(ch) => key.push(ch),
                                None => {
                                    return Err((
                                        i + uo,
                                        format!(
                                            "bad escape `\\u{hex}`: four hex digits of a character"
                                        ),
                                    ));
                                }
                            }
                        }
                        Some((eo, other)) => {
                            return Err((i + eo, format!("unknown escape `\\{other}`")));
                        }
                        None => break,
                    }
                } else if ch == quote {
                    closed = Some(i + off + 1);
                    break;
                } else {
                    key.push(ch);
                }
            }
            let Some(after) = closed else {
                return Err((open, format!("unclosed quoted key; add a closing {quote}")));
            };
            i = after;
            Segment::Key(key)
        }
        _ => {
            return Err((
                i,
                "expected a list index, `*` or a quoted key inside `[ ]`".into(),
            ));
        }
    };
    if bytes.get(i) != Some(&b']') {
        return Err((i, "expected `]`".into()));
    }
    Ok((segment, i + 1))
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("<root>");
        }
        for (n, seg) in self.segments.iter().enumerate() {
            match seg {
                Segment::Key(k) if !k.is_empty() && k.chars().all(is_plain_key_char) => {
                    if n > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Segment::Key(k) => {
                    let quoted = serde_json::to_string(k).map_err(|_| fmt::Error)?;
                    write!(f, "[{quoted}]")?;
                }
                Segment::Index(i) => write!(f, "[{i}]")?,
                Segment::Wildcard => f.write_str("[*]")?,
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for Path {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Path::parse(s)
    }
}

impl serde::Serialize for Path {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Path {
        Path::parse(s).unwrap()
    }

    #[test]
    fn keys_with_control_characters_print_and_parse_back() {
        // Found by `scripts/fuzz path` (fuzz/regressions/path/nul-in-key).
        let path = p("met.annotations[\"a\0\0\0.b-c\"]");
        let printed = path.to_string();
        assert_eq!(printed, r#"met.annotations["a\u0000\u0000\u0000.b-c"]"#);
        assert_eq!(p(&printed), path);
        assert_eq!(p(r#"["\r\b\f\u00e9"]"#), p("[\"\r\u{8}\u{c}é\"]"));
        assert_eq!(
            Path::parse(r#"["\u12"]"#).unwrap_err().reason,
            "bad escape `\\u12\"]`: four hex digits of a character"
        );
        assert!(Path::parse(r#"["\ud800"]"#).is_err());
    }

    #[test]
    fn parses_and_prints_every_form() {
        for text in [
            "spec.schedule",
            r#"metadata.annotations["example.com/x"]"#,
            "spec.containers[0].image",
            "spec.containers[*].image",
            r#"["a.b"].c"#,
            r#"x["with \"quote\""]"#,
            r#"x["tilde~and/slash"]"#,
        ] {
            assert_eq!(p(text).to_string(), text, "round trip of {text}");
        }
        assert_eq!(p("a['b.c']").to_string(), r#"a["b.c"]"#);
        assert_eq!(
            p(r#"metadata.annotations["example.com/x"]"#).segments(),
            &[
                Segment::Key("metadata".into()),
                Segment::Key("annotations".into()),
                Segment::Key("example.com/x".into())
            ]
        );
    }

    #[test]
    fn rejects_malformed_paths_with_a_position() {
        let cases = [
            ("", 0, "a path may not be empty"),
            ("a..b", 2, "expected a key after `.`"),
            ("a.", 1, "a path may not end with `.`"),
            (".a", 0, "expected a key before `.`"),
            ("a[", 1, "unclosed `[`"),
            (
                "a[x]",
                2,
                "expected a list index, `*` or a quoted key inside `[ ]`",
            ),
            ("a[\"x]", 1, "unclosed quoted key; add a closing \""),
            ("a[0", 3, "expected `]`"),
            (
                "a/b",
                1,
                "unexpected `/`; quote keys with special characters: [\"a/b\"]",
            ),
            (
                "x.y z.w",
                3,
                "unexpected ` `; quote keys with special characters: x[\"y z\"].w",
            ),
        ];
        for (text, offset, reason) in cases {
            let e = Path::parse(text).unwrap_err();
            assert_eq!((e.offset, e.reason.as_str()), (offset, reason), "{text}");
        }
    }

    #[test]
    fn the_suggested_quoting_keeps_dotted_label_keys_whole() {
        let pod = json!({"metadata": {
            "labels": {"app.kubernetes.io/name": "web"},
            "annotations": {"example.com/owner.team": "shop"}
        }});
        let cases = [
            (
                "metadata.labels.app.kubernetes.io/name",
                r#"metadata.labels["app.kubernetes.io/name"]"#,
            ),
            (
                "metadata.annotations.example.com/owner.team",
                r#"metadata.annotations["example.com/owner.team"]"#,
            ),
            (
                "spec.template.metadata.labels.app.kubernetes.io/name",
                r#"spec.template.metadata.labels["app.kubernetes.io/name"]"#,
            ),
            (
                "spec.selector.matchLabels.app.kubernetes.io/name",
                r#"spec.selector.matchLabels["app.kubernetes.io/name"]"#,
            ),
            ("spec.container/image", r#"spec["container/image"]"#),
            ("spec.container/image.x", r#"spec["container/image"].x"#),
        ];
        for (text, suggested) in cases {
            let e = Path::parse(text).unwrap_err();
            assert!(
                e.reason
                    .ends_with(&format!("quote keys with special characters: {suggested}")),
                "{text}: {}",
                e.reason
            );
            // Following the suggestion gives a path that parses and, for
            // the Pod paths, reaches the label.
            let fixed = p(suggested);
            if suggested.starts_with("metadata.") {
                assert!(fixed.get(&pod).is_some(), "{suggested} reaches nothing");
            }
        }
    }

    #[test]
    fn quoted_label_keys_in_both_quote_styles() {
        let pod = json!({"metadata": {"labels": {"app.kubernetes.io/name": "web"}}});
        for text in [
            r#"metadata.labels["app.kubernetes.io/name"]"#,
            "metadata.labels['app.kubernetes.io/name']",
            r#"metadata["labels"]["app.kubernetes.io/name"]"#,
        ] {
            let path = p(text);
            assert_eq!(path.get(&pod), Some(&json!("web")), "{text}");
            assert_eq!(
                path.to_string(),
                r#"metadata.labels["app.kubernetes.io/name"]"#
            );
            assert_eq!(
                path.to_json_pointer(),
                "/metadata/labels/app.kubernetes.io~1name"
            );
            let mut v = pod.clone();
            path.set(&mut v, json!("api")).unwrap();
            assert_eq!(v["metadata"]["labels"]["app.kubernetes.io/name"], "api");
            assert_eq!(path.take(&mut v), Some(json!("api")));
        }
    }

    #[test]
    fn get_set_take() {
        let mut v = json!({"spec": {"a": {"b": 1}, "keep": true}, "list": [1, {"x": 2}]});
        assert_eq!(p("spec.a.b").get(&v), Some(&json!(1)));
        assert_eq!(p("list[1].x").get(&v), Some(&json!(2)));
        assert_eq!(p("spec.missing.deeper").get(&v), None);
        assert_eq!(p("spec.a.b").take(&mut v), Some(json!(1)));
        // the emptied parent `a` goes with it, `spec` stays because of `keep`
        assert_eq!(v["spec"], json!({"keep": true}));
        p("spec.new.deep").set(&mut v, json!("x")).unwrap();
        assert_eq!(v["spec"]["new"], json!({"deep": "x"}));
        let err = p("spec.keep.inner").set(&mut v, json!(1)).unwrap_err();
        assert_eq!(
            err,
            SetError::NotAnObject {
                path: p("spec.keep.inner"),
                at: p("spec.keep")
            }
        );
        assert_eq!(
            err.to_string(),
            "cannot set `spec.keep.inner`: `spec.keep` is not an object"
        );
        let err = p("list[5].x").set(&mut v, json!(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot set `list[5].x`: no list element at `list[5]`"
        );
        let err = p("list[5]").set(&mut v, json!(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot set `list[5]`: no list element there"
        );
        let err = p("list[*].x").set(&mut v, json!(1)).unwrap_err();
        assert_eq!(err.to_string(), "cannot set `list[*].x`: it has a wildcard");
        assert_eq!(p("nothing.here").take(&mut v), None);
    }

    #[test]
    fn select_expands_wildcards() {
        let v = json!({"c": [{"n": "a"}, {"m": 1}, {"n": "b"}]});
        let got: Vec<String> = p("c[*].n")
            .select(&v)
            .into_iter()
            .map(|(path, val)| format!("{path}={val}"))
            .collect();
        assert_eq!(got, ["c[0].n=\"a\"", "c[2].n=\"b\""]);
    }

    #[test]
    fn json_pointer_escapes() {
        assert_eq!(
            p(r#"metadata.labels["app.kubernetes.io/name"]"#).to_json_pointer(),
            "/metadata/labels/app.kubernetes.io~1name"
        );
        assert_eq!(p(r#"a["x~y"][3]"#).to_json_pointer(), "/a/x~0y/3");
    }

    #[test]
    fn paths_meet_where_their_subtrees_overlap() {
        let p = |t: &str| {
            if t.is_empty() {
                Path::root()
            } else {
                Path::parse(t).unwrap()
            }
        };
        let token = p("spec.users[*].token");
        for at in [
            "spec.users[0]",
            "spec",
            "",
            "spec.users[2].token.value",
            "spec.users[*]",
        ] {
            assert!(token.meets(&p(at)), "{at}");
            assert!(p(at).meets(&token), "{at}");
        }
        for at in ["spec.users[0].name", "status", "spec.owner.token"] {
            assert!(!token.meets(&p(at)), "{at}");
        }
    }
}
