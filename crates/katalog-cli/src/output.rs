//! Everything the commands print. Standard output is buffered and safe on
//! a closed pipe (`out!`, `outln!`; `err!` and `errln!` write standard error
//! after flushing it). Objects are written as they come ([`ObjectWriter`]),
//! in the shape the input had: a List in, a List out (its members around `items` kept in their order); several
//! objects as YAML documents (`---` between them), or, in JSON, as one
//! `kind: List` (kubectl's convention), so that every output reads back as
//! input.

use serde_json::{Map, Value};

use crate::args::{Format, Output};
use crate::exit::{self, Exit, USAGE};
use crate::jsonpath;

/// Print to standard output (buffered; flushed before anything goes to
/// standard error and at the end). A closed pipe (`katalog ... | head`)
/// never panics: what follows is dropped, and the command ends with its own
/// exit code.
macro_rules! out {
    ($($arg:tt)*) => {{
        $crate::output::write_out(format_args!($($arg)*));
    }};
}
macro_rules! outln {
    () => {{
        $crate::output::write_out(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        $crate::output::write_out(format_args!($($arg)*));
        $crate::output::write_out(format_args!("\n"));
    }};
}
/// Print to standard error; a closed or failing standard error is ignored
/// (`eprintln!` would panic).
macro_rules! err {
    ($($arg:tt)*) => {{
        $crate::output::write_err(format_args!($($arg)*));
    }};
}
macro_rules! errln {
    () => {{
        $crate::output::write_err(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        $crate::output::write_err(format_args!($($arg)*));
        $crate::output::write_err(format_args!("\n"));
    }};
}

thread_local! {
    static STDOUT: std::cell::RefCell<std::io::BufWriter<std::io::Stdout>> =
        std::cell::RefCell::new(std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()));
}
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Standard output's reader has gone: nothing more is worth computing for it.
pub(crate) fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
thread_local! {
    /// Unit tests: what `out!` writes on this thread, when capturing.
    static CAPTURE: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Unit tests: what `f` prints with `out!`.
#[cfg(test)]
pub(crate) fn capture_out(f: impl FnOnce()) -> String {
    CAPTURE.with(|c| *c.borrow_mut() = Some(String::new()));
    f();
    CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default()
}

pub(crate) fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    #[cfg(test)]
    {
        use std::fmt::Write as _;
        let captured = CAPTURE.with(|c| {
            c.borrow_mut()
                .as_mut()
                .map(|buf| buf.write_fmt(args).is_ok())
        });
        if captured.is_some() {
            return;
        }
    }
    if stdout_closed() {
        return;
    }
    if let Err(e) = STDOUT.with(|o| o.borrow_mut().write_fmt(args)) {
        stdout_failed(e);
    }
}

/// [`write_out`] of bytes as they are (the server's answer, byte for byte).
pub(crate) fn write_out_bytes(bytes: &[u8]) {
    use std::io::Write as _;
    #[cfg(test)]
    {
        let captured = CAPTURE.with(|c| {
            c.borrow_mut()
                .as_mut()
                .map(|buf| buf.push_str(&String::from_utf8_lossy(bytes)))
        });
        if captured.is_some() {
            return;
        }
    }
    if stdout_closed() {
        return;
    }
    if let Err(e) = STDOUT.with(|o| o.borrow_mut().write_all(bytes)) {
        stdout_failed(e);
    }
}

pub(crate) fn flush_out() {
    use std::io::Write as _;
    if stdout_closed() {
        return;
    }
    if let Err(e) = STDOUT.with(|o| o.borrow_mut().flush()) {
        stdout_failed(e);
    }
}

pub(crate) fn write_err(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    flush_out();
    let _ = std::io::stderr().lock().write_fmt(args);
}

pub(crate) fn stdout_failed(e: std::io::Error) {
    STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return;
    }
    write_err(format_args!(
        "error: failed to write to standard output: {e}\n"
    ));
    std::process::exit(exit::RUNTIME.into());
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Yaml,
    Json,
    /// Kept in memory, for a template (`-o jsonpath=`): [`ObjectWriter::into_value`].
    Collect,
}

/// Writes the events of [`crate::input`] (after the command's work on each
/// object) to standard output.
pub struct ObjectWriter {
    shape: Shape,
    /// Top-level values written (documents, or items of the JSON wrapper).
    written: usize,
    /// JSON: the first plain object, held until a second one says the
    /// output is several objects.
    pending: Option<Value>,
    /// JSON: the wrapping List is open (several objects).
    wrapped: bool,
    /// JSON: a List was written as the whole output; what follows it is
    /// another JSON value.
    bare_list: bool,
    /// Inside a List: how many items so far.
    list: Option<usize>,
    /// [`Shape::Collect`]: the top-level values, and the List being read.
    collected: Vec<Value>,
    open: Option<(Map<String, Value>, Vec<Value>)>,
}

