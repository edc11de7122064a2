//! Reading objects one at a time, for `admit` and `convert`: an input of any
//! size is read as a stream, and only one object (with its text) is held at
//! once.
//!
//! - YAML is split into documents at `---` lines (as kubectl's YAML reader
//!   does), and a document that is a List written in block style (what
//!   `kubectl get -o yaml` prints) into its items, each read on its own;
//! - JSON is one value or several (JSON Lines, or values one after another),
//!   each an object, an array of objects or a List, whose elements are read
//!   one by one.
//!
//! The limit is per object ([`Limits::max_object_bytes`]); the YAML reader's
//! own budget (`katalog_lang::yaml`) then applies to one object, not to the
//! input.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use katalog_lang::json::node::ValueSeed;
use serde_json::{Map, Value};

use crate::exit::{Exit, USAGE};

mod json;

use json::{Counting, JsonFailed, read_json};

/// The default of `--max-object-bytes`: the text of one object. A real
/// object is far smaller (the apiserver stores at most about 1.5 MiB); the
/// limit only stops a runaway input from taking all memory.
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 64 * 1024 * 1024;

/// Lists inside Lists deeper than this are refused rather than followed.
const MAX_LIST_DEPTH: usize = 32;

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest text of one object (a document, a List's item, a JSON value).
    pub max_object_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
        }
    }
}

/// What the reader hands over, in input order.
#[derive(Debug, PartialEq)]
pub enum Event {
    /// A List begins: its members before `items`, in their order.
    ListBegin(Map<String, Value>),
    /// One object (Lists inside Lists flattened).
    Object(Value),
    /// The List ends: its members after `items`.
    ListEnd(Map<String, Value>),
}

pub type Sink<'a> = dyn FnMut(Event) -> Result<(), Exit> + 'a;

/// `<stdin>` for `-`.
pub fn display_name(file: &str) -> &str {
    if file == "-" { "<stdin>" } else { file }
}

/// Read `file` (`-`: standard input) and hand each object to `sink`.
pub fn read(file: &str, limits: Limits, sink: &mut Sink<'_>) -> Result<(), Exit> {
    let name = display_name(file);
    let source: Box<dyn Read> = if file == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(file)
                .map_err(|e| Exit(format!("error: failed to read {file}: {e}"), USAGE))?,
        )
    };
    read_from(
        BufReader::with_capacity(64 * 1024, source),
        name,
        limits,
        sink,
    )
}

/// Every object of `file`, Lists flattened (for the small inputs of
/// `--old` and `--namespace-object`).
pub fn read_all(file: &str) -> Result<Vec<Value>, Exit> {
    let mut objects = Vec::new();
    read(file, Limits::default(), &mut |e| {
        if let Event::Object(v) = e {
            objects.push(v);
        }
        Ok(())
    })?;
    Ok(objects)
}

/// [`read`] from any reader.
pub fn read_from<R: BufRead>(
    mut reader: R,
    name: &str,
    limits: Limits,
    sink: &mut Sink<'_>,
) -> Result<(), Exit> {
    let io = |e: std::io::Error| Exit(format!("error: failed to read {name}: {e}"), USAGE);
    // Leading blank lines are skipped, counted for the line numbers.
    let mut skipped_lines = 0;
    let first = loop {
        let buf = reader.fill_buf().map_err(io)?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                skipped_lines += buf[..i].iter().filter(|&&b| b == b'\n').count();
                let first = buf[i];
                // Keep the indentation of the first line for YAML.
                let line_start = buf[..i]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                reader.consume(line_start);
                break first;
            }
            None => {
                let n = buf.len();
                skipped_lines += buf.iter().filter(|&&b| b == b'\n').count();
                reader.consume(n);
            }
        }
    };
    if first == b'{' || first == b'[' {
        let mut counting = Counting::new(reader, limits.max_object_bytes);
        match read_json(&mut counting, name, skipped_lines, sink) {
            Err(JsonFailed::NotJson(e)) if counting.replayable() => {
                // `{kind: Pod}`: YAML in flow style. Read it again as YAML.
                let _ = e;
                let (recorded, rest) = counting.into_replay();
                let reader = BufReader::new(std::io::Cursor::new(recorded).chain(rest));
                read_yaml(reader, name, skipped_lines, limits, sink)
            }
            Err(JsonFailed::NotJson(e)) | Err(JsonFailed::Json(e)) => {
                Err(json_error(&e, name, skipped_lines, &counting, limits))
            }
            Err(JsonFailed::Sink(exit)) => Err(exit),
            Ok(()) => Ok(()),
        }
    } else {
        read_yaml(reader, name, skipped_lines, limits, sink)
    }
}

