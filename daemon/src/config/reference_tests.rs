//! The guide's configuration reference (`docs/src/config-reference.md`)
//! checked against the code: every key `config.toml` accepts has an entry
//! there, and every entry names a key the file accepts.
//!
//! The keys come from the serde types of [`super::file`] themselves: a
//! tracing deserializer walks [`ConfigFile`] and records each struct field
//! it is asked for, descending into every table, map of tables and array
//! of tables with `<name>` for the names a user picks. So a field added to
//! the file's types without a reference entry fails here, as does an entry
//! left behind when a field goes.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::file::ConfigFile;

/// The struct name toml's `Spanned<T>` asks for: its value is the key's
/// own value, at the same path.
const SPANNED: &str = "$__serde_spanned_private_Spanned";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";

#[derive(Debug)]
struct TraceError(String);

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TraceError {}

impl de::Error for TraceError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        TraceError(msg.to_string())
    }
}

/// A deserializer that answers every question with the smallest value of
/// the type asked for, and records the path of every struct field.
#[derive(Clone, Copy)]
struct Tracer<'a> {
    path: &'a str,
    keys: &'a RefCell<BTreeSet<String>>,
}

impl<'a> Tracer<'a> {
    fn child(path: &str, segment: &str) -> String {
        if path.is_empty() {
            segment.to_owned()
        } else {
            format!("{path}.{segment}")
        }
    }
}

macro_rules! smallest {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
            visitor.$visit($($value)?)
        })*
    };
}

impl<'de> Deserializer<'de> for Tracer<'_> {
    type Error = TraceError;

    smallest! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('a'),
        deserialize_str => visit_borrowed_str("a"),
        deserialize_string => visit_borrowed_str("a"),
        deserialize_bytes => visit_bytes(b"a"),
        deserialize_byte_buf => visit_bytes(b"a"),
        deserialize_unit => visit_unit(),
        deserialize_identifier => visit_borrowed_str("a"),
        deserialize_ignored_any => visit_unit(),
    }

    /// A value of any shape (`toml::Value`, `serde_json::Value`): a
    /// boolean, which both take.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_bool(false)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_seq(OneElement(Some(self)))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.deserialize_seq(visitor)
    }

    /// A map of tables by a name the user picks: one entry, `<name>`.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        let path = Self::child(self.path, "<name>");
        visitor.visit_map(Fields {
            fields: vec![("<name>", path)].into_iter(),
            value: None,
            keys: self.keys,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let fields: Vec<(&str, String)> = fields
            .iter()
            .map(|&field| {
                if name == SPANNED {
                    // The span's offsets and the value, which stays at the
                    // key's own path.
                    let path = if field == SPANNED_VALUE {
                        self.path.to_owned()
                    } else {
                        String::new()
                    };
                    (field, path)
                } else {
                    let path = Self::child(self.path, field);
                    self.keys.borrow_mut().insert(path.clone());
                    (field, path)
                }
            })
            .collect();
        visitor.visit_map(Fields {
            fields: fields.into_iter(),
            value: None,
            keys: self.keys,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let first = variants.first().copied().unwrap_or("a");
        visitor.visit_enum(de::value::BorrowedStrDeserializer::<TraceError>::new(first))
    }
}

struct OneElement<'a>(Option<Tracer<'a>>);

impl<'de> SeqAccess<'de> for OneElement<'_> {
    type Error = TraceError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, TraceError> {
        self.0
            .take()
            .map(|tracer| seed.deserialize(tracer))
            .transpose()
    }
}

/// A struct's fields (or a map's one entry), each followed by a tracer at
/// that field's path.
struct Fields<'a> {
    fields: std::vec::IntoIter<(&'static str, String)>,
    value: Option<String>,
    keys: &'a RefCell<BTreeSet<String>>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = TraceError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, TraceError> {
        let Some((field, path)) = self.fields.next() else {
            return Ok(None);
        };
        self.value = Some(path);
        seed.deserialize(de::value::BorrowedStrDeserializer::<TraceError>::new(field))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, TraceError> {
        let path = self.value.take().unwrap_or_default();
        seed.deserialize(Tracer {
            path: &path,
            keys: self.keys,
        })
    }
}

