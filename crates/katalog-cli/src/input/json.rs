//! The JSON reader: one value or several (JSON Lines, or values one after
//! another), each an object, an array of objects or a List whose elements
//! are read one by one, within the limit of one object's bytes.

use std::io::Read;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::*;

pub(super) enum JsonFailed {
    /// The input's first value failed before any object was read: maybe YAML.
    NotJson(serde_json::Error),
    Json(serde_json::Error),
    Sink(Exit),
}

/// Counts the bytes read, fails a read past the limit of one object, and
/// keeps what was read until the first object is handed over (so that an
/// input that turns out to be YAML can be read again).
pub(super) struct Counting<R> {
    pub(super) inner: R,
    pub(super) pos: Rc<Cell<usize>>,
    pub(super) mark: Rc<Cell<usize>>,
    pub(super) max: usize,
    pub(super) tripped: Rc<Cell<bool>>,
    pub(super) recorded: Rc<RefCell<Option<Vec<u8>>>>,
}

impl<R> Counting<R> {
    pub(super) fn new(inner: R, max: usize) -> Self {
        Counting {
            inner,
            pos: Rc::new(Cell::new(0)),
            mark: Rc::new(Cell::new(0)),
            max,
            tripped: Rc::new(Cell::new(false)),
            recorded: Rc::new(RefCell::new(Some(Vec::new()))),
        }
    }

    pub(super) fn replayable(&self) -> bool {
        self.recorded.borrow().is_some()
    }

    pub(super) fn into_replay(self) -> (Vec<u8>, R) {
        let recorded = self.recorded.borrow_mut().take().unwrap_or_default();
        (recorded, self.inner)
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let pos = self.pos.get() + n;
        self.pos.set(pos);
        if let Some(rec) = self.recorded.borrow_mut().as_mut() {
            rec.extend_from_slice(&buf[..n]);
        }
        if pos - self.mark.get() > self.max {
            self.tripped.set(true);
            return Err(std::io::Error::other("object over --max-object-bytes"));
        }
        Ok(n)
    }
}

/// What the JSON reader shares with its visitors.
pub(super) struct JsonState<'s, 'a> {
    emitter: Emitter<'s, 'a>,
    pos: Rc<Cell<usize>>,
    mark: Rc<Cell<usize>>,
    recorded: Rc<RefCell<Option<Vec<u8>>>>,
}

impl JsonState<'_, '_> {
    /// The next object's bytes are counted from here.
    fn mark(&self) {
        self.mark.set(self.pos.get());
    }

    fn emit<E: de::Error>(&mut self, e: Event) -> Result<(), E> {
        // An object was read: the input is JSON, no need to replay it.
        self.recorded.borrow_mut().take();
        self.emitter.emit(e).map_err(|x| self.failed(x))
    }

    fn item<E: de::Error>(&mut self, v: Value) -> Result<(), E> {
        self.recorded.borrow_mut().take();
        self.emitter.item(v).map_err(|x| self.failed(x))
    }

    fn value<E: de::Error>(&mut self, v: Value) -> Result<(), E> {
        self.recorded.borrow_mut().take();
        self.emitter.value(v).map_err(|x| self.failed(x))
    }

    fn failed<E: de::Error>(&mut self, x: Exit) -> E {
        self.emitter.failed = Some(x);
        E::custom("stopped")
    }
}

pub(super) fn read_json<R: Read>(
    counting: &mut Counting<R>,
    name: &str,
    _skipped_lines: usize,
    sink: &mut Sink<'_>,
) -> Result<(), JsonFailed> {
    let mut state = JsonState {
        emitter: Emitter {
            sink,
            name: name.to_string(),
            failed: None,
        },
        pos: counting.pos.clone(),
        mark: counting.mark.clone(),
        recorded: counting.recorded.clone(),
    };
    let recorded = counting.recorded.clone();
    let mut de = serde_json::Deserializer::from_reader(counting);
    loop {
        if de.end().is_ok() {
            return Ok(());
        }
        state.mark();
        let result = Top(&mut state).deserialize(&mut de);
        if let Err(e) = result {
            if let Some(x) = state.emitter.failed.take() {
                return Err(JsonFailed::Sink(x));
            }
            return Err(if recorded.borrow().is_some() {
                JsonFailed::NotJson(e)
            } else {
                JsonFailed::Json(e)
            });
        }
    }
}

