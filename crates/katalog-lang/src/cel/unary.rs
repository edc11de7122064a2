//! Repeated unary operators as cel-go reads them.
//!
//! CEL's grammar has `Unary = '!' {'!'} Member | '-' {'-'} Member`, and
//! cel-go's parser drops the operators in pairs: an even run is the member
//! itself (`!!true` is `true`, `--19` is `19`), an odd run one operator.
//! cel 0.13's parser keeps a single operator whatever the run's length, so
//! `!!true` was `false` and `--19` was `-19`. [`lex`]
//! rewrites the text the parser reads ([`lex`]): each run of two or more unary `!` or
//! `-` keeps its first operator (where cel-go puts the call) when its
//! length is odd and none when it is even, the others becoming spaces so that every byte offset (and so every caret
//! of an error) is unchanged.
//!
//! The scan knows just enough of CEL's lexical grammar not to touch what is
//! not an operator: string and bytes literals of every quoting (raw, triple),
//! quoted identifiers (`` `a.b` ``), comments, number literals (the `-` of
//! `1e-3`), `!=`, and a `-` after an operand, which is binary (`a---b` is
//! `a - b`: the binary `-` stays, the run of two after it goes).

use std::borrow::Cow;

/// What the parser is given, and what it must not be.
pub(super) struct Lexed<'a> {
    /// `expr` with every run of repeated unary `!` or `-` collapsed as
    /// cel-go collapses it (see the module documentation), and each
    /// negative hexadecimal literal in decimal ([`negative_hex`]); borrowed
    /// when nothing changes, which is every expression without either.
    pub text: Cow<'a, str>,
    /// The byte offset of the first backtick outside a literal or comment:
    /// a quoted identifier (`` m.`a.b` ``), which the kube-apiserver's CEL
    /// refuses ("unsupported syntax", cel-go without its ident-escape
    /// option) and cel 0.13 reads as a field named with the backticks.
    pub backtick: Option<usize>,
}

