//! Where an error about a CEL expression is shown: `<input>:LINE:COL` and
//! the line with a caret under it, at the token cel-go puts its caret
//! under (an operator, a call's `(`, a selection's `.`, a macro's name, an
//! element of a list or map literal). The parser's tree has no offsets, so
//! each node is found among the expression's tokens by what it looks like
//! (its needle) and its rank among the nodes that look the same.

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, LiteralValue, operators};

use super::{EQ_FUNCTION, IN_FUNCTION, NE_FUNCTION, NEG_FUNCTION};

/// An element of a list or map literal: its index, whether it is the
/// entry's value (else its key), and its node.
#[derive(Clone, Copy)]
pub(super) struct Element {
    pub(super) index: usize,
    pub(super) value: bool,
    pub(super) node: u64,
}

/// The needles of an expression's nodes and its tokens.
pub(super) struct Positions {
    needles: Vec<(u64, Needle)>,
    tokens: Vec<(usize, Token)>,
}

impl Positions {
    pub(super) fn new(ast: &IdedExpr, source: &str) -> Self {
        Positions {
            needles: source_order(ast),
            tokens: tokenize(source),
        }
    }

    /// The byte offset an error about `node` (or about `element` of the
    /// literal it names) is shown at, as cel-go shows it: at an element's
    /// operator, its call's `(`, its selection's `.`, else at its start;
    /// 0 where the node cannot be found.
    pub(super) fn offset(&self, node: u64, element: Option<Element>) -> usize {
        let (needles, tokens) = (&self.needles, &self.tokens);
        match element {
            Some(at) => match locate(needles, tokens, at.node) {
                Some(offset) => Some(match needles.iter().find(|(id, _)| *id == at.node) {
                    Some((_, Needle::Field(_))) => tokens
                        .iter()
                        .rposition(|(o, _)| *o < offset)
                        .filter(|&i| matches!(tokens[i].1, Token::Op("." | ".?")))
                        .map_or(offset, |i| tokens[i].0),
                    _ => offset,
                }),
                None => locate(needles, tokens, node)
                    .map(|list| element_at(tokens, list, at.index, at.value)),
            },
            None => locate(needles, tokens, node),
        }
        .unwrap_or(0)
    }
}

/// `<input>:LINE:COL` of the byte `at` of `source`, and its line with a
/// caret under it, as the parser shows a position.
pub(super) fn caret_at(source: &str, at: usize) -> (String, String) {
    let at = at.min(source.len());
    let line_start = source[..at].rfind('\n').map_or(0, |n| n + 1);
    let line_end = source[at..].find('\n').map_or(source.len(), |n| at + n);
    let line = source[..at].matches('\n').count() + 1;
    let col = source[line_start..at].chars().count() + 1;
    (
        format!("<input>:{line}:{col}"),
        format!("| {}\n| {:.>col$}", &source[line_start..line_end], "^"),
    )
}

