#!/usr/bin/env python3
"""A mock model server for testing the real agent CLIs offline (Python 3.11 stdlib only).

It speaks three wire formats, all as server-sent events:

  POST /v1/chat/completions   OpenAI Chat Completions (pi, "api": "openai-completions")
  POST /v1/responses          OpenAI Responses API    (codex, wire_api = "responses")
  POST /v1/messages           Anthropic Messages      (claude, ANTHROPIC_BASE_URL)

Anything else gets a small JSON answer (an empty model list, or 404) so no CLI hangs.

The answer is chosen by a marker in the conversation's user text, `SCENARIO:<name>`
(the last marker wins, so a resumed conversation can change scenario; a tool result's text
never counts, whatever it holds):

  plain             a fixed text, MOCK_TEXT
  tool_write        first call: the CLI's shell tool runs `echo hi > made_by_agent.txt`;
                    once the tool result is in the request: a final text
  tool_write_outside  like tool_write, and the same command also tries to write the path
                    given as `OUTSIDE:<path>` in the marker's text (`escaped.txt` there),
                    ignoring failure: for sandboxes, where that write must fail
  many_turns        a shell tool call (`echo turn N`) on every call until MANY_TURNS tool
                    results are in the request, then MOCK_TEXT: an agent that works on
                    for many turns, with the fixed usage per call (for budgets); with
                    PAUSE:<seconds> in the marker's text each call sleeps that long first
                    (an agent whose turns take time, for the live views)
  model_error       HTTP 500 (an api_error); the CLIs retry, so configure them to fail fast
  usage_limit       HTTP 429 as each API answers an account's usage limit, its reset an hour
                    ahead (`retry-after: 3600`; Anthropic's `anthropic-ratelimit-unified-*`:
                    status rejected, reset, representative-claim five_hour, without which
                    Claude Code takes the 429 for a transient one)
  context_overflow  the provider's context-length error (HTTP 400)
  flaky             the first call of each conversation fails with HTTP 500, the next succeeds
                    (provokes the CLIs' retry events)
  usage_limit_soon  `usage_limit` whose `retry-after` is 30 s (a limit Claude Code would retry,
                    ten times over minutes, instead of giving up); its unified reset is still
                    an hour ahead
  rate_limit_once   the first call of each conversation answers HTTP 429 with `retry-after: 1`
                    (a transient rate limit, no usage-limit headers), the next succeeds
  stall             SSE headers and one chunk, then silence until the client disconnects
  mcp_call          the marker's text also holds MCP_TOOL:<suffix> and MCP_ARGS:<base64 of a
                    JSON object>. First call: the offered tool whose name is the suffix or
                    ends with it after a separator (claude: `mcp__<server>__run`; codex: `run`
                    in the namespace tool `mcp__<server>`) with those arguments; a tool Claude
                    Code only names (deferred) is loaded with its ToolSearch tool first. Once
                    that tool's result is in the request: `Subagent said: ` and the result's
                    text (its first 4000 characters). No such tool: a text starting
                    `mock mcp_call: no tool ending in '<suffix>' was offered; tools: [...]`.
  tool_echo_env     the marker's text also holds ECHO_VAR:<NAME> (a variable's name). First
                    call: the CLI's shell tool prints that variable's value raw and as base64
                    on stdout, and raw on stderr (`printf '%s\n' "$NAME"; printf '%s' "$NAME" |
                    base64 -w0; echo; printf '%s\n' "$NAME" >&2`); once the tool result is in
                    the request: the final text `Tool said: ` and the result's text (its
                    first 4000 characters), so the value reaches the agent's answer too. No
                    ECHO_VAR: a text starting `mock tool_echo_env:` that says so
  steer             for steering tests: until a message of the conversation (any role, a
                    tool result never) holds a marker STEER:<word>, the CLI's shell tool runs
                    `sleep S; echo slept` (S from SLEEP:<seconds> in the marker's text,
                    default 2), at most 5 times; once one does, the final text
                    `Heard STEER:<word>` (the last such marker); after 5 sleeps without one,
                    `No steer heard`. Claude Code gives a message taken mid-turn as a system
                    message, which is why any role counts

Usage:
  server.py [--port-file FILE] [--log FILE] [--max-seconds N] [--dump-dir DIR]

The port is written to FILE (atomically) and printed as the first stdout line. The server
exits on SIGTERM, when its parent process dies, or after --max-seconds (default 900).
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import os
import re
import select
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

MOCK_TEXT = "Hello from the mock model."
TOOL_DONE_TEXT = "I wrote made_by_agent.txt."
TOOL_COMMAND = "echo hi > made_by_agent.txt"
MODEL_NAME = "mock-model"
MANY_TURNS = 30

# Fixed usage so tests can assert exact numbers.
USAGE = {"input": 120, "output": 8, "cache_read": 20, "cache_write": 0}

SCENARIO_RE = re.compile(r"SCENARIO:([a-z_]+)")
STALL_MAX_SECONDS = 600

_lock = threading.Lock()
_flaky_seen: set[tuple[str, str, str]] = set()
_log_file = None
_dump_dir: str | None = None
_counter = 0


def log(msg: str) -> None:
    line = f"{time.strftime('%H:%M:%S')} {msg}\n"
    if _log_file is not None:
        with _lock:
            _log_file.write(line)
            _log_file.flush()


def next_id(prefix: str) -> str:
    global _counter
    with _lock:
        _counter += 1
        return f"{prefix}_{_counter:04d}"


# ---------------------------------------------------------------- reading requests


def _texts(content) -> list[str]:
    """Text pieces of a message content in any of the three formats."""
    if isinstance(content, str):
        return [content]
    out = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict):
                t = part.get("text")
                if isinstance(t, str) and part.get("type") in ("text", "input_text", None):
                    out.append(t)
    return out


class Item(NamedTuple):
    """One entry of a request's conversation."""

    kind: str  # "user", "tool_result" or "other"
    text: str = ""  # the user's text, or the tool result's text
    tool: str = ""  # for a tool result: the name of the tool that was called ("" if unknown)