/// One top-level JSON value: an array's elements and a List's items are
/// handed over one by one.
pub(super) struct Top<'r, 's, 'a>(&'r mut JsonState<'s, 'a>);

impl<'de> DeserializeSeed<'de> for Top<'_, '_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! scalar_visits {
    () => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
            self.0.value(Value::Bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
            self.0.value(Value::from(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
            self.0.value(Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
            self.0.value(Value::from(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
            self.0.value(Value::from(v))
        }
        fn visit_unit<E: de::Error>(self) -> Result<(), E> {
            Ok(())
        }
    };
}

impl<'de> Visitor<'de> for Top<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object, an array of objects or a List")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            self.0.mark();
            match seq.next_element_seed(ValueSeed)? {
                Some(v) => self.0.value(v)?,
                None => return Ok(()),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut before = Map::new();
        let mut after = Map::new();
        let mut streamed = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" && !streamed && !before.contains_key("items") {
                let kind_says_list = before
                    .get("kind")
                    .and_then(Value::as_str)
                    .map(|k| k.ends_with("List"));
                if kind_says_list == Some(false) {
                    let v = map.next_value_seed(ValueSeed)?;
                    before.insert(key, v);
                    continue;
                }
                match map.next_value_seed(Items {
                    state: self.0,
                    before: &before,
                    list_kind: kind_says_list == Some(true),
                })? {
                    ItemsRead::Streamed => streamed = true,
                    ItemsRead::Value(v) => {
                        before.insert(key, v);
                    }
                }
            } else {
                let v = map.next_value_seed(ValueSeed)?;
                if streamed {
                    after.insert(key, v);
                } else {
                    before.insert(key, v);
                }
            }
        }
        if streamed {
            self.0.emit(Event::ListEnd(after))
        } else {
            self.0.value(Value::Object(before))
        }
    }
}

pub(super) enum ItemsRead {
    /// Handed over one by one, after a `ListBegin`.
    Streamed,
    /// Not a list of objects: kept, for the document to be read whole.
    Value(Value),
}

pub(super) struct Items<'r, 's, 'a, 'b> {
    state: &'r mut JsonState<'s, 'a>,
    before: &'b Map<String, Value>,
    list_kind: bool,
}

impl<'de> DeserializeSeed<'de> for Items<'_, '_, '_, '_> {
    type Value = ItemsRead;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<ItemsRead, D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! delegate {
    ($($f:ident($t:ty)),*) => {$(
        fn $f<E: de::Error>(self, v: $t) -> Result<ItemsRead, E> {
            ValueSeed.$f(v).map(ItemsRead::Value)
        }
    )*};
}

impl<'de> Visitor<'de> for Items<'_, '_, '_, '_> {
    type Value = ItemsRead;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    delegate!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_str(&str),
        visit_string(String)
    );

    fn visit_unit<E: de::Error>(self) -> Result<ItemsRead, E> {
        Ok(ItemsRead::Value(Value::Null))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ItemsRead, A::Error> {
        ValueSeed.visit_map(map).map(ItemsRead::Value)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ItemsRead, A::Error> {
        self.state.mark();
        let Some(first) = seq.next_element_seed(ValueSeed)? else {
            if self.list_kind {
                self.state.emit(Event::ListBegin(self.before.clone()))?;
                return Ok(ItemsRead::Streamed);
            }
            return Ok(ItemsRead::Value(Value::Array(Vec::new())));
        };
        if !(self.list_kind || is_object_with_kind(&first)) {
            let mut all = vec![first];
            while let Some(v) = seq.next_element_seed(ValueSeed)? {
                all.push(v);
            }
            return Ok(ItemsRead::Value(Value::Array(all)));
        }
        self.state.emit(Event::ListBegin(self.before.clone()))?;
        self.state.item(first)?;
        loop {
            self.state.mark();
            match seq.next_element_seed(ValueSeed)? {
                Some(v) => self.state.item(v)?,
                None => return Ok(ItemsRead::Streamed),
            }
        }
    }
}