/// Scans `expr` once (see [`Lexed`]).
pub(super) fn lex(expr: &str) -> Lexed<'_> {
    if !expr.contains('-') && !expr.contains('`') && expr.bytes().filter(|&b| b == b'!').count() < 2
    {
        return Lexed {
            text: Cow::Borrowed(expr),
            backtick: None,
        };
    }
    let mut backtick = None;
    let bytes = expr.as_bytes();
    let mut blank: Vec<usize> = Vec::new();
    // Negative hexadecimal literals, rewritten in decimal: (where, text).
    let mut decimal: Vec<(usize, String)> = Vec::new();
    let mut i = 0;
    // Whether the last token ends an operand (so a `-` now is binary).
    let mut after_operand = false;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => i += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => i = line_end(bytes, i),
            b'!' | b'-' if !(c == b'!' && bytes.get(i + 1) == Some(&b'=')) => {
                // A run of this operator, whitespace and comments between.
                let mut ops = Vec::new();
                let mut j = i;
                loop {
                    match bytes.get(j) {
                        Some(&b) if b == c && !(c == b'!' && bytes.get(j + 1) == Some(&b'=')) => {
                            ops.push(j);
                            j += 1;
                        }
                        Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c') => j += 1,
                        Some(b'/') if bytes.get(j + 1) == Some(&b'/') => j = line_end(bytes, j),
                        _ => break,
                    }
                }
                // After an operand the first `-` is binary (a `!` there is
                // a syntax error the parser reports as it is).
                let unary = if after_operand && c == b'-' {
                    &ops[1..]
                } else if after_operand {
                    &ops[..0]
                } else {
                    &ops[..]
                };
                if unary.len() >= 2 {
                    let keep = unary.len() % 2;
                    blank.extend_from_slice(&unary[keep..]);
                }
                if c == b'-' && unary.len() % 2 == 1 {
                    decimal.extend(negative_hex(expr, j));
                }
                after_operand = false;
                i = ops.last().map_or(j, |last| last + 1);
            }
            b'"' | b'\'' => {
                i = string_end(bytes, i, false);
                after_operand = true;
            }
            b'`' => {
                backtick.get_or_insert(i);
                i = bytes[i + 1..]
                    .iter()
                    .position(|&b| b == b'`')
                    .map_or(bytes.len(), |p| i + 1 + p + 1);
                after_operand = true;
            }
            b'0'..=b'9' => {
                i = number_end(bytes, i);
                after_operand = true;
            }
            b'.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i = number_end(bytes, i);
                after_operand = true;
            }
            b'_' | b'a'..=b'z' | b'A'..=b'Z' => {
                let start = i;
                while i < bytes.len() && (bytes[i] == b'_' || bytes[i].is_ascii_alphanumeric()) {
                    i += 1;
                }
                let word = &expr[start..i];
                let prefix = word.len() <= 2
                    && word.bytes().all(|b| matches!(b, b'r' | b'R' | b'b' | b'B'))
                    && matches!(bytes.get(i), Some(b'"' | b'\''));
                if prefix {
                    let raw = word.bytes().any(|b| matches!(b, b'r' | b'R'));
                    i = string_end(bytes, i, raw);
                    after_operand = true;
                } else {
                    // `in` is an operator; every other word (identifiers,
                    // `true`, `false`, `null`) ends an operand.
                    after_operand = word != "in";
                }
            }
            b')' | b']' | b'}' => {
                i += 1;
                after_operand = true;
            }
            _ => {
                // Any other character: an operator or punctuation (or a
                // byte of a non-ASCII character, which the parser refuses
                // outside strings).
                i += 1;
                after_operand = false;
            }
        }
    }
    if blank.is_empty() && decimal.is_empty() {
        return Lexed {
            text: Cow::Borrowed(expr),
            backtick,
        };
    }
    let mut out = bytes.to_vec();
    for at in blank {
        out[at] = b' ';
    }
    for (at, text) in decimal {
        out[at..at + text.len()].copy_from_slice(text.as_bytes());
    }
    // Only ASCII operator bytes became ASCII spaces.
    let text = Cow::Owned(String::from_utf8(out).unwrap_or_else(|_| expr.to_owned()));
    Lexed { text, backtick }
}

/// The hexadecimal int literal at `at`, after a unary `-`, in decimal
/// padded with zeros to its width (`-0x10` is read `-0016`): cel 0.13's
/// parser reads the sign and the literal as one number and refuses a
/// negative hexadecimal one ("invalid int literal"), which cel-go takes.
/// `None` when it is not such a literal or its decimal form is wider
/// (from 10^12, `0xe8d4a51000`, written without leading zeros: rare).
fn negative_hex(expr: &str, at: usize) -> Option<(usize, String)> {
    let bytes = expr.as_bytes();
    if bytes.get(at) != Some(&b'0') || bytes.get(at + 1) != Some(&b'x') {
        return None;
    }
    let end = number_end(bytes, at);
    if matches!(bytes[end - 1], b'u' | b'U') {
        return None;
    }
    let value = u64::from_str_radix(&expr[at + 2..end], 16).ok()?;
    let width = end - at;
    let text = format!("{value:0>width$}");
    (text.len() == width).then_some((at, text))
}

/// The index just past the end of the line that holds `i`.
fn line_end(bytes: &[u8], i: usize) -> usize {
    bytes[i..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| i + p + 1)
}

/// The index just past the string literal whose opening quote is at
/// `start` (`'`, `"`, or either tripled); escapes are skipped unless `raw`.
/// An unterminated literal runs to the end (the parser reports it).
fn string_end(bytes: &[u8], start: usize, raw: bool) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' && !raw {
            i += 2;
        } else if b == quote
            && (!triple || (bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote)))
        {
            return i + if triple { 3 } else { 1 };
        } else if b == b'\n' && !triple {
            return i;
        } else {
            i += 1;
        }
    }
    bytes.len()
}