/// What to look for in the source to put a caret under a node.
#[derive(Clone, Debug, PartialEq)]
enum Needle {
    /// `.f`, `?.f`, `['f']`.
    Field(String),
    /// An operator's token (`<=`, `in`, `[`).
    Op(&'static str),
    /// `name(`: a call, shown at its `(` as cel-go shows it.
    Call(String),
    /// `name(` of a macro, shown at its name.
    Macro(String),
}

/// The needle of every node an error can be reported at, in source order.
fn source_order(ast: &IdedExpr) -> Vec<(u64, Needle)> {
    fn op_token(name: &str) -> Option<&'static str> {
        Some(match name {
            operators::LOGICAL_AND => "&&",
            operators::LOGICAL_OR => "||",
            operators::LOGICAL_NOT => "!",
            NEG_FUNCTION | operators::NEGATE => "-",
            operators::CONDITIONAL => "?",
            EQ_FUNCTION | operators::EQUALS => "==",
            NE_FUNCTION | operators::NOT_EQUALS => "!=",
            operators::LESS => "<",
            operators::LESS_EQUALS => "<=",
            operators::GREATER => ">",
            operators::GREATER_EQUALS => ">=",
            operators::ADD => "+",
            operators::SUBSTRACT => "-",
            operators::MULTIPLY => "*",
            operators::DIVIDE => "/",
            operators::MODULO => "%",
            IN_FUNCTION | operators::IN => "in",
            operators::INDEX | operators::OPT_INDEX => "[",
            _ => return None,
        })
    }
    fn walk(e: &IdedExpr, accu: &mut Vec<String>, out: &mut Vec<(u64, Needle)>) {
        match &e.expr {
            Expr::Select(s) => {
                walk(&s.operand, accu, out);
                out.push((e.id, Needle::Field(s.field.clone())));
            }
            Expr::Call(call) if call.func_name == super::time::IN_RANGE => {
                call.args.iter().for_each(|a| walk(a, accu, out));
            }
            Expr::Call(call) => {
                let generated = call
                    .args
                    .iter()
                    .any(|a| matches!(&a.expr, Expr::Ident(n) if accu.contains(n)));
                let name = call.func_name.as_str();
                if let Some(op) = op_token(name) {
                    let field = match call.args.get(1).map(|a| &a.expr) {
                        Some(Expr::Literal(LiteralValue::String(f)))
                            if matches!(name, operators::INDEX | operators::OPT_INDEX) =>
                        {
                            Some(f.to_string())
                        }
                        _ => None,
                    };
                    let needle = match field {
                        Some(f) => Needle::Field(f),
                        None => Needle::Op(op),
                    };
                    let prefix = matches!(
                        name,
                        operators::LOGICAL_NOT | operators::NEGATE | NEG_FUNCTION
                    );
                    if prefix && !generated {
                        out.push((e.id, needle.clone()));
                    }
                    for (i, a) in call.args.iter().enumerate() {
                        if matches!(&a.expr, Expr::Ident(n) if accu.contains(n)) {
                            continue;
                        }
                        if i == 1 && matches!(needle, Needle::Field(_)) {
                            break;
                        }
                        match &a.expr {
                            // A list a macro's step builds (`__result__ +
                            // [x]`) is not in the source; its elements are.
                            Expr::List(l) if generated => {
                                l.elements.iter().for_each(|x| walk(x, accu, out));
                            }
                            _ => walk(a, accu, out),
                        }
                        if i == 0 && !prefix && !generated {
                            out.push((e.id, needle.clone()));
                        }
                    }
                    return;
                }
                if let Some(t) = &call.target {
                    walk(t, accu, out);
                }
                out.push((e.id, Needle::Call(name.to_owned())));
                for a in &call.args {
                    walk(a, accu, out);
                }
            }
            Expr::List(l) => {
                out.push((e.id, Needle::Op("[")));
                l.elements.iter().for_each(|x| walk(x, accu, out));
            }
            Expr::Map(m) => {
                out.push((e.id, Needle::Op("{")));
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        walk(&m.key, accu, out);
                        walk(&m.value, accu, out);
                    }
                }
            }
            Expr::Comprehension(c) => {
                walk(&c.iter_range, accu, out);
                out.push((e.id, Needle::Macro(macro_name(c).to_owned())));
                accu.push(c.accu_var.clone());
                walk(&c.loop_step, accu, out);
                accu.pop();
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => {}
        }
    }
    let mut out = Vec::new();
    walk(ast, &mut Vec::new(), &mut out);
    out
}

/// The macro a comprehension was written as, by the shape of its step.
fn macro_name(c: &ComprehensionExpr) -> &'static str {
    let Expr::Call(step) = &c.loop_step.expr else {
        return "all";
    };
    match step.func_name.as_str() {
        operators::LOGICAL_AND | super::macros::ALL_STEP => "all",
        operators::LOGICAL_OR | super::macros::EXISTS_STEP => "exists",
        operators::ADD => "map",
        operators::CONDITIONAL => match step.args.get(1).map(|a| &a.expr) {
            Some(Expr::Call(add))
                if add
                    .args
                    .get(1)
                    .is_some_and(|x| matches!(x.expr, Expr::Literal(LiteralValue::Int(_)))) =>
            {
                "exists_one"
            }
            Some(Expr::Call(add)) => match add.args.get(1).map(|x| &x.expr) {
                Some(Expr::List(l)) if matches!(l.elements.first().map(|x| &x.expr), Some(Expr::Ident(n)) if *n == c.iter_var) => {
                    "filter"
                }
                _ => "map",
            },
            _ => "all",
        },
        _ => "all",
    }
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Op(&'static str),
    Other,
}