fn too_large(name: &str, line: usize, limits: Limits) -> Exit {
    Exit(
        format!(
            "error: {name}:{line}: an object is larger than {} bytes (--max-object-bytes); raise it with --max-object-bytes BYTES or KATALOG_MAX_OBJECT_BYTES",
            limits.max_object_bytes
        ),
        USAGE,
    )
}

fn json_error<R>(
    e: &serde_json::Error,
    name: &str,
    skipped_lines: usize,
    counting: &Counting<R>,
    limits: Limits,
) -> Exit {
    let line = e.line() + skipped_lines;
    if counting.tripped.get() {
        return too_large(name, line, limits);
    }
    let message = e.to_string();
    let message = match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message,
    };
    Exit(
        format!(
            "error: failed to parse {name}:{line}:{}: {message}",
            e.column()
        ),
        USAGE,
    )
}

/// Hands objects to the sink, Lists split into their items.
struct Emitter<'s, 'a> {
    sink: &'s mut Sink<'a>,
    name: String,
    /// An error of the sink, kept while the parser unwinds.
    failed: Option<Exit>,
}

impl Emitter<'_, '_> {
    fn emit(&mut self, e: Event) -> Result<(), Exit> {
        (self.sink)(e)
    }

    /// One object as read whole: a List is split, Lists in it flattened.
    fn value(&mut self, v: Value) -> Result<(), Exit> {
        if v.is_null() {
            return Ok(());
        }
        if !is_list(&v) {
            return self.emit(Event::Object(v));
        }
        let Value::Object(members) = v else {
            return Ok(());
        };
        let mut before = Map::new();
        let mut after = Map::new();
        let mut items = Vec::new();
        let mut seen = false;
        for (k, v) in members {
            match (k.as_str(), v) {
                ("items", Value::Array(a)) if !seen => {
                    seen = true;
                    items = a;
                }
                (_, v) if seen => {
                    after.insert(k, v);
                }
                (_, v) => {
                    before.insert(k, v);
                }
            }
        }
        self.emit(Event::ListBegin(before))?;
        for item in items {
            self.item(item)?;
        }
        self.emit(Event::ListEnd(after))
    }

    /// One item of a List: a List in it is flattened.
    fn item(&mut self, v: Value) -> Result<(), Exit> {
        if !is_list(&v) {
            return self.emit(Event::Object(v));
        }
        let mut stack = vec![(v, 1)];
        while let Some((v, depth)) = stack.pop() {
            if !is_list(&v) {
                self.emit(Event::Object(v))?;
                continue;
            }
            if depth >= MAX_LIST_DEPTH {
                return Err(Exit(
                    format!(
                        "error: {} nests Lists deeper than {MAX_LIST_DEPTH} levels",
                        self.name
                    ),
                    USAGE,
                ));
            }
            if let Value::Object(mut m) = v
                && let Some(Value::Array(children)) = m.remove("items")
            {
                stack.extend(children.into_iter().rev().map(|c| (c, depth + 1)));
            }
        }
        Ok(())
    }
}