/// The index just past the number literal starting at `start`: digits,
/// a hex form, a fraction, an exponent with its sign, a `u` suffix.
fn number_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start;
    let hex = bytes[i] == b'0' && matches!(bytes.get(i + 1), Some(b'x' | b'X'));
    if hex {
        i += 2;
        while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
            i += 1;
        }
    } else {
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
            if bytes.get(i + 1 + sign).is_some_and(u8::is_ascii_digit) {
                i += 1 + sign;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
        }
    }
    if matches!(bytes.get(i), Some(b'u' | b'U')) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::lex;

    #[test]
    fn runs_collapse_in_pairs_and_nothing_else_moves() {
        for (expr, want) in [
            ("!!true", "  true"),
            ("!!!true", "!  true"),
            ("--19", "  19"),
            ("---19", "-  19"),
            ("- - 19", "    19"),
            ("-19", "-19"),
            ("!true", "!true"),
            ("a--b", "a--b"),
            ("a---b", "a-  b"),
            ("a - -b", "a - -b"),
            ("a != !!b", "a !=   b"),
            ("x in --y", "x in   y"),
            ("1e-3 - --2", "1e-3 -   2"),
            ("0x1e--1", "0x1e--1"),
            ("'--' + \"!!\" + '''--'''", "'--' + \"!!\" + '''--'''"),
            ("r'\\'--1", "r'\\'--1"),
            ("b'\\'--1'", "b'\\'--1'"),
            ("`a--b` + --1", "`a--b` +   1"),
            ("// --1\n--1", "// --1\n  1"),
            ("! // c\n !x", "  // c\n  x"),
            ("f(--x)[--1]", "f(  x)[  1]"),
            ("size('é') - --1", "size('é') -   1"),
            ("(a)--1", "(a)--1"),
            ("-0x55555555", "-1431655765"),
            ("- 0x10", "- 0016"),
            ("---0x10", "-  0016"),
            ("--0x10", "  0x10"),
            ("a -0x10", "a -0x10"),
            ("a - -0x10", "a - -0016"),
            ("-0x10u", "-0x10u"),
            ("-0x8000000000000000", "-0x8000000000000000"),
            ("-0xffffffff", "-4294967295"),
            ("'-0x10'", "'-0x10'"),
        ] {
            let got = lex(expr).text;
            assert_eq!(got, want, "{expr:?}");
            assert_eq!(got.len(), expr.len(), "{expr:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2_000, ..proptest::prelude::ProptestConfig::default()
        })]

        /// Over any text (operators, quotes, comments, unicode): the
        /// rewrite never panics, keeps every byte offset and changes only
        /// `!` and `-` into spaces, in pairs.
        #[test]
        fn the_rewrite_keeps_offsets_and_blanks_operators_in_pairs(
            expr in "([-!=a-z0-9 .'\"`/\\\n()\\[\\]e+]|π|é){0,40}"
        ) {
            let once = lex(&expr).text.into_owned();
            proptest::prop_assert_eq!(once.len(), expr.len());
            for (a, b) in expr.bytes().zip(once.bytes()) {
                proptest::prop_assert!(
                    a == b
                        || (b == b' ' && (a == b'!' || a == b'-'))
                        // A negative hexadecimal literal in decimal.
                        || (b.is_ascii_digit() && (a.is_ascii_hexdigit() || a == b'x'))
                );
            }
            let blanked = expr.bytes().zip(once.bytes()).filter(|(a, b)| a != b && *b == b' ').count();
            proptest::prop_assert_eq!(blanked % 2, 0);
        }
    }

    #[test]
    fn the_first_backtick_outside_literals_is_found() {
        for (expr, want) in [
            ("m.`a.b`", Some(2)),
            ("'`' + m.`a`", Some(8)),
            ("// `\n", None),
            ("\"`\" + r'`'", None),
            ("m.a", None),
            ("--x + `", Some(6)),
        ] {
            assert_eq!(lex(expr).backtick, want, "{expr:?}");
        }
    }
}
