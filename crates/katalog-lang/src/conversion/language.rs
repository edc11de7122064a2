//! Questions about regular languages that the analysis asks of CRD
//! schemas: is there a string a schema allows (its `pattern`, `minLength`
//! and `maxLength`) that a conversion cannot take? Answered on DFAs
//! (`regex-automata`): a breadth-first search of the product of the
//! pattern's DFA and the DFA of what the conversion takes finds the
//! shortest such string.

use std::collections::{HashMap, VecDeque};

use regex_automata::dfa::{Automaton, dense};
use regex_automata::util::primitives::StateID;
use regex_automata::{Anchored, Input, MatchKind};

/// A state of the search: the pattern's DFA state, the accepted
/// language's DFA state, and the characters read (capped).
type Node = (StateID, StateID, usize);

/// How many product states the search visits before it gives up.
const SEARCH_LIMIT: usize = 200_000;

/// A string of the language `pattern` (an OpenAPI pattern: unanchored,
/// RE2 syntax; `None` allows every string) with `min_length` to
/// `max_length` characters, that no whole match of `accepted` covers: the
/// shortest one (fewest bytes) found. `None` when there is none, or when
/// the question is too big to answer here (a pattern the DFA builder
/// refuses, or more than [`SEARCH_LIMIT`] states to visit).
pub fn string_outside(
    pattern: Option<&str>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    accepted: &str,
) -> Option<String> {
    let pattern = match pattern {
        Some(p) => format!("(?s:.*)(?:{p})(?s:.*)"),
        None => "(?s:.*)".to_string(),
    };
    let allowed = dfa(&pattern)?;
    let accepted = dfa(accepted)?;
    let min = usize::try_from(min_length.unwrap_or(0)).ok()?;
    let max = max_length.and_then(|m| usize::try_from(m).ok());
    // Characters counted up to what the bounds can tell apart.
    let cap = max.unwrap_or(min);
    let start = |d: &dense::DFA<Vec<u32>>| {
        d.start_state_forward(&Input::new("").anchored(Anchored::Yes))
            .ok()
    };
    let first = (start(&allowed)?, start(&accepted)?, 0usize);
    // Each state with the state and byte it was reached from.
    let mut parents: HashMap<Node, Option<(Node, u8)>> = HashMap::from([(first, None)]);
    let mut queue = VecDeque::from([first]);
    while let Some(here) = queue.pop_front() {
        let (a, b, chars) = here;
        let ends = |d: &dense::DFA<Vec<u32>>, s| d.is_match_state(d.next_eoi_state(s));
        if chars >= min && ends(&allowed, a) && !ends(&accepted, b) {
            let mut bytes = Vec::new();
            let mut at = here;
            while let Some(Some((from, byte))) = parents.get(&at) {
                bytes.push(*byte);
                at = *from;
            }
            bytes.reverse();
            return String::from_utf8(bytes).ok();
        }
        for &byte in BYTE_ORDER.iter() {
            let next_a = allowed.next_state(a, byte);
            if allowed.is_dead_state(next_a) || allowed.is_quit_state(next_a) {
                continue;
            }
            let starts_char = byte & 0xC0 != 0x80;
            let chars = chars + usize::from(starts_char);
            if max.is_some_and(|m| chars > m) {
                continue;
            }
            let next = (next_a, accepted.next_state(b, byte), chars.min(cap));
            if parents.contains_key(&next) {
                continue;
            }
            if parents.len() >= SEARCH_LIMIT {
                return None;
            }
            parents.insert(next, Some((here, byte)));
            queue.push_back(next);
        }
    }
    None
}

/// The order the search tries bytes in, so that of the strings of one
/// length the one found is readable: digits, letters, other printable
/// ASCII, then the rest.
static BYTE_ORDER: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let mut order: Vec<u8> = (b'0'..=b'9')
        .chain(b'a'..=b'z')
        .chain(b'A'..=b'Z')
        .collect();
    order.extend((0x20..0x7f).filter(|b: &u8| !b.is_ascii_alphanumeric()));
    order.extend((0..=255).filter(|b: &u8| !(0x20..0x7f).contains(b)));
    order
});

