//! The shapes of pi's events that the parser reads (see lenient.rs): only the fields the
//! report and the pane use, each read leniently.

use serde::Deserialize;
use serde_json::Value;

use super::super::lenient::{Content, Flag, Num, Present, Str, lenient};

lenient! {
    /// The fields of a kept event that the report and the pane use (see lenient.rs).
    #[allow(non_snake_case)]
    pub(super) struct Event<'a> {
        id: Str<'a> = "id",
        message: Message<'a> = "message",
        tool_name: Str<'a> = "toolName",
        args: Present<Value> = "args",
        result: ToolOutput<'a> = "result",
        is_error: Flag = "isError",
        attempt: Num = "attempt",
        max_attempts: Num = "maxAttempts",
        error_message: Str<'a> = "errorMessage",
        success: Flag = "success",
        reason: Str<'a> = "reason",
        command: Str<'a> = "command",
        error: Str<'a> = "error",
        data: Present<State<'a>> = "data",
    }
}

lenient! {
    /// RPC mode: the `data` of `get_state`'s `response`.
    pub(super) struct State<'a> {
        session_id: Str<'a> = "sessionId",
    }
}

lenient! {
    pub(super) struct Message<'a> {
        role: Str<'a> = "role",
        stop_reason: Str<'a> = "stopReason",
        error_message: Str<'a> = "errorMessage",
        model: Str<'a> = "model",
        usage: Present<MessageUsage<'a>> = "usage",
        content: Content<'a> = "content",
    }
}

lenient! {
    pub(super) struct MessageUsage<'a> {
        input: Num = "input",
        output: Num = "output",
        cache_read: Num = "cacheRead",
        cache_write: Num = "cacheWrite",
        total_tokens: Num = "totalTokens",
        cost: Cost<'a> = "cost",
    }
}

lenient! {
    pub(super) struct Cost<'a> {
        total: Num = "total",
    }
}

/// `tool_execution_end`'s `result`: the text of its `content`, or of itself when it has none
/// (a string or an array of text blocks).
#[derive(Default)]
pub(super) struct ToolOutput<'a>(pub(super) Content<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ToolOutput<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess};
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = ToolOutput<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<ToolOutput<'a>, A::Error> {
                let mut out = Content::default();
                while let Some(k) = a.next_key::<crate::adapter::lenient::Key<'de>>()? {
                    if k.0 == "content" {
                        out = a.next_value()?;
                    } else {
                        a.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(ToolOutput(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                a: A,
            ) -> Result<ToolOutput<'a>, A::Error> {
                Content::deserialize(serde::de::value::SeqAccessDeserializer::new(a))
                    .map(ToolOutput)
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                s: &'de str,
            ) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput(Content(std::borrow::Cow::Borrowed(s))))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput(Content(std::borrow::Cow::Owned(s.to_owned()))))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<ToolOutput<'a>, E> {
                Ok(ToolOutput::default())
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// `message_update`, read only as far as the pane needs.
#[derive(Deserialize)]
pub(super) struct Update<'a> {
    #[serde(rename = "assistantMessageEvent", borrow)]
    pub(super) event: Option<UpdateEvent<'a>>,
}

#[derive(Deserialize)]
pub(super) struct UpdateEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) delta: Option<std::borrow::Cow<'a, str>>,
}