/// `kind: List`, or a typed list such as `PodList`, holding `items`.
pub fn is_list(v: &Value) -> bool {
    v.get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && v.get("items").is_some_and(Value::is_array)
}

/// An item that makes a List of the document holding it: an object with a kind.
fn is_object_with_kind(v: &Value) -> bool {
    v.get("kind").is_some_and(Value::is_string)
}

// ---------------------------------------------------------------- YAML

/// Where a document is in its reading.
enum Doc {
    /// No `items:` yet: the document's text so far.
    Header { text: String, start: usize },
    /// Inside a block `items:`: the members before it (text, for when the
    /// document turns out not to be a List), the item being read.
    Items {
        before_text: String,
        start: usize,
        /// The members before `items`, once the first item said it is a List.
        streaming: bool,
        indent: Option<usize>,
        item: String,
        item_line: usize,
    },
    /// After the items of a List: the members after it.
    After { text: String, start: usize },
    /// Not a List read item by item: the whole document's text.
    Whole { text: String, start: usize },
}

impl Doc {
    /// The line where the object being read starts.
    fn object_start(&self, line_no: usize) -> usize {
        match self {
            Doc::Header { text, start } | Doc::Whole { text, start } => {
                if text.is_empty() {
                    line_no
                } else {
                    *start
                }
            }
            Doc::Items {
                item, item_line, ..
            } if !item.is_empty() => *item_line,
            Doc::Items { .. } => line_no,
            Doc::After { start, .. } => *start,
        }
    }
}

fn read_yaml<R: BufRead>(
    mut reader: R,
    name: &str,
    first_line: usize,
    limits: Limits,
    sink: &mut Sink<'_>,
) -> Result<(), Exit> {
    let mut emitter = Emitter {
        sink,
        name: name.to_string(),
        failed: None,
    };
    let mut line_no = first_line; // the number of the line just read
    let mut doc = Doc::Header {
        text: String::new(),
        start: first_line + 1,
    };
    let mut raw = Vec::new();
    loop {
        raw.clear();
        let n = read_line(&mut reader, &mut raw, limits.max_object_bytes + 1)
            .map_err(|e| Exit(format!("error: failed to read {name}: {e}"), USAGE))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if raw.len() > limits.max_object_bytes {
            return Err(too_large(name, doc.object_start(line_no), limits));
        }
        let line = std::str::from_utf8(&raw).map_err(|_| {
            Exit(
                format!("error: {name}:{line_no}: the input is not UTF-8 text"),
                USAGE,
            )
        })?;
        let marker = |m: &str| {
            line.strip_prefix(m)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
        };
        if marker("---") || marker("...") {
            finish_doc(doc, &mut emitter, name)?;
            // `--- {a: 1}`: the marker line opens the next document.
            let bare = line.trim_end() == "---" || !marker("---");
            doc = Doc::Header {
                text: if bare {
                    String::new()
                } else {
                    line.to_string()
                },
                start: if bare { line_no + 1 } else { line_no },
            };
            continue;
        }
        doc = yaml_line(doc, line, line_no, &mut emitter, name, limits)?;
    }
    finish_doc(doc, &mut emitter, name)
}

/// Append `line` to `text`, within the limit of one object.
fn push_limited(
    text: &mut String,
    line: &str,
    start: usize,
    name: &str,
    limits: Limits,
) -> Result<(), Exit> {
    if text.len() + line.len() > limits.max_object_bytes {
        return Err(too_large(name, start, limits));
    }
    text.push_str(line);
    Ok(())
}