/// An anchored DFA reporting every match, so that a match state after the
/// end of the input means the whole input matched.
fn dfa(pattern: &str) -> Option<dense::DFA<Vec<u32>>> {
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(regex_automata::dfa::StartKind::Anchored)
                .dfa_size_limit(Some(16 << 20))
                .determinize_size_limit(Some(16 << 20)),
        )
        .build(pattern)
        .ok()
}

/// The strings a `coerce` to an integer takes and gives back unchanged:
/// the canonical decimal form of an int64 (no `+`, no leading zero, no
/// `-0`).
pub fn int64_strings() -> String {
    let positive = at_most("9223372036854775807");
    let negative = at_most("9223372036854775808");
    format!("0|[1-9][0-9]{{0,17}}|{positive}|-(?:[1-9][0-9]{{0,17}}|{negative})")
}

/// The strings a `coerce` to a boolean takes and gives back unchanged.
pub const BOOLEAN_STRINGS: &str = "true|false";

/// The decimal numbers of exactly as many digits as `max` (no leading
/// zero) that are at most `max`, as a regex.
fn at_most(max: &str) -> String {
    let digits: Vec<u32> = max.chars().filter_map(|c| c.to_digit(10)).collect();
    let n = digits.len();
    let mut alternatives = Vec::new();
    for (i, &d) in digits.iter().enumerate() {
        let low = u32::from(i == 0);
        if d > low {
            alternatives.push(format!(
                "{}[{}-{}][0-9]{{{}}}",
                &max[..i],
                low,
                d - 1,
                n - i - 1
            ));
        }
    }
    alternatives.push(max.to_string());
    format!("(?:{})", alternatives.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(pattern: Option<&str>, min: Option<u64>, max: Option<u64>) -> Option<String> {
        string_outside(pattern, min, max, &int64_strings())
    }

    #[test]
    fn the_int64_language_is_exactly_the_canonical_integers() {
        let re = regex::Regex::new(&format!("^(?:{})$", int64_strings())).unwrap();
        for n in [
            0i64,
            1,
            -1,
            9,
            10,
            99,
            i64::MAX,
            i64::MIN,
            i64::MAX - 1,
            1 << 53,
        ] {
            assert!(re.is_match(&n.to_string()), "{n}");
        }
        for text in [
            "-0",
            "007",
            "+1",
            "",
            "9223372036854775808",
            "-9223372036854775809",
            "10000000000000000000",
            "1.0",
        ] {
            assert!(!re.is_match(text), "{text}");
        }
    }

    #[test]
    fn the_shortest_string_a_pattern_allows_and_an_integer_cannot_hold() {
        assert_eq!(int(None, None, None).as_deref(), Some(""));
        assert_eq!(int(None, Some(1), None).as_deref(), Some("a"));
        assert_eq!(int(Some("^[0-9]+$"), None, None).as_deref(), Some("00"));
        assert_eq!(
            int(Some("^[1-9][0-9]*$"), None, None).as_deref(),
            Some("9223372036854775808")
        );
        assert_eq!(int(Some("^[1-9][0-9]*$"), None, Some(18)), None);
        assert_eq!(int(Some("^(0|-?[1-9][0-9]{0,17})$"), None, None), None);
        assert_eq!(int(Some("^[1-9][0-9]{0,5}$"), None, None), None);
        // Unanchored, as OpenAPI patterns are: anything around a digit.
        assert_eq!(int(Some("[1-9]"), None, None).as_deref(), Some("01"));
        assert_eq!(int(Some("^x"), None, None).as_deref(), Some("x"));
        assert_eq!(
            string_outside(Some("^(true|false|yes)$"), None, None, BOOLEAN_STRINGS).as_deref(),
            Some("yes")
        );
        assert_eq!(
            string_outside(Some("^(true|false)$"), None, None, BOOLEAN_STRINGS),
            None
        );
    }
}