/// `s` with every line after the first indented by `level` steps of 2.
pub fn indent_rest(s: &str, level: usize) -> String {
    let pad = "  ".repeat(level);
    s.replace('\n', &format!("\n{pad}"))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn yaml(v: &impl serde::Serialize) -> String {
    serde_saphyr::to_string(v).unwrap_or_default()
}

/// A YAML item of a block sequence: `- ` before the first line, two spaces
/// before the others (empty lines left empty).
pub fn yaml_item(v: &Value) -> String {
    let text = yaml(v);
    let mut out = String::with_capacity(text.len() + 16);
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            out.push_str("- ");
        } else if !line.is_empty() {
            out.push_str("  ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

impl ObjectWriter {
    pub fn new(shape: Shape) -> Self {
        ObjectWriter {
            shape,
            written: 0,
            pending: None,
            wrapped: false,
            bare_list: false,
            list: None,
            collected: Vec::new(),
            open: None,
        }
    }

    /// JSON: the level of the next top-level value, opening the wrapping
    /// List when this is the second.
    fn json_top(&mut self) -> usize {
        if self.written == 0 && self.pending.is_none() {
            return 0;
        }
        if self.bare_list {
            outln!();
            return 0;
        }
        if !self.wrapped {
            self.wrapped = true;
            out!("{{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [");
            if let Some(first) = self.pending.take() {
                out!("\n    {}", indent_rest(&pretty(&first), 2));
                self.written += 1;
            }
        }
        if self.written > 0 {
            out!(",");
        }
        out!("\n    ");
        2
    }

    fn level(&self) -> usize {
        if self.wrapped { 2 } else { 0 }
    }

    /// What was collected ([`Shape::Collect`]): one value as it is, several
    /// as one `kind: List`, as the JSON output would be.
    pub fn into_value(mut self) -> Value {
        match self.collected.len() {
            1 => self.collected.remove(0),
            _ => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": self.collected}),
        }
    }

    pub fn object(&mut self, v: &Value) {
        if self.shape == Shape::Collect {
            match &mut self.open {
                Some((_, items)) => items.push(v.clone()),
                None => self.collected.push(v.clone()),
            }
            return;
        }
        match (self.shape, self.list) {
            (Shape::Yaml, Some(n)) => {
                if n == 0 {
                    outln!("items:");
                }
                out!("{}", yaml_item(v));
            }
            (Shape::Yaml, None) => {
                if self.written > 0 {
                    outln!("---");
                }
                out!("{}", yaml(v));
                self.written += 1;
            }
            (Shape::Json, Some(n)) => {
                let level = self.level() + 2;
                if n == 0 {
                    self.open_items();
                } else {
                    out!(",");
                }
                out!("\n{}{}", "  ".repeat(level), indent_rest(&pretty(v), level));
            }
            (Shape::Collect, _) => {}
            (Shape::Json, None) => {
                if self.written == 0 && self.pending.is_none() && !self.bare_list {
                    self.pending = Some(v.clone());
                    return;
                }
                let level = self.json_top();
                out!("{}", indent_rest(&pretty(v), level));
                self.written += 1;
            }
        }
        if let Some(n) = &mut self.list {
            *n += 1;
        }
    }

    /// JSON: `"items": [` after the members before it.
    fn open_items(&mut self) {
        let pad = "  ".repeat(self.level() + 1);
        out!("\n{pad}\"items\": [");
    }

    fn members(&self, m: &Map<String, Value>, first: bool) {
        let level = self.level() + 1;
        let pad = "  ".repeat(level);
        for (i, (k, v)) in m.iter().enumerate() {
            if i > 0 || !first {
                out!(",");
            }
            out!(
                "\n{pad}{}: {}",
                serde_json::to_string(k).unwrap_or_default(),
                indent_rest(&pretty(v), level)
            );
        }
    }

    pub fn list_begin(&mut self, before: &Map<String, Value>) {
        match self.shape {
            Shape::Collect => {
                self.open = Some((before.clone(), Vec::new()));
                return;
            }
            Shape::Yaml => {
                if self.written > 0 {
                    outln!("---");
                }
                if !before.is_empty() {
                    out!("{}", yaml(before));
                }
            }
            Shape::Json => {
                let top_first = self.written == 0 && self.pending.is_none() && !self.bare_list;
                if !top_first {
                    self.json_top();
                }
                if top_first {
                    self.bare_list = true;
                }
                out!("{{");
                self.members(before, true);
                if !before.is_empty() {
                    out!(",");
                }
            }
        }
        self.list = Some(0);
    }

    pub fn list_end(&mut self, after: &Map<String, Value>) {
        let n = self.list.take().unwrap_or(0);
        match self.shape {
            Shape::Collect => {
                if let Some((mut list, items)) = self.open.take() {
                    list.insert("items".into(), Value::Array(items));
                    list.extend(after.clone());
                    self.collected.push(Value::Object(list));
                }
            }
            Shape::Yaml => {
                if n == 0 {
                    outln!("items: []");
                }
                if !after.is_empty() {
                    out!("{}", yaml(after));
                }
            }
            Shape::Json => {
                let level = self.level();
                if n == 0 {
                    self.open_items();
                    out!("]");
                } else {
                    out!("\n{}]", "  ".repeat(level + 1));
                }
                self.members(after, false);
                out!("\n{}}}", "  ".repeat(level));
                if !self.wrapped {
                    outln!();
                }
            }
        }
        self.written += 1;
    }

    /// Ends the output: the held object, or the wrapping List's end.
    pub fn finish(&mut self) {
        if let Some(v) = self.pending.take() {
            outln!("{}", pretty(&v));
        }
        if self.wrapped {
            outln!("\n  ]\n}}");
        }
    }
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Objects in the `-o` form: YAML documents, JSON (several as one List), or
/// a template over that JSON.
pub(crate) fn print_objects(values: &[Value], output: &Output) -> Result<(), Exit> {
    let shape = match output {
        Output::Json => Shape::Json,
        Output::JsonPath(_) => Shape::Collect,
        _ => Shape::Yaml,
    };
    let mut writer = ObjectWriter::new(shape);
    for v in values {
        writer.object(v);
    }
    writer.finish();
    match output {
        Output::JsonPath(template) => print_jsonpath(template, &writer.into_value()),
        _ => Ok(()),
    }
}

/// `-o jsonpath=TEMPLATE`: kubectl's template over `value`.
pub(crate) fn print_jsonpath(template: &str, value: &Value) -> Result<(), Exit> {
    let text = jsonpath::render(template, value)
        .map_err(|e| Exit(format!("error: -o jsonpath={template}: {e}"), USAGE))?;
    out!("{text}");
    Ok(())
}

pub(crate) fn print_values(values: &[Value], format: Format) {
    match format {
        Format::Json => {
            for v in values {
                outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
            }
        }
        Format::Yaml => {
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    outln!("---");
                }
                out!("{}", serde_saphyr::to_string(v).unwrap_or_default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{Event, Limits, read_from};
    use proptest::prelude::*;
    use serde_json::json;

    /// Scalars, maps and lists as objects hold them; strings include
    /// YAML's troublemakers (markers, dashes, colons, newlines, quotes).
    fn value() -> impl Strategy<Value = Value> {
        let scalar = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            // Not integral (YAML and Go's JSON write 2.0 as 2, the same
            // number), and exact in binary: bit-exact floats are issue 35's
            // item 9, on the JSON reader's side.
            (-100_000i64..100_000).prop_map(|n| Value::from(n as f64 / 8.0 + 0.0625)),
            "[a-z0-9 :#'\"\\-]{0,12}".prop_map(Value::from),
            prop::sample::select(vec![
                "---", "...", "- x", "a: b", "#c", "\n---\n", "x\n\ny\n", " lead", "trail ",
                "items:", "- - -", "|", ">", "{a: 1}", "[1]", "0644", "1e3", "true", "y", "yes",
                "on", "No", "~", "null", "1_000", "0x1F", "0o17", "12:30", ".inf", "-.5", "",
            ])
            .prop_map(Value::from),
        ];
        scalar.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z][a-z0-9.-]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn object() -> impl Strategy<Value = Value> {
        (
            prop::collection::btree_map("[a-z]{1,5}", value(), 0..4),
            "[a-z]{1,6}",
        )
            .prop_map(|(m, name)| {
                let mut o = Map::new();
                o.insert("apiVersion".into(), json!("example.com/v1"));
                o.insert("kind".into(), json!("Thing"));
                o.insert("metadata".into(), json!({"name": name}));
                o.extend(m.into_iter().filter(|(k, _)| k != "items" && k != "kind"));
                Value::Object(o)
            })
    }

    /// Write `objects` (as one List, or as documents) and read them back.
    fn round_trip(shape: Shape, objects: &[Value], list: bool) -> Vec<Value> {
        let text = capture_out(|| {
            let mut w = ObjectWriter::new(shape);
            if list {
                let mut before = Map::new();
                before.insert("apiVersion".into(), json!("v1"));
                w.list_begin(&before);
            }
            for o in objects {
                w.object(o);
            }
            if list {
                let mut after = Map::new();
                after.insert("kind".into(), json!("List"));
                w.list_end(&after);
            }
            w.finish();
        });
        let mut back = Vec::new();
        read_from(text.as_bytes(), "out", Limits::default(), &mut |e| {
            if let Event::Object(v) = e {
                back.push(v);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}\n{text}", e.0));
        back
    }

    proptest! {
        /// Law: every output reads back as the same objects, in YAML and in
        /// JSON, as documents and as a List.
        #[test]
        fn every_output_reads_back(objects in prop::collection::vec(object(), 0..5), list: bool) {
            for shape in [Shape::Yaml, Shape::Json] {
                prop_assert_eq!(&round_trip(shape, &objects, list), &objects, "{:?}", shape);
            }
        }
    }

    #[test]
    fn yaml_items_keep_block_scalars_readable() {
        let v = json!({"kind": "Pod", "data": {"script": "a\n\nb\n"}});
        let item = yaml_item(&v);
        assert!(item.starts_with("- kind: Pod\n  data:\n"), "{item}");
        let back = katalog_lang::yaml::read_documents(&item).unwrap();
        assert_eq!(back[0].to_value(), json!([v]));
    }
}
