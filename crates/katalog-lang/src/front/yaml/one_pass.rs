//! The common case read in one pass: the located tree built straight from
//! the parser's events, each scalar resolved while its style is at hand.
//!
//! This reader only answers when it is sure to give what the careful path
//! (serde-saphyr's tree, then the styles from a second parse) gives. It
//! steps aside (`None`) on anything that path treats specially or may
//! reject: a parse error, a tag, a merge key (`<<`), an alias used as a
//! key or into an anchor still open, a key that is not a scalar, keys that
//! may be duplicates, a value JSON cannot hold, and anchors or aliases
//! within half of serde-saphyr's budget for them. The careful path then
//! gives the answer, its errors and their positions included. Past the
//! [`Limits`] (nodes, depth) it answers itself, with the limit's error at
//! the node that went past it: size never makes the slower path run.

use std::collections::{HashMap, HashSet};

use serde_saphyr::Budget;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span};

use super::{Breach, Error, Limits, Plain, json_number, plain_key, resolve_plain};
use crate::front::source::{Node, NodeKind};

/// Every document of `text` (or the error of a count past `limits`), or
/// `None` when the careful path must decide.
pub(super) fn read(text: &str, limits: &Limits) -> Option<Result<Vec<Node>, Error>> {
    let budget = Budget::default();
    let mut reader = Reader {
        docs: Vec::new(),
        open: Vec::new(),
        root: None,
        anchors: HashMap::new(),
        counts: Counts::default(),
        limits: Counts {
            nodes: limits.nodes,
            depth: limits.depth,
            anchors: budget.max_anchors / 2,
            aliases: budget.max_aliases / 2,
            replayed: serde_saphyr::options::AliasLimits::default().max_total_replayed_events / 2,
        },
    };
    for item in Parser::new_from_str_with_options(text, parser_options(limits)) {
        let (event, span) = item.ok()?;
        reader.event(event, span)?;
        let c = &reader.counts;
        let breach = if c.nodes > limits.nodes {
            Breach::Nodes
        } else if c.depth > limits.depth {
            Breach::Depth
        } else {
            continue;
        };
        // An alias's copy is left to the careful path, whose alias
        // budget may say more.
        if c.aliases > 0 {
            return None;
        }
        let (line, column, _) = place(&span);
        return Some(Err(limits.breached(breach, line, column)));
    }
    let c = &reader.counts;
    // serde-saphyr's alias-to-anchor ratio check (100 aliases, 10 per
    // anchor), halved.
    let ratio = budget.alias_anchor_min_aliases / 2;
    let per_anchor = budget.alias_anchor_ratio_multiplier / 2;
    if c.aliases >= ratio && c.aliases > per_anchor.saturating_mul(c.anchors) {
        return None;
    }
    Some(Ok(reader.docs))
}

/// The parser as serde-saphyr configures it for `limits` (the careful
/// path's budget), so that both accept the same text; comments are
/// skipped.
fn parser_options(limits: &Limits) -> serde_saphyr::granit_parser::Options {
    let budget = Budget::default();
    let mut options = serde_saphyr::granit_parser::Options::default();
    options.simple_key_max_lookahead = budget.simple_key_max_lookahead;
    options.flow_nesting_limit = budget.flow_nesting_limit;
    options.block_nesting_limit = options
        .block_nesting_limit
        .max(limits.depth.saturating_add(1));
    options.emit_comments = false;
    options
}

/// What the limits count; also the limits this reader stays under (nodes
/// and depth: the text's, past which it reports the error; anchors and
/// aliases: half of serde-saphyr's, past which it steps aside).
#[derive(Default)]
struct Counts {
    nodes: usize,
    depth: usize,
    anchors: usize,
    aliases: usize,
    replayed: usize,
}