fn yaml_line(
    doc: Doc,
    line: &str,
    line_no: usize,
    emitter: &mut Emitter<'_, '_>,
    name: &str,
    limits: Limits,
) -> Result<Doc, Exit> {
    Ok(match doc {
        Doc::Header { mut text, start } => {
            let rest = line.strip_prefix("items:").map(str::trim);
            if rest.is_some_and(|r| r.is_empty() || r.starts_with('#'))
                && !declares_other_kind(&text)
            {
                Doc::Items {
                    before_text: text,
                    start,
                    streaming: false,
                    indent: None,
                    item: String::new(),
                    item_line: line_no,
                }
            } else {
                push_limited(&mut text, line, start, name, limits)?;
                Doc::Header { text, start }
            }
        }
        Doc::Items {
            mut before_text,
            start,
            mut streaming,
            indent,
            mut item,
            mut item_line,
        } => {
            let body = line.trim_start_matches(' ');
            let ind = line.len() - body.len();
            let blank = body.trim().is_empty() || body.starts_with('#');
            let dash = body.starts_with('-') && body[1..].starts_with([' ', '\t', '\r', '\n'])
                || body.trim_end() == "-";
            if blank {
                if !item.is_empty() {
                    push_limited(&mut item, line, item_line, name, limits)?;
                }
                return Ok(Doc::Items {
                    before_text,
                    start,
                    streaming,
                    indent,
                    item,
                    item_line,
                });
            }
            match indent {
                None if dash => {
                    item_line = line_no;
                    item.push_str(line);
                    Doc::Items {
                        before_text,
                        start,
                        streaming,
                        indent: Some(ind),
                        item,
                        item_line,
                    }
                }
                // `items:` followed by no block sequence: read it whole.
                None => {
                    before_text.push_str("items:\n");
                    push_limited(&mut before_text, line, start, name, limits)?;
                    Doc::Whole {
                        text: before_text,
                        start,
                    }
                }
                Some(n) if ind == n && dash => {
                    match flush_item(
                        &mut before_text,
                        start,
                        &mut streaming,
                        std::mem::take(&mut item),
                        item_line,
                        emitter,
                        name,
                        limits,
                    )? {
                        Some(whole) => {
                            let mut text = whole;
                            push_limited(&mut text, line, start, name, limits)?;
                            return Ok(Doc::Whole { text, start });
                        }
                        None => {
                            item.push_str(line);
                            item_line = line_no;
                        }
                    }
                    Doc::Items {
                        before_text,
                        start,
                        streaming,
                        indent,
                        item,
                        item_line,
                    }
                }
                Some(n) if ind > n => {
                    push_limited(&mut item, line, item_line, name, limits)?;
                    Doc::Items {
                        before_text,
                        start,
                        streaming,
                        indent,
                        item,
                        item_line,
                    }
                }
                Some(_) => {
                    // The items end; the line is the next member.
                    match flush_item(
                        &mut before_text,
                        start,
                        &mut streaming,
                        item,
                        item_line,
                        emitter,
                        name,
                        limits,
                    )? {
                        Some(mut text) => {
                            push_limited(&mut text, line, start, name, limits)?;
                            Doc::Whole { text, start }
                        }
                        None => Doc::After {
                            text: line.to_string(),
                            start: line_no,
                        },
                    }
                }
            }
        }
        Doc::After { mut text, start } => {
            push_limited(&mut text, line, start, name, limits)?;
            Doc::After { text, start }
        }
        Doc::Whole { mut text, start } => {
            push_limited(&mut text, line, start, name, limits)?;
            Doc::Whole { text, start }
        }
    })
}

/// The members before `items` name a kind that is not a List.
fn declares_other_kind(text: &str) -> bool {
    text.lines().any(|l| {
        l.strip_prefix("kind:").is_some_and(|k| {
            let k = k.split('#').next().unwrap_or("").trim();
            let k = k.trim_matches(|c| c == '"' || c == '\'');
            !k.ends_with("List")
        })
    })
}