def _result_text(content) -> str:
    """The text of a tool result: a string, or a list of parts with a `text`."""
    if isinstance(content, str):
        return content
    out = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return "\n".join(out)


def _qualified(namespace, name) -> str:
    """A tool's full name: codex puts MCP tools in a namespace (`mcp__<server>` + `run`)."""
    return f"{namespace}__{name}" if namespace else (name or "")


def conversation(api: str, body: dict) -> list[Item]:
    """The request as a list of items. Tool results are their own items (with the called
    tool's name, found through the call id), never user text: a tool's output can hold
    anything, markers included, and must not pick the scenario."""
    items: list[Item] = []
    calls: dict[str, str] = {}  # call id -> tool name
    if api == "responses":
        inp = body.get("input")
        if isinstance(inp, str):
            return [Item("user", inp)]
        for it in inp or []:
            if not isinstance(it, dict):
                continue
            t = it.get("type")
            if t in ("function_call", "custom_tool_call", "local_shell_call", "tool_search_call"):
                calls[str(it.get("call_id"))] = _qualified(it.get("namespace"), it.get("name") or t)
                items.append(Item("other"))
            elif t in ("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                       "tool_search_output"):
                items.append(Item("tool_result", _result_text(it.get("output")),
                                  calls.get(str(it.get("call_id")), "")))
            elif it.get("role") == "user":
                items.append(Item("user", "\n".join(_texts(it.get("content")))))
            else:
                items.append(Item("other"))
        return items
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        content = m.get("content")
        if role == "assistant":
            for tc in m.get("tool_calls") or []:  # chat completions
                if isinstance(tc, dict):
                    calls[str(tc.get("id"))] = (tc.get("function") or {}).get("name", "")
            for part in content if isinstance(content, list) else []:  # anthropic
                if isinstance(part, dict) and part.get("type") == "tool_use":
                    calls[str(part.get("id"))] = part.get("name", "")
            items.append(Item("other"))
        elif role == "tool":  # chat completions
            items.append(Item("tool_result", _result_text(content), calls.get(str(m.get("tool_call_id")), "")))
        elif role == "user":
            # anthropic: tool results are blocks of a user message; the text beside them is
            # the CLI's (or a follow-up the CLI merged in), the results' content is not.
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    items.append(Item("tool_result", _result_text(part.get("content")),
                                      calls.get(str(part.get("tool_use_id")), "")))
            items.append(Item("user", "\n".join(_texts(content))))
        else:
            items.append(Item("other"))
    return items


def scenario_of(api: str, body: dict) -> tuple[str, list[Item], str]:
    """(scenario, the conversation after the marker, the marker's user text).

    Only user text counts, never a tool result; the last marker wins."""
    conv = conversation(api, body)
    scenario, at, text = "plain", -1, ""
    for i, item in enumerate(conv):
        if item.kind == "user":
            found = SCENARIO_RE.findall(item.text)
            if found:
                scenario, at, text = found[-1], i, item.text
    return scenario, conv[at + 1 :], text


class Tool(NamedTuple):
    """A tool the request offers: `name` is what the model calls (in `namespace`, if any)."""

    name: str
    namespace: str | None = None

    @property
    def full(self) -> str:
        return _qualified(self.namespace, self.name)


def offered_tools(api: str, body: dict) -> list[Tool]:
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if api == "chat":
            out.append(Tool((t.get("function") or {}).get("name", "")))
        elif t.get("type") == "namespace":  # responses: codex's MCP tools (and others)
            for sub in t.get("tools") or []:
                if isinstance(sub, dict):
                    out.append(Tool(sub.get("name", ""), t.get("name", "")))
        else:
            out.append(Tool(t.get("name") or t.get("type", "")))
    return out


def tool_names(api: str, body: dict) -> list[str]:
    return [t.full for t in offered_tools(api, body)]


STEER_RE = re.compile(r"STEER:([A-Za-z0-9_-]+)")
SLEEP_RE = re.compile(r"SLEEP:(\d+(?:\.\d+)?)")
STEER_SLEEPS = 5


def steer_texts(api: str, body: dict) -> list[str]:
    """Every text of the conversation but tool results: system, developer and user messages
    (and Claude Code's messages taken mid-turn, which it sends as system messages)."""
    out: list[str] = []
    if api == "responses":
        inp = body.get("input")
        if isinstance(inp, str):
            return [inp]
        for it in inp or []:
            if isinstance(it, dict) and it.get("role") in ("user", "system", "developer"):
                out.extend(_texts(it.get("content")))
        return out
    system = body.get("system")
    out.extend(_texts(system) if system is not None else [])
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") in ("user", "system", "developer"):
            out.extend(_texts(m.get("content")))
    return out


def steer_step(api: str, body: dict, text: str, after: list[Item]) -> tuple[str, Call | None]:
    """The steer scenario: (final text, or the sleeping shell call to make first)."""
    heard = [w for t in steer_texts(api, body) for w in STEER_RE.findall(t)]
    if heard:
        return f"Heard STEER:{heard[-1]}", None
    slept = sum(1 for i in after if i.kind == "tool_result")
    if slept >= STEER_SLEEPS:
        return "No steer heard", None
    found = SLEEP_RE.findall(text)
    call = shell_call(api, body, f"sleep {found[-1] if found else 2}; echo slept")
    if call is None:
        return f"mock steer: no shell tool was offered; tools: {tool_names(api, body)}", None
    return "", call


OUTSIDE_RE = re.compile(r"OUTSIDE:(\S+)")
PAUSE_RE = re.compile(r"PAUSE:(\d+(?:\.\d+)?)")


def tool_command(scenario: str, text: str) -> str:
    """The command the shell tool runs in a tool_write* scenario."""
    if scenario == "tool_write_outside":
        found = OUTSIDE_RE.findall(text)
        if found:
            return f"{TOOL_COMMAND}; (echo escaped > {found[-1]}/escaped.txt) 2>/dev/null; true"
    return TOOL_COMMAND


class Call(NamedTuple):
    """A tool call the model makes."""

    name: str
    args: dict
    namespace: str | None = None  # responses: the namespace the tool is offered in


ECHO_VAR_RE = re.compile(r"ECHO_VAR:([A-Za-z_][A-Za-z0-9_]*)")
ECHO_RESULT_CHARS = 4000


def echo_env_command(name: str) -> str:
    """The tool_echo_env command: `$name` raw and base64 on stdout, raw on stderr."""
    v = f'"${name}"'
    return f"printf '%s\\n' {v}; printf '%s' {v} | base64 -w0; echo; printf '%s\\n' {v} >&2"


def echo_env_step(api: str, body: dict, text: str, after: list[Item]) -> tuple[str, Call | None]:
    """The tool_echo_env scenario: (final text, or the shell tool call to make first)."""
    found = ECHO_VAR_RE.findall(text)
    if not found:
        return "mock tool_echo_env: the marker's text needs ECHO_VAR:<NAME>", None
    results = [i for i in after if i.kind == "tool_result"]
    if results:
        return "Tool said: " + results[-1].text[:ECHO_RESULT_CHARS], None
    call = shell_call(api, body, echo_env_command(found[-1]))
    if call is None:
        return f"mock tool_echo_env: no shell tool was offered; tools: {tool_names(api, body)}", None
    return "", call


def shell_call(api: str, body: dict, command: str = TOOL_COMMAND) -> Call | None:
    """The shell tool this CLI offers and arguments that run `command`."""
    names = tool_names(api, body)
    if "exec_command" in names:  # codex
        return Call("exec_command", {"cmd": command})
    if "shell_command" in names:
        return Call("shell_command", {"command": command})
    if "shell" in names:
        return Call("shell", {"command": ["bash", "-lc", command]})
    if "Bash" in names:  # claude
        return Call("Bash", {"command": command, "description": "Write a file"})
    if "bash" in names:  # pi
        return Call("bash", {"command": command})
    return None


MCP_TOOL_RE = re.compile(r"MCP_TOOL:(\S+)")
MCP_ARGS_RE = re.compile(r"MCP_ARGS:([A-Za-z0-9+/=_-]+)")
MCP_NAME_RE = re.compile(r"mcp__[A-Za-z0-9_.-]+")
MCP_RESULT_CHARS = 4000


def _ends_with_tool(name: str, suffix: str) -> bool:
    """`name` is `suffix`, or ends with it after a separator (`mcp__subpane__run` for `run`)."""
    if name == suffix:
        return True
    return name.endswith(suffix) and len(name) > len(suffix) and not name[-len(suffix) - 1].isalnum()


def _all_strings(v, out: list[str]) -> None:
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, list):
        for x in v:
            _all_strings(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            _all_strings(x, out)


def mcp_step(api: str, body: dict, text: str, after: list[Item]) -> tuple[str, Call | None]:
    """The mcp_call scenario: (final text, or a tool call to make first).

    `text` is the marker's user text (with MCP_TOOL: and MCP_ARGS:), `after` the conversation
    after it. Claude Code may offer MCP tools deferred (only their names, in a system text, and
    a `ToolSearch` tool that loads them): then the first call is ToolSearch `select:<name>`.
    """
    tool = MCP_TOOL_RE.findall(text)
    raw = MCP_ARGS_RE.findall(text)
    if not tool or not raw:
        return "mock mcp_call: the marker's text needs MCP_TOOL:<name-suffix> and MCP_ARGS:<base64 JSON>", None
    suffix = tool[-1]
    try:
        b64 = raw[-1].replace("+", "-").replace("/", "_")
        args = json.loads(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)))
    except ValueError as e:
        return f"mock mcp_call: MCP_ARGS is not base64 of a JSON document: {e}", None
    if not isinstance(args, dict):
        return "mock mcp_call: MCP_ARGS is not a JSON object", None
    results = [i for i in after if i.kind == "tool_result"]
    for r in results:
        if _ends_with_tool(r.tool, suffix):
            return "Subagent said: " + r.text[:MCP_RESULT_CHARS], None
    offered = offered_tools(api, body)
    names = [t.full for t in offered]
    if len(results) >= 3:  # never loop: something answered, but not the tool
        return f"mock mcp_call: {len(results)} tool results and none from a tool ending in {suffix!r}: {[r.tool for r in results]}", None
    for t in offered:
        if _ends_with_tool(t.full, suffix):
            return "", Call(t.name, args, t.namespace)
    strings: list[str] = []
    _all_strings({k: v for k, v in body.items() if k != "tools"}, strings)
    deferred = sorted({n for s in strings for n in MCP_NAME_RE.findall(s) if _ends_with_tool(n, suffix)})
    searched = any(r.tool == "ToolSearch" for r in results)
    if deferred and "ToolSearch" in names and not searched:
        return "", Call("ToolSearch", {"query": "select:" + deferred[0], "max_results": 5})
    return (f"mock mcp_call: no tool ending in {suffix!r} was offered; tools: {names}"
            + (f"; deferred: {deferred}" if deferred else "")), None


