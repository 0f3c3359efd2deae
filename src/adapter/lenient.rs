//! Typed, borrowed reading of the events an adapter keeps, with the tolerance of a
//! `serde_json::Value`: a field of an unexpected JSON type reads as absent instead of failing
//! the line, a repeated key keeps its last value, and strings without escapes are borrowed
//! from the line. Only the fields an adapter asks for are read; the rest of the line is
//! skipped by the same single pass that validates it.
//!
//! ```text
//!  line ─► UTF-8 check ─► serde_json (one pass) ─► lenient!{ struct } ─► Str / Num / Flag / Present / List / Content / Value
//!                                                   ├ LazyStr / LazyContent: the raw JSON text, decoded when asked for
//!                                                   └ any other key: skipped (IgnoredAny)
//! ```
//!
//! Common pitfalls:
//! * Read lines with `common::from_line`: serde_json's reader of bytes checks UTF-8 only in
//!   the strings it hands out, so a skipped field could carry invalid UTF-8 into
//!   events.jsonl; `from_line` checks the whole line first.
//! * [`LazyStr`] and [`LazyContent`] borrow the field's raw text from the line, which only
//!   serde_json's own reader can give: from any other deserializer they fail the line.
//! * `Option<T>` reads `null` as `None`; `Value::get` says the key is there. Where presence
//!   matters (usage objects), use [`Present`].
//! * A struct declared with [`lenient!`] reads any JSON: a non-object is its default, as
//!   `Value::get` on a non-object finds nothing.
//! * serde_json rejects a number out of `f64` range only where it converts it: such a number in
//!   a skipped field passes here, where the `Value` parse failed the whole line.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Declares a struct of lenient fields, each read from one key, that reads any JSON value:
/// an object fills the fields it has (the last of a repeated key wins), anything else is the
/// default. Field types must be lenient too (`Str`, `Num`, `Flag`, `Present`,
/// `List`, `Content`, another such struct, or `serde_json::Value`).
macro_rules! lenient {
    ($(#[$m:meta])* $vis:vis struct $name:ident<$a:lifetime> {
        $($field:ident : $ty:ty = $key:literal),* $(,)?
    }) => {
        $(#[$m])*
        #[derive(Default)]
        $vis struct $name<$a> {
            $(pub $field: $ty,)*
            _life: std::marker::PhantomData<&$a ()>,
        }

        impl<'de: $a, $a> serde::Deserialize<'de> for $name<$a> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                use serde::de::{self, IgnoredAny, MapAccess, SeqAccess};
                struct V<$a>(std::marker::PhantomData<&$a ()>);
                impl<'de: $a, $a> de::Visitor<'de> for V<$a> {
                    type Value = $name<$a>;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("any JSON value")
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<$name<$a>, A::Error> {
                        let mut out = $name::default();
                        while let Some(k) = a.next_key::<$crate::adapter::lenient::Key<'de>>()? {
                            match k.0.as_ref() {
                                $($key => out.$field = a.next_value()?,)*
                                _ => {
                                    a.next_value::<IgnoredAny>()?;
                                }
                            }
                        }
                        Ok(out)
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<$name<$a>, A::Error> {
                        while a.next_element::<IgnoredAny>()?.is_some() {}
                        Ok($name::default())
                    }
                    fn visit_str<E: de::Error>(self, _: &str) -> Result<$name<$a>, E> {
                        Ok($name::default())
                    }
                    fn visit_bool<E: de::Error>(self, _: bool) -> Result<$name<$a>, E> {
                        Ok($name::default())
                    }
                    fn visit_i64<E: de::Error>(self, _: i64) -> Result<$name<$a>, E> {
                        Ok($name::default())
                    }
                    fn visit_u64<E: de::Error>(self, _: u64) -> Result<$name<$a>, E> {
                        Ok($name::default())
                    }
                    fn visit_f64<E: de::Error>(self, _: f64) -> Result<$name<$a>, E> {
                        Ok($name::default())
                    }
                    fn visit_unit<E: de::Error>(self) -> Result<$name<$a>, E> {
                        Ok($name::default())
                    }
                }
                d.deserialize_any(V(std::marker::PhantomData))
            }
        }
    };
}
pub(crate) use lenient;