/// The tokens of `source` that needles match, with their byte offsets.
fn tokenize(source: &str) -> Vec<(usize, Token)> {
    const OPS: [&str; 26] = [
        ".?", "&&", "||", "==", "!=", "<=", ">=", "[?", "!", "-", "?", "<", ">", "+", "*", "/",
        "%", "[", ".", "(", ")", "]", ",", ":", "{", "}",
    ];
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        // String and bytes literals, with their prefixes (r, b, rb, ...).
        let mut j = i;
        while j < bytes.len() && j - i < 2 && matches!(bytes[j], b'r' | b'R' | b'b' | b'B') {
            j += 1;
        }
        if j < bytes.len() && matches!(bytes[j], b'"' | b'\'') {
            let quote = bytes[j];
            let raw = source[i..j].contains(['r', 'R']);
            let triple = source[j..].starts_with(&String::from_utf8_lossy(&[quote; 3]).to_string());
            let open = if triple { 3 } else { 1 };
            let mut k = j + open;
            let content_start = k;
            let mut content_end = bytes.len();
            while k < bytes.len() {
                if bytes[k] == b'\\' && !raw {
                    k += 2;
                    continue;
                }
                let closes = if triple {
                    bytes[k..].starts_with(&[quote; 3])
                } else {
                    bytes[k] == quote
                };
                if closes {
                    content_end = k;
                    k += open;
                    break;
                }
                k += 1;
            }
            let end = content_end.min(bytes.len());
            out.push((start, Token::Str(source[content_start..end].to_owned())));
            i = k.max(start + 1);
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' || b == b'`' {
            let quoted = b == b'`';
            let mut k = i + 1;
            while k < bytes.len()
                && (if quoted {
                    bytes[k] != b'`'
                } else {
                    bytes[k].is_ascii_alphanumeric() || bytes[k] == b'_'
                })
            {
                k += 1;
            }
            let text = if quoted {
                let t = source[i + 1..k.min(bytes.len())].to_owned();
                k += 1;
                t
            } else {
                source[i..k].to_owned()
            };
            out.push((start, Token::Ident(text)));
            i = k.min(bytes.len()).max(start + 1);
            continue;
        }
        if let Some(op) = OPS.iter().find(|op| source[i..].starts_with(**op)) {
            out.push((start, Token::Op(op)));
            i += op.len();
            continue;
        }
        out.push((start, Token::Other));
        i += source[i..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// Whether the token at `i` is the one `needle` stands for.
fn matches_needle(tokens: &[(usize, Token)], i: usize, needle: &Needle) -> bool {
    let before = i.checked_sub(1).map(|p| &tokens[p].1);
    let after = tokens.get(i + 1).map(|t| &t.1);
    match (needle, &tokens[i].1) {
        (Needle::Field(f), Token::Ident(name)) => {
            name == f && matches!(before, Some(Token::Op("." | ".?")))
        }
        (Needle::Field(f), Token::Str(s)) => {
            s == f && matches!(before, Some(Token::Op("[" | "[?")))
        }
        (Needle::Op("in"), Token::Ident(name)) => name == "in",
        (Needle::Op("["), Token::Op("[" | "[?")) => true,
        (Needle::Op("-"), Token::Op("-")) => true,
        (Needle::Op(op), Token::Op(t)) => op == t,
        (Needle::Call(name) | Needle::Macro(name), Token::Ident(t)) => {
            name == t && after == Some(&Token::Op("("))
        }
        _ => false,
    }
}

/// The byte offset of an element of the list or map literal that opens at
/// byte `at`: the `index`-th element, or entry's key or `value` (after its
/// `:`). `at` itself when the tokens do not show it.
fn element_at(tokens: &[(usize, Token)], at: usize, index: usize, value: bool) -> usize {
    let Some(open) = tokens.iter().position(|(o, _)| *o == at) else {
        return at;
    };
    let mut depth = 0usize;
    let mut element = 0usize;
    let mut starts = !value;
    for (offset, token) in &tokens[open..] {
        match token {
            Token::Op("[" | "[?" | "(" | "{") => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            Token::Op("]" | ")" | "}") => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            Token::Op(",") if depth == 1 => {
                element += 1;
                starts = !value;
                continue;
            }
            Token::Op(":") if depth == 1 && value && element == index => {
                starts = true;
                continue;
            }
            // The `?` of an optional element is its start.
            _ => {}
        }
        if depth >= 1 && element == index && starts {
            return *offset;
        }
        if depth == 1 {
            starts = false;
        }
    }
    at
}

/// The byte offset of `node`'s needle: the k-th token that matches it,
/// k being the node's rank among the nodes with the same needle.
fn locate(needles: &[(u64, Needle)], tokens: &[(usize, Token)], node: u64) -> Option<usize> {
    // A call and a macro of one name match the same tokens.
    let token = |n: &Needle| match n {
        Needle::Macro(name) => Needle::Call(name.clone()),
        other => other.clone(),
    };
    let pos = needles.iter().position(|(id, _)| *id == node)?;
    let needle = &needles[pos].1;
    let rank = needles[..pos]
        .iter()
        .filter(|(_, n)| token(n) == token(needle))
        .count();
    let mut found = (0..tokens.len()).filter(|&i| matches_needle(tokens, i, needle));
    let first = found.clone().next();
    let i = found.nth(rank).or(first)?;
    // A call is shown at its `(`.
    let i = if matches!(needle, Needle::Call(_)) {
        i + 1
    } else {
        i
    };
    tokens.get(i).map(|t| t.0)
}

/// Where `name(` is called in `source` (the last segment of a namespaced
/// name), outside string literals, as the parser shows a position:
/// `<input>:LINE:COL`, and the line with a caret under the name.
pub(super) fn caret_at_call(source: &str, name: &str) -> (String, String) {
    let short = name.rsplit('.').next().unwrap_or(name);
    let bytes = source.as_bytes();
    let mut quote: Option<u8> = None;
    let mut at = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None => {
                let word_start =
                    i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
                if word_start && source[i..].starts_with(short) {
                    let rest = source[i + short.len()..].trim_start();
                    let word_end = !source[i + short.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
                    if word_end && rest.starts_with('(') {
                        at = Some(i);
                        break;
                    }
                }
            }
        }
        i += 1;
    }
    caret_at(source, at.unwrap_or(0))
}