impl Counts {
    /// Within the anchors and aliases this reader answers for (nodes and
    /// depth are checked by [`read`]).
    fn within(&self, limits: &Counts) -> bool {
        self.anchors <= limits.anchors
            && self.aliases <= limits.aliases
            && self.replayed <= limits.replayed
    }
}

/// A collection whose end has not been read yet.
struct Open {
    node: Node,
    anchor: usize,
    /// A map's key waiting for its value.
    key: Option<Node>,
    /// A map's keys written otherwise than they resolve (`yes`, `0x10`);
    /// the others are the keys of its entries.
    written: Vec<String>,
    /// A large map's keys so far, as written and as resolved (a small
    /// map's are compared one by one, without a copy).
    keys: Option<HashSet<String>>,
    /// A map's plain keys that may read as numbers.
    numeric_keys: usize,
}

/// Up to this many keys, a map's keys are compared one by one.
const SMALL_MAP: usize = 24;

impl Open {
    fn entries(&self) -> usize {
        match &self.node.kind {
            NodeKind::Map(entries) => entries.len(),
            _ => 0,
        }
    }

    /// Whether a key so far was written or resolves as `key`.
    fn has_key(&self, key: &str) -> bool {
        if let Some(keys) = &self.keys {
            return keys.contains(key);
        }
        let NodeKind::Map(entries) = &self.node.kind else {
            return false;
        };
        entries
            .iter()
            .any(|(k, _)| matches!(&k.kind, NodeKind::String(s) if s == key))
            || self.written.iter().any(|w| w == key)
    }
}

struct Reader {
    docs: Vec<Node>,
    open: Vec<Open>,
    root: Option<Node>,
    anchors: HashMap<usize, Node>,
    counts: Counts,
    limits: Counts,
}