/// Implements the visitor methods of a lenient reader for every JSON shape it does not want:
/// the value is consumed and the reader's default returned.
macro_rules! others_are_default {
    ($out:ty) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$out, E> {
            Ok(Default::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$out, E> {
            Ok(Default::default())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$out, E> {
            Ok(Default::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$out, E> {
            Ok(Default::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<$out, E> {
            Ok(Default::default())
        }
    };
}

macro_rules! strings_are_default {
    ($out:ty) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<$out, E> {
            Ok(Default::default())
        }
    };
}

macro_rules! seqs_are_default {
    ($out:ty) => {
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<$out, A::Error> {
            while a.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
}

macro_rules! maps_are_default {
    ($out:ty) => {
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<$out, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
}

/// A string field: `Some` only when the value is a string (`Value::as_str`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Str<'a>(pub Option<Cow<'a, str>>);

impl<'a> Str<'a> {
    pub(crate) fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'a>, E> {
                Ok(Str(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Str<'a>, E> {
                Ok(Str(Some(Cow::Owned(s))))
            }
            others_are_default!(Str<'a>);
            seqs_are_default!(Str<'a>);
            maps_are_default!(Str<'a>);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A number field, as `Value` holds it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) enum Num {
    #[default]
    None,
    Pos(u64),
    Neg(i64),
    Float(f64),
}

impl Num {
    /// `Value::as_u64`.
    pub(crate) fn as_u64(self) -> Option<u64> {
        match self {
            Num::Pos(n) => Some(n),
            _ => None,
        }
    }
    /// `Value::as_i64`.
    pub(crate) fn as_i64(self) -> Option<i64> {
        match self {
            Num::Pos(n) => i64::try_from(n).ok(),
            Num::Neg(n) => Some(n),
            _ => None,
        }
    }
    /// `Value::as_f64`.
    pub(crate) fn as_f64(self) -> Option<f64> {
        match self {
            Num::Pos(n) => Some(n as f64),
            Num::Neg(n) => Some(n as f64),
            Num::Float(f) => Some(f),
            Num::None => None,
        }
    }
    /// `common::u64_at`: a `u64`, or a float that is not negative.
    pub(crate) fn tolerant_u64(self) -> Option<u64> {
        self.as_u64()
            .or_else(|| self.as_f64().filter(|x| *x >= 0.0).map(|x| x as u64))
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Num, E> {
                Ok(Num::Pos(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Num, E> {
                // serde_json gives non-negative integers as u64.
                Ok(if n < 0 {
                    Num::Neg(n)
                } else {
                    Num::Pos(n as u64)
                })
            }
            fn visit_f64<E: de::Error>(self, f: f64) -> Result<Num, E> {
                Ok(Num::Float(f))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Num, E> {
                Ok(Num::None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Num, E> {
                Ok(Num::None)
            }
            strings_are_default!(Num);
            seqs_are_default!(Num);
            maps_are_default!(Num);
        }
        d.deserialize_any(V)
    }
}

/// A boolean field: `Some` only when the value is a boolean (`Value::as_bool`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flag(pub Option<bool>);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Flag, E> {
                Ok(Flag(Some(b)))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Flag, E> {
                Ok(Flag(None))
            }
            strings_are_default!(Flag);
            seqs_are_default!(Flag);
            maps_are_default!(Flag);
        }
        d.deserialize_any(V)
    }
}

/// A field whose presence matters, whatever its value (`Value::get(k).is_some()`): `T` must
/// read any JSON (a [`lenient!`] struct does).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Present<T>(pub Option<T>);

impl<T> Default for Present<T> {
    fn default() -> Self {
        Present(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Present<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(|t| Present(Some(t)))
    }
}

/// An array field whose elements read any JSON: empty unless the value is an array
/// (`Value::as_array`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct List<T>(pub Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<List<T>, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element::<T>()? {
                    v.push(x);
                }
                Ok(List(v))
            }
            others_are_default!(List<T>);
            strings_are_default!(List<T>);
            maps_are_default!(List<T>);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A text that is a string, or an array of `{type: "text", text}` blocks, or neither (empty):
/// `common::content_text`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Content<'a>(pub Cow<'a, str>);

lenient! {
    /// One block of a content array.
    pub(crate) struct TextBlock<'a> {
        kind: Str<'a> = "type",
        text: Str<'a> = "text",
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Content<'a>, E> {
                Ok(Content(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Content<'a>, E> {
                Ok(Content(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Content<'a>, E> {
                Ok(Content(Cow::Owned(s)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Content<'a>, A::Error> {
                let mut out: Cow<'a, str> = Cow::Borrowed("");
                while let Some(b) = a.next_element::<TextBlock<'a>>()? {
                    if b.kind.get() == Some("text")
                        && let Some(t) = b.text.0
                    {
                        if out.is_empty() {
                            out = t;
                        } else {
                            out.to_mut().push_str(&t);
                        }
                    }
                }
                Ok(Content(out))
            }
            others_are_default!(Content<'a>);
            maps_are_default!(Content<'a>);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A field read only as far as its end, kept as the raw JSON text it is in the line, and
/// decoded when (and if) it is asked for: for the long texts that only the pane shows (a
/// tool's output, a message's text), which a flooding agent sends faster than anybody can
/// see them. Only serde_json's reader of the line gives a field's raw text (see
/// `common::from_line`); any other reader fails the line.
#[derive(Debug, Default)]
pub(crate) struct Raw<'a> {
    json: Option<&'a str>,
    text: std::cell::OnceCell<Option<Cow<'a, str>>>,
}

impl<'a> Raw<'a> {
    /// The raw JSON text of the value, as it was in the line.
    fn json(&self) -> Option<&'a str> {
        self.json
    }

    /// The value's text borrowed from the line, when it is a string without escapes (what
    /// most are): nothing to decode.
    fn unescaped_string(&self) -> Option<&'a str> {
        let inner = self.json?.strip_prefix('"')?.strip_suffix('"')?;
        memchr::memchr(b'\\', inner.as_bytes())
            .is_none()
            .then_some(inner)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Raw<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de serde_json::value::RawValue>::deserialize(d)?;
        Ok(Raw {
            json: Some(raw.get()),
            text: std::cell::OnceCell::new(),
        })
    }
}

/// A string field decoded when asked for: what [`Str`] reads, from a [`Raw`].
#[derive(Debug, Default)]
pub(crate) struct LazyStr<'a>(Raw<'a>);

impl<'a> LazyStr<'a> {
    /// `Some` only when the value is a string (`Value::as_str`).
    pub(crate) fn get(&self) -> Option<&str> {
        self.0
            .text
            .get_or_init(|| {
                if let Some(text) = self.0.unescaped_string() {
                    return Some(Cow::Borrowed(text));
                }
                serde_json::from_str::<String>(self.0.json()?)
                    .ok()
                    .map(Cow::Owned)
            })
            .as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LazyStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Raw::deserialize(d).map(LazyStr)
    }
}

/// A [`Content`] decoded when asked for.
#[derive(Debug, Default)]
pub(crate) struct LazyContent<'a>(Raw<'a>);

impl<'a> LazyContent<'a> {
    /// The text, as [`Content`] reads it.
    pub(crate) fn get(&self) -> &str {
        self.0
            .text
            .get_or_init(|| {
                if let Some(text) = self.0.unescaped_string() {
                    return Some(Cow::Borrowed(text));
                }
                serde_json::from_str::<Content<'a>>(self.0.json()?)
                    .ok()
                    .map(|c| c.0)
            })
            .as_deref()
            .unwrap_or("")
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LazyContent<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Raw::deserialize(d).map(LazyContent)
    }
}

/// A map key, borrowed from the line unless it holds escapes.
pub(crate) struct Key<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Str::deserialize(d).map(|s| Key(s.0.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    lenient! {
        struct T<'a> {
            s: Str<'a> = "s",
            n: Num = "n",
            b: Flag = "b",
            p: Present<Str<'a>> = "p",
            l: List<Str<'a>> = "l",
            c: Content<'a> = "c",
            ls: LazyStr<'a> = "ls",
            lc: LazyContent<'a> = "lc",
        }
    }

    /// Each lenient reader agrees with the `Value` accessor it stands for, on every shape.
    #[test]
    fn lenient_fields_read_as_value_accessors_do() {
        let shapes = [
            r#""text""#,
            r#""esc\"aped\n""#,
            r#""\u00e9t\u00e9 \ud83d\ude00""#,
            "5",
            "-5",
            "5.5",
            "-0.5",
            "18446744073709551615",
            "true",
            "null",
            r#"[1,"a",{"type":"text","text":"t"},{"type":"text","text":"u"},{"type":"x","text":"v"}]"#,
            r#"{"type":"text","text":"w"}"#,
        ];
        for shape in shapes {
            for key in ["s", "n", "b", "p", "l", "c", "ls", "lc"] {
                let line = format!(r#"{{"{key}":{shape},"other":[{{"deep":null}}]}}"#);
                let t: T<'_> = serde_json::from_str(&line).unwrap();
                let v: Value = serde_json::from_str(&line).unwrap();
                let f = v.get(key);
                let what = format!("{key} = {shape}");
                match key {
                    "s" => assert_eq!(t.s.get(), f.and_then(Value::as_str), "{what}"),
                    "n" => {
                        assert_eq!(t.n.as_u64(), f.and_then(Value::as_u64), "{what}");
                        assert_eq!(t.n.as_i64(), f.and_then(Value::as_i64), "{what}");
                        assert_eq!(t.n.as_f64(), f.and_then(Value::as_f64), "{what}");
                        assert_eq!(
                            t.n.tolerant_u64(),
                            super::super::common::u64_at(&v, key),
                            "{what}"
                        );
                    }
                    "b" => assert_eq!(t.b.0, f.and_then(Value::as_bool), "{what}"),
                    "p" => assert!(t.p.0.is_some(), "{what}"),
                    "l" => assert_eq!(
                        t.l.0.iter().map(|s| s.get()).collect::<Vec<_>>(),
                        f.and_then(Value::as_array)
                            .map(|a| a.iter().map(Value::as_str).collect::<Vec<_>>())
                            .unwrap_or_default(),
                        "{what}"
                    ),
                    "ls" => assert_eq!(t.ls.get(), f.and_then(Value::as_str), "{what}"),
                    "lc" => assert_eq!(
                        t.lc.get(),
                        super::super::common::content_text(f.unwrap()),
                        "{what}"
                    ),
                    _ => assert_eq!(
                        t.c.0,
                        super::super::common::content_text(f.unwrap()),
                        "{what}"
                    ),
                }
            }
        }
        let t: T<'_> = serde_json::from_str(r#"{"s":"a","s":5}"#).unwrap();
        assert_eq!(t.s.get(), None, "the last of a repeated key wins");
        let t: T<'_> = serde_json::from_str("[1]").unwrap();
        assert!(t.p.0.is_none(), "not an object: the default");
        assert!(serde_json::from_str::<T<'_>>(r#"{"s":"a""#).is_err());
    }
}