/// Read one item of a block `items:`. The first item decides: an object
/// with a kind makes the document a List read item by item (the members
/// before `items` are handed over first); anything else, and the document
/// is read whole: its text so far is returned.
#[allow(clippy::too_many_arguments)]
fn flush_item(
    before_text: &mut String,
    start: usize,
    streaming: &mut bool,
    item: String,
    item_line: usize,
    emitter: &mut Emitter<'_, '_>,
    name: &str,
    limits: Limits,
) -> Result<Option<String>, Exit> {
    if item.is_empty() {
        return Ok(None);
    }
    let value = parse_item(&item, item_line, name)?;
    if !*streaming {
        let before = parse_members(before_text, start, name)?;
        let is_list_kind = before
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"));
        if !(is_list_kind || is_object_with_kind(&value)) {
            let mut text = std::mem::take(before_text);
            text.push_str("items:\n");
            push_limited(&mut text, &item, start, name, limits)?;
            return Ok(Some(text));
        }
        *streaming = true;
        before_text.clear();
        emitter.emit(Event::ListBegin(before))?;
    }
    emitter.item(value)?;
    Ok(None)
}

fn finish_doc(doc: Doc, emitter: &mut Emitter<'_, '_>, name: &str) -> Result<(), Exit> {
    match doc {
        Doc::Header { text, start } | Doc::Whole { text, start } => {
            for v in parse_documents(&text, start, name)? {
                emitter.value(v)?;
            }
            Ok(())
        }
        Doc::Items {
            mut before_text,
            start,
            mut streaming,
            item,
            item_line,
            ..
        } => {
            let limits = Limits {
                max_object_bytes: usize::MAX,
            };
            if let Some(text) = flush_item(
                &mut before_text,
                start,
                &mut streaming,
                item,
                item_line,
                emitter,
                name,
                limits,
            )? {
                for v in parse_documents(&text, start, name)? {
                    emitter.value(v)?;
                }
                return Ok(());
            }
            if streaming {
                emitter.emit(Event::ListEnd(Map::new()))
            } else {
                // `items:` and nothing after it.
                before_text.push_str("items:\n");
                for v in parse_documents(&before_text, start, name)? {
                    emitter.value(v)?;
                }
                Ok(())
            }
        }
        Doc::After { text, start } => {
            let after = parse_members(&text, start, name)?;
            emitter.emit(Event::ListEnd(after))
        }
    }
}

/// The documents of `text`, which starts at line `start` of the input.
fn parse_documents(text: &str, start: usize, name: &str) -> Result<Vec<Value>, Exit> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let nodes =
        katalog_lang::yaml::read_documents(text).map_err(|e| yaml_error(&e, start, name))?;
    Ok(nodes.iter().map(|n| n.to_value()).collect())
}

/// A List's members around `items`, as a map.
fn parse_members(text: &str, start: usize, name: &str) -> Result<Map<String, Value>, Exit> {
    let mut map = Map::new();
    for v in parse_documents(text, start, name)? {
        match v {
            Value::Object(m) => map.extend(m),
            Value::Null => {}
            _ => {
                return Err(Exit(
                    format!("error: {name}:{start}: a document with `items` must be a map"),
                    USAGE,
                ));
            }
        }
    }
    Ok(map)
}

/// One item (`- ...`, at any indentation) as a value.
fn parse_item(text: &str, start: usize, name: &str) -> Result<Value, Exit> {
    let mut docs = parse_documents(text, start, name)?;
    match (docs.pop(), docs.is_empty()) {
        (Some(Value::Array(mut items)), true) if items.len() == 1 => Ok(items.remove(0)),
        _ => Err(Exit(
            format!("error: {name}:{start}: cannot read this item of `items` on its own"),
            USAGE,
        )),
    }
}

fn yaml_error(e: &katalog_lang::yaml::Error, start: usize, name: &str) -> Exit {
    let mut message = e.message();
    if message.contains("budget breached") {
        // The YAML reader's limits for one file, met by one object.
        message.push_str(
            " (the YAML reader's limit for one object, as for a Katalog file; split the object or give it as JSON)",
        );
    }
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    match e.position() {
        Some((line, column)) => Exit(
            format!(
                "error: failed to parse {name}:{}:{column}: {message}",
                line + start - 1
            ),
            USAGE,
        ),
        None => Exit(
            format!("error: failed to parse {name} (the document at line {start}): {message}"),
            USAGE,
        ),
    }
}

