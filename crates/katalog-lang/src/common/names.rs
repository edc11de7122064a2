//! Checks of names and patterns that both halves of the language share
//! (conversion's stash annotations and split patterns, admission's label
//! keys and `pattern` checks), so neither compiler imports the other.

use std::collections::HashMap;

use regex::Regex;

/// A character of a DNS label: lowercase letters, digits and `-`.
pub fn is_dns_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// Checks a Kubernetes qualified name such as `example.com/x` (label and
/// annotation keys).
pub fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if name.is_empty() || name.len() > 63 {
        return Some("the name part must be 1 to 63 characters".into());
    }
    let ok_name = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ok_name {
        return Some("the name part must be alphanumeric with `-`, `_` or `.` inside".into());
    }
    if let Some(p) = prefix
        && (p.is_empty()
            || p.len() > 253
            || !p
                .split('.')
                .all(|l| !l.is_empty() && l.chars().all(is_dns_label_char) && !l.starts_with('-')))
    {
        return Some("the prefix must be a lowercase DNS subdomain".into());
    }
    None
}

/// Why a `pattern` does not compile: the regex crate's reason, its last
/// line (the caret diagram above it points into the anchored text the
/// author never wrote).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the pattern does not compile: {reason}")]
pub struct PatternError {
    pub reason: String,
}

/// Compile a pattern that must match the whole value; the error says why not.
pub fn anchored_regex(pattern: &str) -> Result<Regex, PatternError> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| PatternError {
        reason: e
            .to_string()
            .lines()
            .last()
            .unwrap_or("")
            .trim_start_matches("error: ")
            .to_string(),
    })
}

/// The anchored regexes of one compile, built once per distinct pattern: a
/// Katalog often checks many fields against one pattern, and a regex costs
/// far more to build (parse, NFA, and for a short pattern a full DFA) than
/// to share (a clone shares the automata and gets its own match caches).
#[derive(Debug, Default)]
pub struct Patterns(HashMap<String, Result<Regex, PatternError>>);

impl Patterns {
    /// [`anchored_regex`] of `pattern`, built the first time it is asked for.
    pub fn anchored(&mut self, pattern: &str) -> Result<Regex, PatternError> {
        if let Some(built) = self.0.get(pattern) {
            return built.clone();
        }
        let built = anchored_regex(pattern);
        self.0.insert(pattern.to_string(), built.clone());
        built
    }
}