impl Reader {
    fn event(&mut self, event: Event<'_>, span: Span) -> Option<()> {
        match event {
            Event::StreamStart | Event::StreamEnd => {}
            Event::DocumentStart(..) => {
                self.root = None;
            }
            Event::DocumentEnd => {
                // A document whose root is a plain null (or empty) is
                // skipped, as serde-saphyr skips it.
                if let Some(root) = self.root.take()
                    && root.kind != NodeKind::Null
                {
                    self.docs.push(root);
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                if tag.is_some() {
                    return None;
                }
                self.counts.nodes += 1;
                let (line, column, defined_at) = place(&span);
                // The careful path finds a scalar's style by its byte range:
                // an empty quoted or block scalar there may take the style of
                // an empty plain one at the same place.
                if style != ScalarStyle::Plain && defined_at.is_none_or(|(_, len)| len == 0) {
                    return None;
                }
                let node = if self.at_key() {
                    self.key(&value, style, line, column)?
                } else {
                    let kind = match style {
                        ScalarStyle::Plain => plain_value(&value)?,
                        _ => NodeKind::String(value.into_owned()),
                    };
                    Node {
                        line,
                        column,
                        kind,
                        defined_at,
                    }
                };
                let node = Node { defined_at, ..node };
                self.anchor(anchor, &node);
                self.complete(node)?;
            }
            Event::Alias(id) => {
                if self.at_key() {
                    return None;
                }
                self.counts.aliases += 1;
                let (line, column, _) = place(&span);
                let mut node = self.anchors.get(&id)?.clone();
                let depth = relocate(&mut node, line, column, &mut self.counts);
                self.counts.depth = self.counts.depth.max(self.open.len() + depth);
                self.complete(node)?;
            }
            Event::SequenceStart(_, anchor, tag) => {
                self.start(&span, anchor, tag.is_some(), NodeKind::Seq(Vec::new()))?;
            }
            Event::MappingStart(_, anchor, tag) => {
                self.start(&span, anchor, tag.is_some(), NodeKind::Map(Vec::new()))?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let open = self.open.pop()?;
                if open.key.is_some() {
                    return None;
                }
                self.anchor(open.anchor, &open.node);
                self.complete(open.node)?;
            }
            _ => return None,
        }
        self.counts.within(&self.limits).then_some(())
    }

    fn start(&mut self, span: &Span, anchor: usize, tagged: bool, kind: NodeKind) -> Option<()> {
        if tagged || self.at_key() {
            return None;
        }
        self.counts.nodes += 1;
        if anchor != 0 {
            self.counts.anchors += 1;
        }
        let (line, column, defined_at) = place(span);
        self.open.push(Open {
            node: Node {
                line,
                column,
                kind,
                defined_at,
            },
            anchor,
            key: None,
            written: Vec::new(),
            keys: None,
            numeric_keys: 0,
        });
        self.counts.depth = self.counts.depth.max(self.open.len());
        Some(())
    }

    fn at_key(&self) -> bool {
        self.open
            .last()
            .is_some_and(|o| matches!(o.node.kind, NodeKind::Map(_)) && o.key.is_none())
    }

    /// A scalar key: its text as sigs.k8s.io/yaml writes it, if it cannot
    /// be a duplicate (serde-saphyr compares keys by value, `010` and `10`
    /// alike, so two plain keys that may be numbers are left to it).
    fn key(&mut self, value: &str, style: ScalarStyle, line: usize, column: usize) -> Option<Node> {
        let open = self.open.last_mut()?;
        let text = match style {
            ScalarStyle::Plain => {
                if value == "<<" {
                    return None;
                }
                if value
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.'))
                {
                    open.numeric_keys += 1;
                    if open.numeric_keys > 1 {
                        return None;
                    }
                }
                let key = Node {
                    line,
                    column,
                    kind: NodeKind::Null,
                    defined_at: None,
                };
                plain_key(value, &key).ok()?
            }
            _ => value.to_string(),
        };
        if open.has_key(value) || (text != value && open.has_key(&text)) {
            return None;
        }
        if text != value {
            open.written.push(value.to_string());
        }
        let grown = open.written.len() + open.entries() >= SMALL_MAP;
        match &mut open.keys {
            Some(keys) => {
                keys.insert(value.to_string());
                keys.insert(text.clone());
            }
            None if grown => {
                let mut keys: HashSet<String> = open.written.iter().cloned().collect();
                if let NodeKind::Map(entries) = &open.node.kind {
                    keys.extend(entries.iter().filter_map(|(k, _)| match &k.kind {
                        NodeKind::String(s) => Some(s.clone()),
                        _ => None,
                    }));
                }
                keys.insert(text.clone());
                open.keys = Some(keys);
            }
            None => {}
        }
        Some(Node {
            line,
            column,
            kind: NodeKind::String(text),
            defined_at: None,
        })
    }

    fn anchor(&mut self, anchor: usize, node: &Node) {
        if anchor != 0 {
            if !matches!(node.kind, NodeKind::Seq(_) | NodeKind::Map(_)) {
                self.counts.anchors += 1;
            }
            self.anchors.insert(anchor, node.clone());
        }
    }

    /// Put a finished node where it belongs: a document's root, a list's
    /// item, a map's key or a map's value.
    fn complete(&mut self, node: Node) -> Option<()> {
        let Some(open) = self.open.last_mut() else {
            self.root = Some(node);
            return Some(());
        };
        match &mut open.node.kind {
            NodeKind::Seq(items) => items.push(node),
            NodeKind::Map(entries) => match open.key.take() {
                Some(key) => entries.push((key, node)),
                None => open.key = Some(node),
            },
            _ => return None,
        }
        Some(())
    }
}

/// Line and column (1-based) and byte range (offset, length) of an event.
type Place = (usize, usize, Option<(usize, usize)>);

/// Where an event is, as serde-saphyr locates it.
fn place(span: &Span) -> Place {
    let defined_at = match (span.start.byte_offset(), span.end.byte_offset()) {
        (Some(start), Some(end)) => Some((start, end.saturating_sub(start))),
        _ => None,
    };
    (span.start.line(), span.start.col() + 1, defined_at)
}

/// A plain value scalar resolved the goyaml.v2 way; `None` for a number
/// JSON cannot hold (the careful path reports it).
fn plain_value(text: &str) -> Option<NodeKind> {
    Some(match resolve_plain(text) {
        Plain::Null => NodeKind::Null,
        Plain::Bool(b) => NodeKind::Bool(b),
        Plain::Int(i) => NodeKind::Number(i.into()),
        Plain::Uint(u) => NodeKind::Number(u.into()),
        Plain::Float(f) => NodeKind::Number(json_number(f)?),
        Plain::Str => NodeKind::String(text.to_string()),
    })
}

/// An alias's copy of its anchored node: serde-saphyr places every node of
/// a replayed alias at the alias. Counts the copy as the budget does
/// replayed events; returns the copy's depth in collections.
fn relocate(node: &mut Node, line: usize, column: usize, counts: &mut Counts) -> usize {
    node.line = line;
    node.column = column;
    counts.nodes += 1;
    counts.replayed += 1;
    match &mut node.kind {
        NodeKind::Seq(items) => {
            counts.replayed += 1;
            1 + items
                .iter_mut()
                .map(|n| relocate(n, line, column, counts))
                .max()
                .unwrap_or(0)
        }
        NodeKind::Map(entries) => {
            counts.replayed += 1;
            1 + entries
                .iter_mut()
                .map(|(k, v)| {
                    relocate(k, line, column, counts);
                    relocate(v, line, column, counts)
                })
                .max()
                .unwrap_or(0)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FILE_MAX_DEPTH, read_documents_carefully};
    use super::*;

    /// The one-pass reader either steps aside or agrees with the careful
    /// path, positions included.
    fn agrees(text: &str) -> Result<bool, String> {
        let limits = Limits::files();
        let Some(fast) = read(text, &limits) else {
            return Ok(false);
        };
        let fast = fast.map_err(|e| format!("{text:?}: one pass: {e}"))?;
        match read_documents_carefully(text, &limits) {
            Ok(careful) if careful == fast => Ok(true),
            Ok(careful) => Err(format!(
                "{text:?}: one pass read\n{fast:?}\ncarefully\n{careful:?}"
            )),
            Err(e) => Err(format!(
                "{text:?}: one pass read\n{fast:?}\ncarefully an error: {}",
                e.message()
            )),
        }
    }

    #[test]
    fn every_yaml_file_of_the_repository_reads_the_same() {
        let files = crate::front::yaml::repository_yaml_files();
        assert!(files.len() > 50, "found {} YAML files", files.len());
        let mut wrong = Vec::new();
        let mut stepped_aside = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            match agrees(&text) {
                Ok(true) => {}
                Ok(false) => stepped_aside.push(file.display().to_string()),
                Err(e) => wrong.push(format!("{}: {e}", file.display())),
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
        // The Katalogs and their suites (anchors and aliases included) take
        // the one pass; only merge keys are left to the careful path.
        let katalogs: Vec<_> = stepped_aside
            .iter()
            .filter(|f| f.contains("/katalogs/"))
            .filter(|f| !std::fs::read_to_string(f).unwrap().contains("<<:"))
            .collect();
        assert!(katalogs.is_empty(), "stepped aside for {katalogs:?}");
    }

    #[test]
    fn the_cases_the_careful_path_treats_specially() {
        // (text, whether the one-pass reader answers)
        let cases: &[(&str, bool)] = &[
            ("a: 0644\nb: '0644'\nc: \"yes\"\nd: yes\ne: ~\nf:\n", true),
            (
                "a: 1\n---\n---\n# only a comment\n---\nb: [x, {c: d}]\n",
                true,
            ),
            ("~\n---\nnull\n---\n''\n---\n", true),
            ("a: &x {b: 0x10, c: [1, *y]}\n", false),
            (
                "a: &x {b: 0x10, c: &y [1, 2]}\nd: *x\ne: *y\nf: &s on\ng: *s\n",
                true,
            ),
            ("a: &x [*x]\n", false),
            ("a: 1\na: 2\n", false),
            ("a: 1\n'a': 2\n", false),
            ("yes: 1\ntrue: 2\n", false),
            ("true: 1\nyes: 2\n", false),
            ("yes: 1\n'yes': 2\n", false),
            ("010: a\n10: b\n", false),
            ("1: a\n2: b\n", false),
            ("base: &b {m: 1}\nx: {<<: *b, n: 2}\n", false),
            ("'<<': 1\n", true),
            ("? |\n---\n\n", false),
            ("a: !!str 0644\n", false),
            ("! a: b\n", false),
            ("? [a]\n: b\n", false),
            ("? a\n: b\n", true),
            ("a: .inf\n", false),
            ("~: a\n", false),
            ("*x: 1\n", false),
            ("a: [\n", false),
            ("a: b: c\n", false),
            ("a: |\n  text\n  0644\nb: >-\n  folded\n  text\n", true),
            ("- - - - [[[[{}]]]]\n", true),
            ("\u{feff}a: 1\n", true),
            ("%YAML 1.2\n---\na: 1\n", true),
            ("a: 'it''s'\nb: \"\\u00e9\\n\"\nc: multi\n  line\n", true),
        ];
        let mut wrong = Vec::new();
        for (text, answers) in cases {
            match agrees(text) {
                Ok(a) if a == *answers => {}
                Ok(a) => wrong.push(format!("{text:?}: answered {a}, expected {answers}")),
                Err(e) => wrong.push(e),
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    }

    #[test]
    fn repeated_keys_of_large_maps_are_left_to_the_careful_path() {
        let keys: String = (0..40).map(|i| format!("k{i}: {i}\n")).collect();
        assert_eq!(agrees(&keys), Ok(true));
        for repeated in ["k3: x\n", "k39: x\n", "'k0': x\n"] {
            assert_eq!(
                agrees(&format!("{keys}{repeated}")),
                Ok(false),
                "{repeated}"
            );
        }
        let on = format!("on: 1\n{keys}true: 2\n");
        assert_eq!(agrees(&on), Ok(false));
        let on = format!("{keys}on: 1\ntrue: 2\n");
        assert_eq!(agrees(&on), Ok(false));
    }

    /// Within the limits, depth and size are read in one pass; past them,
    /// both readers give the same located error.
    #[test]
    fn the_limits_are_the_one_pass_readers_too() {
        let deep = |n: usize| format!("{}{}\n", "[".repeat(n), "]".repeat(n));
        assert_eq!(agrees(&deep(40)), Ok(true));
        // (Not compared with the careful path: its recursion at this depth
        // needs more than a debug build's test thread has.)
        assert!(matches!(
            read(&deep(FILE_MAX_DEPTH), &Limits::files()),
            Some(Ok(_))
        ));
        assert!(matches!(
            read(&deep(FILE_MAX_DEPTH + 1), &Limits::files()),
            Some(Err(Error::Limit { .. }))
        ));
        let limits = Limits {
            nodes: 1000,
            depth: 8,
        };
        let both = |text: &str| {
            let fast = read(text, &limits).expect("answers").map(|_| ());
            let careful = read_documents_carefully(text, &limits).map(|_| ());
            let show = |r: Result<(), Error>| r.map_err(|e| (e.message(), e.position()));
            (show(fast), show(careful))
        };
        let (fast, careful) = both(&deep(9));
        assert_eq!(fast, careful);
        assert_eq!(
            fast,
            Err((
                "the YAML nests lists and maps more than 8 levels deep (the limit for a file)"
                    .to_string(),
                Some((1, 9))
            ))
        );
        assert_eq!(both(&deep(8)), (Ok(()), Ok(())));
        // 1 map + 500 keys + 500 values = 1001 nodes.
        let wide: String = (0..500).map(|i| format!("k{i}: {i}\n")).collect();
        let (fast, careful) = both(&wide);
        assert_eq!(fast, careful);
        assert_eq!(
            fast,
            Err((
                "the YAML holds more than 1000 nodes (the limit for a file, counting scalars, lists and maps); \
                 raise it with --yaml-max-nodes or KATALOG_YAML_MAX_NODES"
                    .to_string(),
                Some((500, 7))
            ))
        );
        let fits: String = (0..499).map(|i| format!("k{i}: {i}\n")).collect();
        assert_eq!(both(&fits), (Ok(()), Ok(())));
    }

    /// Past half of serde-saphyr's default budget (125,000 of 250,000
    /// nodes) the one-pass reader stepped aside for the careful path, 2.7×
    /// slower per node (a cliff); now it reads on to the file's limits.
    #[test]
    fn a_large_file_takes_the_one_pass() {
        // 1 list + 30,000 × (1 map + 4 scalars) = 150,001 nodes.
        let text: String = (0..30_000)
            .map(|i| format!("- {{name: n{i}, value: {i}}}\n"))
            .collect();
        let docs = read(&text, &Limits::files()).expect("one pass").unwrap();
        match &docs[0].kind {
            NodeKind::Seq(items) => assert_eq!(items.len(), 30_000),
            other => panic!("{other:?}"),
        }
        let fewer = Limits {
            nodes: 150_000,
            ..Limits::files()
        };
        assert!(matches!(
            read(&text, &fewer),
            Some(Err(Error::Limit { line: 30_000, .. }))
        ));
    }

    /// A block of comments longer than the parser's look-ahead buffer (32
    /// comment events in serde-saphyr's budget) reads on both paths, in
    /// every place a comment may be.
    #[test]
    fn long_comment_blocks_read() {
        let block: String = (0..200).map(|i| format!("# line {i}\n")).collect();
        let indented: String = (0..200).map(|i| format!("  # line {i}\n")).collect();
        let texts = [
            format!("{block}a: 1\n"),
            format!("a: 1\n{block}b: 2\n"),
            format!("a:\n{indented}  b: 1\n{indented}  c: [1, 2]\n"),
            format!("- 1\n{block}- 2\n"),
            format!("a: 1\n{block}---\n{block}b: 2\n{block}"),
            format!("? a\n{block}: 1\n"),
        ];
        for text in &texts {
            assert_eq!(agrees(text), Ok(true), "{text}");
            assert!(
                read_documents_carefully(text, &Limits::files()).is_ok(),
                "{text}"
            );
        }
        // The careful path too, where the one pass steps aside (a tag).
        let tagged = format!("a: !!str 1\n{block}b: 2\n");
        let docs = read_documents_carefully(&tagged, &Limits::files()).unwrap();
        assert_eq!(docs[0].to_value(), serde_json::json!({"a": "1", "b": 2}));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        /// Text made of YAML's pieces, mostly broken: where the one-pass
        /// reader answers, the careful path agrees.
        #[test]
        fn token_soup_reads_the_same(
            tokens in proptest::collection::vec(proptest::sample::select(&[
                "a", "b", "k", ": ", ":", "\n", "  ", " ", "- ", "-", "[", "]", "{", "}", ", ",
                "&x ", "&y ", "*x", "*y", "'q'", "\"d\"", "''", "0644", "010", "10", "yes",
                "on", "~", "null", " #c", "---\n", "...\n", "<<", "!!str ", "! ", "1", "1.5",
                ".inf", "0x1F", "|\n", ">-\n", "? ", "\t", "\"\\n\"", "é", "%YAML 1.2\n",
            ][..]), 0..40)
        ) {
            let text: String = tokens.concat();
            if let Err(e) = agrees(&text) {
                proptest::prop_assert!(false, "{}", e);
            }
        }
    }
}