/// One line (with its `\n`), at most `max` bytes of it kept: a longer line
/// is cut there and the rest of it skipped, which the caller sees as a line
/// over the limit.
fn read_line<R: BufRead>(r: &mut R, out: &mut Vec<u8>, max: usize) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let room = max.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let n = chunk.len();
        total += n;
        r.consume(n);
        if done {
            return Ok(total);
        }
    }
}

impl crate::args::ObjectArgs {
    /// The inputs, in order: FILE then each `-f`; a directory gives its
    /// `.yaml`, `.yml` and `.json` files in name order.
    pub(crate) fn files(&self, file: Option<&str>) -> Result<Vec<String>, Exit> {
        let mut out = Vec::new();
        for f in file
            .into_iter()
            .chain(self.filenames.iter().map(String::as_str))
        {
            let path = Path::new(f);
            if f == "-" || !path.is_dir() {
                out.push(f.to_string());
                continue;
            }
            let entries = std::fs::read_dir(path)
                .map_err(|e| Exit(format!("error: failed to read {f}: {e}"), USAGE))?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && p.extension()
                            .and_then(|x| x.to_str())
                            .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
                })
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(Exit(
                    format!("error: {f} holds no .yaml, .yml or .json file"),
                    USAGE,
                ));
            }
            out.extend(files.into_iter().map(|p| p.display().to_string()));
        }
        Ok(out)
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_object_bytes: self.max_object_bytes,
        }
    }
}

/// Read every input, handing each object to `sink`; stops early, quietly,
/// once standard output's reader has gone.
pub(crate) fn read_inputs(
    files: &[String],
    limits: Limits,
    sink: &mut Sink<'_>,
) -> Result<(), Exit> {
    const STOPPED: u8 = u8::MAX;
    let mut guarded = |e| {
        if crate::output::stdout_closed() {
            return Err(Exit::quiet(STOPPED));
        }
        sink(e)
    };
    for f in files {
        match read(f, limits, &mut guarded) {
            Err(Exit(_, STOPPED)) => return Ok(()),
            other => other?,
        }
    }
    Ok(())
}

pub(crate) fn read_input(file: &str) -> Result<Vec<u8>, Exit> {
    if file == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Exit(format!("error: failed to read standard input: {e}"), USAGE))?;
        Ok(buf)
    } else {
        std::fs::read(file).map_err(|e| Exit(format!("error: failed to read {file}: {e}"), USAGE))
    }
}

