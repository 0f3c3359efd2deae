//! The shapes of Codex's events that the parser reads (see lenient.rs): only the fields the
//! report and the pane use, each read leniently.

use serde_json::Value;

use super::super::lenient::{LazyStr, List, Num, Present, Str, lenient};

lenient! {
    /// The fields of a kept event that the report and the pane use (see lenient.rs).
    pub(super) struct Event<'a> {
        thread_id: Str<'a> = "thread_id",
        item: Present<Item<'a>> = "item",
        usage: Present<TurnUsage<'a>> = "usage",
        error: ErrorField<'a> = "error",
        message: Str<'a> = "message",
    }
}

lenient! {
    pub(super) struct Item<'a> {
        kind: Str<'a> = "type",
        id: Str<'a> = "id",
        command: Str<'a> = "command",
        server: Str<'a> = "server",
        tool: Str<'a> = "tool",
        query: Str<'a> = "query",
        text: LazyStr<'a> = "text",
        aggregated_output: LazyStr<'a> = "aggregated_output",
        status: Str<'a> = "status",
        message: Str<'a> = "message",
        arguments: Present<Value> = "arguments",
        exit_code: Num = "exit_code",
        error: ErrorField<'a> = "error",
        changes: List<Change<'a>> = "changes",
    }
}

lenient! {
    pub(super) struct Change<'a> {
        path: Str<'a> = "path",
    }
}

lenient! {
    pub(super) struct ErrorField<'a> {
        message: Str<'a> = "message",
    }
}

lenient! {
    pub(super) struct TurnUsage<'a> {
        input_tokens: Num = "input_tokens",
        cached_input_tokens: Num = "cached_input_tokens",
        output_tokens: Num = "output_tokens",
        cache_write_input_tokens: Num = "cache_write_input_tokens",
    }
}