/// Every key path `config.toml` accepts, with `<name>` for names the user
/// picks (`providers.<name>.kind`).
fn keys_in_code() -> BTreeSet<String> {
    let keys = RefCell::new(BTreeSet::new());
    let traced = ConfigFile::deserialize(Tracer {
        path: "",
        keys: &keys,
    });
    // A failure would leave the fields after it untraced.
    assert!(
        traced.is_ok(),
        "tracing the config's types failed: {:?}",
        traced.err()
    );
    keys.into_inner()
}

/// The keys the reference documents: a heading naming a table (`` ##
/// `[providers.<name>]` `` or `` `[[bindings]]` ``) documents that table,
/// and each table row under it whose first cell is a key (`` | `kind` | ``)
/// documents `table.key`. A heading without a table is the top level.
fn keys_in_reference(text: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut table = String::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            table = first_code_span(line)
                .filter(|span| span.starts_with('['))
                .map(|span| span.trim_matches(|c| c == '[' || c == ']').to_owned())
                .unwrap_or_default();
            if !table.is_empty() {
                keys.insert(table.clone());
            }
        } else if let Some(cell) = line.strip_prefix("| `") {
            let Some(key) = cell.split('`').next() else {
                continue;
            };
            keys.insert(Tracer::child(&table, key));
        }
    }
    keys
}

fn first_code_span(line: &str) -> Option<&str> {
    let start = line.find('`')? + 1;
    let len = line[start..].find('`')?;
    Some(&line[start..start + len])
}

/// Keys the shared `[channels.<platform>]` table type has but one platform
/// refuses by name (`config::channels`): they are documented under the
/// other platform only. Each is checked to be refused, with a value of its
/// type, so the list cannot outlive the refusal.
const REFUSED: &[(&str, &str)] = &[
    ("channels.discord.mode", "mode = \"polling\""),
    (
        "channels.discord.poll_timeout_secs",
        "poll_timeout_secs = 30",
    ),
    (
        "channels.discord.webhook",
        "webhook = { url = \"https://a.example\" }",
    ),
    ("channels.telegram.guilds", "guilds = { \"1\" = {} }"),
    (
        "channels.telegram.message_content",
        "message_content = true",
    ),
    ("channels.telegram.catch_up_hours", "catch_up_hours = 1"),
    (
        "channels.telegram.catch_up_messages",
        "catch_up_messages = 1",
    ),
    (
        "channels.telegram.groups.<name>.allow_roles",
        "allow_roles = [\"1\"]",
    ),
];

#[test]
fn every_key_in_the_code_has_an_entry_in_the_reference_and_the_reverse() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/config-reference.md"
    );
    let text = std::fs::read_to_string(path).expect("the configuration reference");
    let code: BTreeSet<String> = keys_in_code()
        .into_iter()
        .filter(|k| {
            !REFUSED
                .iter()
                .any(|(key, _)| k == key || k.starts_with(&format!("{key}.")))
        })
        .collect();
    let documented = keys_in_reference(&text);
    let missing: Vec<_> = code.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/src/config-reference.md is out of step with config::file:\n\
         keys without an entry: {missing:#?}\nentries for no key: {unknown:#?}"
    );
}

#[test]
fn the_keys_left_out_per_platform_are_refused_there() {
    for (key, line) in REFUSED {
        let (table, name) = key.rsplit_once('.').expect("a table and a key");
        let table = table.replace("<name>", "\"-1001\"");
        let text = format!("[{table}]\n{line}\n");
        let home = crate::home::Home::at("/tmp/pincer-reference-test");
        let loaded = super::load::parse(&home, Path::new("/h/config.toml"), &text, &|| None);
        let Err(problem) = loaded else {
            panic!("{text}: accepted");
        };
        assert!(
            problem.to_string().contains(name),
            "{text}: refused without naming `{name}`: {problem}"
        );
    }
}

#[test]
fn the_tracer_sees_nested_tables_maps_and_arrays_of_tables() {
    let keys = keys_in_code();
    for key in [
        "default_agent",
        "daemon",
        "providers.<name>.kind",
        "channels.telegram.groups.<name>.senders.<name>.tools",
        "bindings.agent",
        "mcp.<name>.command",
    ] {
        assert!(keys.contains(key), "{key} not traced: {keys:#?}");
    }
}