/// A review as JSON bytes: JSON as it is, YAML turned into JSON.
pub(crate) fn read_review(file: &str) -> Result<Vec<u8>, Exit> {
    let body = read_input(file)?;
    if katalog_lang::json::node::parse_value(&body).is_ok() {
        return Ok(body);
    }
    let name = display_name(file);
    let mut reviews = Vec::new();
    let read = read_from(&body[..], name, Limits::default(), &mut |e| {
        if let Event::Object(v) = e {
            reviews.push(v);
        }
        Ok(())
    });
    if let Err(yaml) = read {
        // JSON that is broken says so as JSON.
        return Err(match katalog_lang::json::node::parse_value(&body) {
            Err(e) if body.trim_ascii_start().starts_with(b"{") => Exit(
                format!(
                    "error: failed to parse {name}:{}:{}: {} (a review is JSON or YAML)",
                    e.line(),
                    e.column(),
                    e.to_string()
                        .rsplit_once(" at line ")
                        .map_or(e.to_string(), |(m, _)| m.to_string())
                ),
                USAGE,
            ),
            _ => yaml,
        });
    }
    match reviews.as_slice() {
        [one] => Ok(serde_json::to_vec(one).unwrap_or_default()),
        other => Err(Exit(
            format!(
                "error: {name} holds {} documents; give one ConversionReview or AdmissionReview (JSON or YAML)",
                other.len()
            ),
            USAGE,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn events(text: &str) -> Result<Vec<Event>, String> {
        events_with(text, Limits::default())
    }

    fn events_with(text: &str, limits: Limits) -> Result<Vec<Event>, String> {
        let mut out = Vec::new();
        read_from(text.as_bytes(), "in.yaml", limits, &mut |e| {
            out.push(e);
            Ok(())
        })
        .map_err(|e| e.0)?;
        Ok(out)
    }

    fn names(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::ListBegin(m) => format!("begin{:?}", m.keys().collect::<Vec<_>>()),
                Event::ListEnd(m) => format!("end{:?}", m.keys().collect::<Vec<_>>()),
                Event::Object(v) => v
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
            })
            .collect()
    }

    const KUBECTL_LIST: &str = "apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: a
  spec:
    script: |
      echo one
      - not an item

      echo two
- apiVersion: v1
  kind: Pod
  metadata: {name: b}
kind: List
metadata:
  resourceVersion: \"\"
";

    use proptest::prelude::*;

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i32>().prop_map(Value::from),
            any::<bool>().prop_map(Value::Bool),
            "[a-z -]{0,8}".prop_map(Value::from),
            prop::sample::select(vec!["a\nb\n", "- x", "---", "#", "k: v"]).prop_map(Value::from),
        ]
    }

    fn object() -> impl Strategy<Value = Value> {
        let inner = leaf().prop_recursive(2, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        (
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..3),
            "[a-z]{1,5}",
        )
            .prop_map(|(m, n)| {
                let mut o = Map::new();
                o.insert("apiVersion".into(), json!("v1"));
                o.insert("kind".into(), json!("Pod"));
                o.insert("metadata".into(), json!({"name": n}));
                o.extend(m);
                Value::Object(o)
            })
    }

    proptest! {
        /// Law: a List read item by item is the List the YAML reader reads
        /// whole, at any indentation of its items, with comments and blank
        /// lines between them and members on either side of `items`.
        #[test]
        fn item_by_item_is_the_whole_list(
            objects in prop::collection::vec(object(), 1..5),
            indent in prop::sample::select(vec![0usize, 2, 4]),
            comments: bool,
            kind_first: bool,
        ) {
            let pad = " ".repeat(indent);
            let mut text = String::new();
            if kind_first {
                text.push_str("kind: List\n");
            }
            text.push_str("apiVersion: v1\nitems:\n");
            for o in &objects {
                if comments {
                    text.push_str("# a comment\n\n");
                }
                for (i, line) in serde_saphyr::to_string(o).unwrap_or_default().lines().enumerate() {
                    text.push_str(&pad);
                    text.push_str(if i == 0 { "- " } else { "  " });
                    text.push_str(line);
                    text.push('\n');
                }
            }
            if !kind_first {
                text.push_str("kind: List\n");
            }
            text.push_str("metadata: {resourceVersion: \"1\"}\n");
            let whole = katalog_lang::yaml::read_documents(&text).unwrap()[0].to_value();
            let streamed: Vec<Value> = events(&text)
                .unwrap()
                .into_iter()
                .filter_map(|e| match e {
                    Event::Object(v) => Some(v),
                    _ => None,
                })
                .collect();
            prop_assert_eq!(Some(&Value::Array(streamed)), whole.get("items"), "{}", text);
        }
    }

    #[test]
    fn a_kubectl_list_is_read_item_by_item() {
        let e = events(KUBECTL_LIST).unwrap();
        assert_eq!(
            names(&e),
            [
                "begin[\"apiVersion\"]",
                "a",
                "b",
                "end[\"kind\", \"metadata\"]"
            ]
        );
        assert_eq!(
            e[1],
            Event::Object(
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
                "spec": {"script": "echo one\n- not an item\n\necho two\n"}})
            )
        );
    }

    #[test]
    fn indented_items_and_documents_and_nested_lists() {
        let text = "kind: PodList\napiVersion: v1\nitems:\n  # first\n  - {kind: Pod, metadata: {name: a}}\n  - kind: List\n    items: [{kind: Pod, metadata: {name: b}}, {kind: Pod, metadata: {name: c}}]\n---\nkind: Pod\nmetadata: {name: d}\n--- {kind: Pod, metadata: {name: e}}\n...\n";
        assert_eq!(
            names(&events(text).unwrap()),
            [
                "begin[\"kind\", \"apiVersion\"]",
                "a",
                "b",
                "c",
                "end[]",
                "d",
                "e"
            ]
        );
    }

    #[test]
    fn a_document_whose_items_are_not_objects_is_one_object() {
        let text = "apiVersion: x/v1\nkind: Thing\nmetadata: {name: t}\nitems:\n- 1\n- 2\n";
        let e = events(text).unwrap();
        assert_eq!(names(&e), ["t"]);
        let text = "apiVersion: x/v1\nitems:\n- 1\n- 2\nmetadata: {name: t}\n";
        let e = events(text).unwrap();
        assert_eq!(names(&e), ["t"]);
        assert_eq!(
            e[0],
            Event::Object(
                json!({"apiVersion": "x/v1", "items": [1, 2], "metadata": {"name": "t"}})
            )
        );
    }

    #[test]
    fn json_values_arrays_lists_and_lines() {
        let text = "{\"kind\": \"List\", \"items\": [{\"kind\": \"Pod\", \"metadata\": {\"name\": \"a\"}}], \"metadata\": {}}\n{\"kind\": \"Pod\", \"metadata\": {\"name\": \"b\"}}\n[{\"kind\": \"Pod\", \"metadata\": {\"name\": \"c\"}}]\n";
        assert_eq!(
            names(&events(text).unwrap()),
            ["begin[\"kind\"]", "a", "end[\"metadata\"]", "b", "c"]
        );
        // Flow-style YAML is read again as YAML.
        assert_eq!(
            names(&events("{kind: Pod, metadata: {name: flow}}\n").unwrap()),
            ["flow"]
        );
    }

    #[test]
    fn errors_name_the_file_line_and_column() {
        let text = "kind: List\nitems:\n- kind: Pod\n  metadata: {name: a}\n- kind: Pod\n  metadata: {name: [b}\n";
        let err = events(text).unwrap_err();
        assert!(
            err.starts_with("error: failed to parse in.yaml:6:"),
            "{err}"
        );
        let err = events("[{\"kind\": \"Pod\"},\n {\"a\": tru}]").unwrap_err();
        assert!(
            err.starts_with("error: failed to parse in.yaml:2:"),
            "{err}"
        );
    }

    #[test]
    fn one_object_over_the_limit_is_refused_with_the_flag_named() {
        let limits = Limits {
            max_object_bytes: 100,
        };
        let big = format!("kind: Pod\nmetadata: {{name: {}}}\n", "x".repeat(200));
        let err = events_with(&format!("kind: Pod\n---\n{big}"), limits).unwrap_err();
        assert!(
            err.contains("in.yaml:3: an object is larger than 100 bytes (--max-object-bytes)"),
            "{err}"
        );
        let json = format!(
            "[{{\"kind\": \"Pod\"}}, {{\"kind\": \"{}\"}}]",
            "x".repeat(200)
        );
        let err = events_with(&json, limits).unwrap_err();
        assert!(err.contains("an object is larger than 100 bytes"), "{err}");
        // Many small objects are not.
        let many = "kind: Pod\n---\n".repeat(1000);
        assert_eq!(events_with(&many, limits).unwrap().len(), 1000);
    }
}