# ---------------------------------------------------------------- the handler


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-model/1"

    def log_message(self, fmt, *args):  # quiet on stderr; everything goes to --log
        log(f"{self.address_string()} {fmt % args}")

    # -- plumbing

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Content-Encoding", "") in ("gzip", "zstd", "br"):
            log(f"compressed body ({self.headers.get('Content-Encoding')}) not understood")
            return {}
        if _dump_dir:
            name = os.path.join(_dump_dir, f"{next_id('req')}{self.path.split('?')[0].replace('/', '_')}.json")
            with open(name, "wb") as f:
                f.write(raw)
        try:
            body = json.loads(raw or b"{}")
            return body if isinstance(body, dict) else {}
        except ValueError:
            return {}

    def _json(self, status: int, obj, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, data, event: str | None = None) -> None:
        chunk = ""
        if event:
            chunk += f"event: {event}\n"
        chunk += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        self.wfile.write(chunk.encode())
        self.wfile.flush()

    def _stall(self) -> None:
        """Hold the stream open, sending nothing, until the client goes away."""
        deadline = time.monotonic() + STALL_MAX_SECONDS
        sock = self.connection
        while time.monotonic() < deadline:
            r, _, _ = select.select([sock], [], [], 1.0)
            if r:
                try:
                    if not sock.recv(4096, 0):
                        break
                except OSError:
                    break
        log("stall: client gone")

    # -- routes

    def do_GET(self):
        path = self.path.split("?")[0]
        log(f"GET {path}")
        if path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL_NAME, "object": "model"}], "models": []})
        else:
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self._body()
        if path.endswith("/chat/completions"):
            api = "chat"
        elif path.endswith("/responses"):
            api = "responses"
        elif path.endswith("/messages/count_tokens"):
            self._json(200, {"input_tokens": USAGE["input"]})
            return
        elif path.endswith("/messages"):
            api = "messages"
        else:
            log(f"POST {path} (unknown)")
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        scenario, after, text = scenario_of(api, body)
        answered = any(i.kind == "tool_result" for i in after)
        log(f"POST {path} api={api} scenario={scenario} answered={answered} stream={body.get('stream')}"
            f" tools={tool_names(api, body)}")
        try:
            self._answer(api, body, scenario, after, text)
        except (BrokenPipeError, ConnectionResetError):
            log("client closed the connection")

    def _answer(self, api, body, scenario, after, text):
        answered = any(i.kind == "tool_result" for i in after)
        if scenario in ("flaky", "rate_limit_once"):
            with _lock:
                first = (scenario, api, text) not in _flaky_seen
                _flaky_seen.add((scenario, api, text))
            if first and scenario == "flaky":
                return self._server_error(api)
            if first:
                return self._rate_limited(api)
            scenario = "plain"
        if scenario == "model_error":
            return self._server_error(api)
        if scenario in ("usage_limit", "usage_limit_soon"):
            soon = 30 if scenario == "usage_limit_soon" else None
            return self._usage_limit(api, soon)
        if scenario == "context_overflow":
            return self._overflow(api)
        if scenario == "stall":
            self._sse_start()
            first_chunk = {
                "chat": lambda: self._chat_chunk({"role": "assistant", "content": ""}),
                "responses": lambda: self._sse({"type": "response.created", "response": {"id": next_id("resp"), "status": "in_progress"}}, "response.created"),
                "messages": lambda: self._sse({"type": "ping"}, "ping"),
            }[api]
            first_chunk()
            return self._stall()
        writes = scenario in ("tool_write", "tool_write_outside")
        call = (
            shell_call(api, body, tool_command(scenario, text))
            if writes and not answered
            else None
        )
        final = TOOL_DONE_TEXT if writes else MOCK_TEXT
        if scenario == "many_turns":
            done = sum(1 for i in after if i.kind == "tool_result")
            pause = PAUSE_RE.search(text)
            command = f"echo turn {done + 1}"
            if pause:
                command = f"sleep {pause.group(1)}; {command}"
            call = shell_call(api, body, command) if done < MANY_TURNS else None
        if scenario == "tool_echo_env":
            final, call = echo_env_step(api, body, text, after)
            log(f"tool_echo_env: {'call ' + call.name if call else 'final'}")
        if scenario == "steer":
            final, call = steer_step(api, body, text, after)
            log(f"steer: {'call ' + call.name if call else 'final ' + repr(final)}")
        if scenario == "mcp_call":
            final, call = mcp_step(api, body, text, after)
            log(f"mcp_call: {'call ' + call.name if call else 'final ' + repr(final[:200])}")
        stream = body.get("stream", api != "messages")
        {"chat": self._chat, "responses": self._responses, "messages": self._messages}[api](
            final, call, stream
        )

    # -- errors

    def _server_error(self, api):
        if api == "messages":
            self._json(500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error (mock)"}})
        else:
            self._json(500, {"error": {"message": "The server had an error while processing your request (mock)", "type": "server_error", "param": None, "code": "server_error"}})

    def _rate_limited(self, api):
        """A transient rate limit, as each API answers it: HTTP 429, try again in a second."""
        headers = {"retry-after": "1"}
        if api == "messages":
            self._json(429, {"type": "error", "error": {"type": "rate_limit_error",
                                                        "message": "Rate limited (mock)"}}, headers)
        else:
            self._json(429, {"error": {"type": "requests", "code": "rate_limit_exceeded",
                                       "message": "Rate limit reached for requests (mock)"}}, headers)

    def _usage_limit(self, api, retry_after=None):
        """The account's limit, as each API answers it: HTTP 429 with a reset an hour ahead
        (Anthropic's unified rate-limit headers say so) and `retry-after` in seconds (that
        reset, or `retry_after`)."""
        secs = 3600
        reset = int(time.time()) + secs
        headers = {"retry-after": str(retry_after or secs)}
        if api == "messages":
            headers.update({"anthropic-ratelimit-unified-status": "rejected",
                            "anthropic-ratelimit-unified-reset": str(reset),
                            "anthropic-ratelimit-unified-representative-claim": "five_hour"})
            self._json(429, {"type": "error", "error": {"type": "rate_limit_error",
                                                        "message": "Usage limit reached (mock)"}}, headers)
        else:
            self._json(429, {"error": {"type": "usage_limit_reached", "code": "usage_limit_reached",
                                       "message": "You've hit your usage limit (mock)",
                                       "resets_in_seconds": secs, "resets_at": reset}}, headers)

    def _overflow(self, api):
        if api == "messages":
            self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"}})
        else:
            self._json(400, {"error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 250000 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})

    # -- OpenAI chat completions (pi)

    def _chat_chunk(self, delta, finish=None, usage=None, cid="chatcmpl-mock"):
        obj = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": MODEL_NAME,
               "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage:
            obj["usage"] = usage
        self._sse(obj)

    def _chat(self, final, call, stream):
        usage = {"prompt_tokens": USAGE["input"] + USAGE["cache_read"], "completion_tokens": USAGE["output"],
                 "total_tokens": USAGE["input"] + USAGE["cache_read"] + USAGE["output"],
                 "prompt_tokens_details": {"cached_tokens": USAGE["cache_read"]}}
        if not stream:
            msg = {"role": "assistant", "content": final}
            return self._json(200, {"id": "chatcmpl-mock", "object": "chat.completion", "model": MODEL_NAME,
                                    "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}], "usage": usage})
        self._sse_start()
        cid = next_id("chatcmpl")
        self._chat_chunk({"role": "assistant", "content": ""}, cid=cid)
        if call:
            self._chat_chunk({"tool_calls": [{"index": 0, "id": next_id("call"), "type": "function",
                                              "function": {"name": call.name, "arguments": ""}}]}, cid=cid)
            self._chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(call.args)}}]}, cid=cid)
            self._chat_chunk({}, finish="tool_calls", cid=cid)
        else:
            for piece in _pieces(final):
                self._chat_chunk({"content": piece}, cid=cid)
            self._chat_chunk({}, finish="stop", cid=cid)
        self._chat_chunk({}, usage=usage, cid=cid)
        self._sse("[DONE]")

    # -- OpenAI Responses (codex)

    def _responses(self, final, call, stream):
        rid = next_id("resp")
        usage = {"input_tokens": USAGE["input"] + USAGE["cache_read"],
                 "input_tokens_details": {"cached_tokens": USAGE["cache_read"]},
                 "output_tokens": USAGE["output"], "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": USAGE["input"] + USAGE["cache_read"] + USAGE["output"]}
        if call:
            item = {"type": "function_call", "id": next_id("fc"), "call_id": next_id("call"), "name": call.name,
                    "arguments": json.dumps(call.args), "status": "completed"}
            if call.namespace:
                item["namespace"] = call.namespace
        else:
            item = {"type": "message", "id": next_id("msg"), "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": final, "annotations": []}]}
        done = {"id": rid, "object": "response", "status": "completed", "model": MODEL_NAME,
                "output": [item], "usage": usage}
        if not stream:
            return self._json(200, done)
        self._sse_start()
        self._sse({"type": "response.created", "response": {"id": rid, "object": "response", "status": "in_progress", "model": MODEL_NAME, "output": []}}, "response.created")
        self._sse({"type": "response.in_progress", "response": {"id": rid, "object": "response", "status": "in_progress", "model": MODEL_NAME, "output": []}}, "response.in_progress")
        added = dict(item, status="in_progress")
        if item["type"] == "message":
            added["content"] = []
        elif item["type"] == "function_call":
            added["arguments"] = ""
        self._sse({"type": "response.output_item.added", "output_index": 0, "item": added}, "response.output_item.added")
        if item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            self._sse({"type": "response.content_part.added", "item_id": item["id"], "output_index": 0, "content_index": 0, "part": part}, "response.content_part.added")
            for piece in _pieces(final):
                self._sse({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": piece}, "response.output_text.delta")
            self._sse({"type": "response.output_text.done", "item_id": item["id"], "output_index": 0, "content_index": 0, "text": final}, "response.output_text.done")
            self._sse({"type": "response.content_part.done", "item_id": item["id"], "output_index": 0, "content_index": 0, "part": dict(part, text=final)}, "response.content_part.done")
        else:
            self._sse({"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0, "delta": item["arguments"]}, "response.function_call_arguments.delta")
            self._sse({"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0, "arguments": item["arguments"]}, "response.function_call_arguments.done")
        self._sse({"type": "response.output_item.done", "output_index": 0, "item": item}, "response.output_item.done")
        self._sse({"type": "response.completed", "response": done}, "response.completed")

    # -- Anthropic Messages (claude)

    def _messages(self, final, call, stream):
        mid = next_id("msg")
        usage = {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"],
                 "cache_creation_input_tokens": USAGE["cache_write"], "cache_read_input_tokens": USAGE["cache_read"]}
        model = MODEL_NAME
        if call:
            block = {"type": "tool_use", "id": next_id("toolu"), "name": call.name, "input": call.args}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": final}
            stop = "end_turn"
        if not stream:
            return self._json(200, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                    "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage})
        self._sse_start()
        start_usage = dict(usage, output_tokens=1)
        self._sse({"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant", "model": model,
                   "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}}, "message_start")
        if call:
            self._sse({"type": "content_block_start", "index": 0, "content_block": dict(block, input={})}, "content_block_start")
            self._sse({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}, "content_block_delta")
        else:
            self._sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start")
            self._sse({"type": "ping"}, "ping")
            for piece in _pieces(final):
                self._sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
        self._sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": USAGE["output"]}}, "message_delta")
        self._sse({"type": "message_stop"}, "message_stop")


def _pieces(text: str) -> list[str]:
    """Split a text into a few streaming deltas."""
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


# ---------------------------------------------------------------- lifetime


def _die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent dies (Linux), and watch for it anyway."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    global _log_file
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    ap.add_argument("--max-seconds", type=float, default=900.0)
    ap.add_argument("--dump-dir", help="save every request body here (for checking what a CLI sent)")
    args = ap.parse_args()
    global _dump_dir
    _dump_dir = args.dump_dir

    if args.log:
        _log_file = open(args.log, "a", encoding="utf-8")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    _die_with_parent()
    limit = threading.Timer(args.max_seconds, lambda: os._exit(0))
    limit.daemon = True
    limit.start()

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(port, flush=True)
    log(f"listening on 127.0.0.1:{port}")
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
