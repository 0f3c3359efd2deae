//! The shapes of Claude Code's events that the parser reads (see lenient.rs): only the fields
//! the report and the pane use, each read leniently.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::super::lenient::{Flag, LazyContent, LazyStr, List, Num, Present, Str, lenient};

lenient! {
    /// The fields of a kept event that the report and the pane use (see lenient.rs).
    pub(super) struct Event<'a> {
        subtype: Str<'a> = "subtype",
        session_id: Str<'a> = "session_id",
        model: Str<'a> = "model",
        attempt: Num = "attempt",
        max_retries: Num = "max_retries",
        error_status: Present<Value> = "error_status",
        error: Present<Value> = "error",
        message: Message<'a> = "message",
        is_api_error_message: Flag = "is_api_error_message",
        is_error: Flag = "is_error",
        result: Str<'a> = "result",
        errors: List<Value> = "errors",
        usage: Present<TokenUsage<'a>> = "usage",
        total_cost_usd: Num = "total_cost_usd",
        num_turns: Num = "num_turns",
        terminal_reason: Str<'a> = "terminal_reason",
        api_error_status: Num = "api_error_status",
        rate_limit_info: Present<RateLimitInfo<'a>> = "rate_limit_info",
        is_replay: Flag = "isReplay",
        response: Present<ControlResponse<'a>> = "response",
    }
}

lenient! {
    /// `rate_limit_event`'s `rate_limit_info`: a subscription's usage window. Paid extra
    /// usage (`overageStatus` `allowed` or `allowed_warning`) carries on past it.
    pub(super) struct RateLimitInfo<'a> {
        status: Str<'a> = "status",
        resets_at: Num = "resetsAt",
        rate_limit_type: Str<'a> = "rateLimitType",
        overage_status: Str<'a> = "overageStatus",
        is_using_overage: Flag = "isUsingOverage",
    }
}

lenient! {
    /// `control_response`'s `response`: which request it answers, and how.
    pub(super) struct ControlResponse<'a> {
        subtype: Str<'a> = "subtype",
        request_id: Str<'a> = "request_id",
    }
}

lenient! {
    pub(super) struct Message<'a> {
        id: Str<'a> = "id",
        usage: Present<TokenUsage<'a>> = "usage",
        content: List<Block<'a>> = "content",
    }
}

lenient! {
    /// A content block of an `assistant` (text, tool_use) or `user` (tool_result) message.
    pub(super) struct Block<'a> {
        kind: Str<'a> = "type",
        text: LazyStr<'a> = "text",
        name: Str<'a> = "name",
        input: Present<Value> = "input",
        content: LazyContent<'a> = "content",
        is_error: Flag = "is_error",
    }
}

lenient! {
    pub(super) struct TokenUsage<'a> {
        input_tokens: Num = "input_tokens",
        output_tokens: Num = "output_tokens",
        cache_read_input_tokens: Num = "cache_read_input_tokens",
        cache_creation_input_tokens: Num = "cache_creation_input_tokens",
    }
}

/// `stream_event`, read only as far as the pane needs.
#[derive(Deserialize)]
pub(super) struct StreamLine<'a> {
    #[serde(borrow)]
    pub(super) event: Option<StreamEvent<'a>>,
}

#[derive(Deserialize)]
pub(super) struct StreamEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) delta: Option<Delta<'a>>,
    /// `message_delta`: the message's output tokens so far.
    #[serde(default)]
    pub(super) usage: Option<DeltaUsage>,
}

#[derive(Deserialize)]
pub(super) struct DeltaUsage {
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) text: Option<Cow<'a, str>>,
}
