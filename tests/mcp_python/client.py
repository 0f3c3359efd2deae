"""`subpane mcp` spoken to by the official Python MCP SDK (`mcp`, pinned in
scripts/install-python-clients), one scenario per call:

    python client.py SCENARIO

The server is `$SUBPANE_BIN mcp`, with the test's own home and tmux socket (from the
environment). A failed check raises; the Rust test (tests/it/mcp_python.rs) runs each
scenario and shows what it printed.
"""

import asyncio
import json
import os
import re
import subprocess
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import jsonschema

BIN = os.environ["SUBPANE_BIN"]
WORK = os.environ["SUBPANE_TEST_WORK"]
ENV = {k: os.environ[k] for k in ("SUBPANE_HOME", "SUBPANE_TMUX_SOCKET", "PATH", "HOME")}
ENV["NO_COLOR"] = "1"

# The formats JSON Schema 2020-12 defines.
STANDARD_FORMATS = {
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname",
    "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference",
    "uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex",
}
# The largest JSON-RPC message a parent can rely on.
MAX_MESSAGE = 64 * 1024


def server():
    return StdioServerParameters(command=BIN, args=["mcp"], env=ENV, cwd=WORK)


def sp(*args):
    """The CLI, on the same home."""
    return subprocess.run([BIN, *args], env=ENV, cwd=WORK, capture_output=True, text=True)


def size(result):
    """The bytes of a result as the server sent it (its JSON-RPC `result`)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def walk(v, f):
    if isinstance(v, dict):
        f(v)
        for x in v.values():
            walk(x, f)
    elif isinstance(v, list):
        for x in v:
            walk(x, f)


async def schemas(s):
    tools = (await s.list_tools()).tools
    names = [t.name for t in tools]
    assert names == ["run", "status", "wait", "logs", "cancel", "send", "list", "fanout",
                     "retry", "pause", "resume"], names
    for t in tools:
        schema = t.input_schema if hasattr(t, "input_schema") else t.inputSchema
        jsonschema.Draft202012Validator.check_schema(schema)

        def formats(o, t=t):
            f = o.get("format")
            assert f is None or f in STANDARD_FORMATS, f"{t.name}: format {f!r}"

        walk(schema, formats)
        out = t.output_schema if hasattr(t, "output_schema") else t.outputSchema
        assert out and out.get("type") == "object", f"{t.name}: no outputSchema"
        jsonschema.Draft202012Validator.check_schema(out)
        assert t.title, f"{t.name}: no title"
        a = t.annotations
        assert a is not None, f"{t.name}: no annotations"
        desc = t.description or ""
        dumped = json.dumps(schema)
        for bad in ("[`", "schemars", "Debug", " --"):
            assert bad not in desc and bad not in dumped, f"{t.name}: {bad!r}"
    by = {t.name: t for t in tools}

    def hint(name, key):
        a = by[name].annotations
        return getattr(a, key, None)

    for name in ("status", "list", "logs", "wait"):
        assert hint(name, "read_only_hint") is True, name
    assert hint("cancel", "destructive_hint") is True
    for name in ("run", "fanout", "retry"):
        assert hint(name, "open_world_hint") is True, name
    for name in ("pause", "resume"):
        hints = [hint(name, k) for k in ("read_only_hint", "destructive_hint",
                                         "idempotent_hint", "open_world_hint")]
        assert hints == [False, False, True, False], (name, hints)

    def minimum(tool, field):
        schema = by[tool].input_schema if hasattr(by[tool], "input_schema") else by[tool].inputSchema
        return schema["properties"][field].get("minimum")

    for tool, field in (("status", "attempt"), ("wait", "attempt"), ("logs", "max_bytes"),
                        ("list", "limit"), ("fanout", "concurrency"), ("cancel", "attempt"),
                        ("pause", "concurrency"), ("resume", "concurrency")):
        assert minimum(tool, field) == 1, (tool, field, minimum(tool, field))
    def props(tool):
        t = by[tool]
        schema = t.input_schema if hasattr(t, "input_schema") else t.inputSchema
        return schema["properties"]

    for tool in ("run", "status", "wait", "cancel", "retry"):
        assert props(tool)["detail"]["type"] == "boolean", tool
    assert props("list")["offset"]["type"] == "integer"
    print("schemas: ok")


def flag_in(t):
    """A command-line flag in `t`: `--` before a letter."""
    return re.search(r"--[A-Za-z]", t)


def input_schema(tool):
    return tool.input_schema if hasattr(tool, "input_schema") else tool.inputSchema


def use_defaults(schema, v):
    """Every property with a default gets it, in nested objects and array items too: what
    Ajv's `useDefaults` does to the arguments before a client sends them."""
    if isinstance(v, dict):
        for k, p in schema.get("properties", {}).items():
            if "default" in p and k not in v:
                v[k] = json.loads(json.dumps(p["default"]))
            if k in v:
                use_defaults(p, v[k])
    elif isinstance(v, list) and "items" in schema:
        for x in v:
            use_defaults(schema["items"], x)
    return v


async def defaults(s):
    """Each tool's arguments filled with its schema's defaults are not refused for them;
    `required` lists only what the server needs."""
    by = {t.name: t for t in (await s.list_tools()).tools}
    req = {n: input_schema(t).get("required", []) for n, t in by.items()}
    assert req["list"] == [] and req["run"] == [], req
    assert req["logs"] == ["run_id"] and req["retry"] == ["run_id"], req
    props = input_schema(by["run"])["properties"]
    assert props["max_procs"]["minimum"] == 300, props["max_procs"]
    assert "sandbox setting" in props["max_procs"]["description"], props["max_procs"]
    r = await s.call_tool("run", {"argv": ["true"], "run_id": "d0"})
    assert not r.is_error, text(r)
    # A run that takes input, for `send`: it reads one line.
    r = await s.call_tool("run", {"argv": ["sh", "-c", "read a; echo \"$a\""], "run_id": "d3",
                                  "stdin": "pipe", "wait": False})
    assert not r.is_error, text(r)
    calls = [
        ("run", {"argv": ["true"], "run_id": "d1"}),
        ("status", {"run_id": "d0"}),
        ("wait", {"run_ids": ["d0"]}),
        ("logs", {"run_id": "d0"}),
        ("cancel", {"run_id": "d0"}),
        ("send", {"run_id": "d3", "text": "hello"}),
        ("list", {}),
        ("fanout", {"tasks": [{"argv": ["true"]}, {"argv": ["true"]}]}),
        ("retry", {"run_id": "d1"}),
        ("pause", {"group": None}),
        ("resume", {"group": None}),
    ]
    assert sorted(c for c, _ in calls) == sorted(by), sorted(by)
    # A group still going, for `pause` and `resume` (started first, so that `list` shows its
    # driver's row too, in the tools' words): its one task waits for a file.
    gate = os.path.join(WORK, "defaults-go")
    r = await s.call_tool("fanout", {"tasks": [{"argv": ["sh", "-c", gated(gate)]}],
                                     "max_wait": "300ms"})
    assert not r.is_error, text(r)
    group = r.structured_content["group"]
    for tool, args in calls:
        if "group" in args:
            args["group"] = group
        filled = use_defaults(input_schema(by[tool]), args)
        jsonschema.Draft202012Validator(input_schema(by[tool])).validate(filled)
        r = await s.call_tool(tool, filled)
        assert not r.is_error, (tool, filled, text(r))
        assert not flag_in(text(r)), (tool, text(r))
    # The sandbox settings at their defaults are taken without `sandbox`, with a warning
    # naming each (in the tools' words).
    filled = use_defaults(input_schema(by["run"]), {"argv": ["true"], "run_id": "d2"})
    assert filled["max_procs"] == 4096 and filled["max_tmp"] == "2G", filled
    r = await s.call_tool("run", filled)
    assert not r.is_error, text(r)
    assert "`max_procs` is a sandbox setting and is ignored" in text(r), text(r)
    open(gate, "w").close()
    r = await s.call_tool("wait", {"group": group})
    assert r.structured_content["group"]["status"] == "ended", r.structured_content
    print(f"defaults: {len(calls)} tools take their schema's defaults")


async def bad_requests(s):
    """Bad requests are tool errors that name the field as the tools do, never a flag."""
    cases = [
        ({"argv": ["true"], "max_procs": 12}, "`max_procs`"),
        ({"argv": ["true"], "max_tmp": "1M"}, "`max_tmp`"),
        ({"argv": ["true"], "max_memory": "1G"}, "`max_memory`"),
        ({"argv": ["true"], "max_file_size": "1G"}, "`max_file_size`"),
        ({"argv": ["true"], "sandbox": True, "max_procs": 299}, "`max_procs` 299 is out of range"),
        ({"argv": ["true"], "sandbox": True, "max_tmp": "big"}, "`max_tmp` `big` is not a size"),
        ({"agent": "pi", "task_file": "/nonexistent/t.md"}, "`task_file`"),
        ({"agent": "pi", "task": "x", "system_prompt_file": "/nonexistent/s.md"},
         "`system_prompt_file`"),
        ({"argv": ["true"], "timeout": "5"}, "`timeout`"),
        ({"argv": ["true"], "cwd": "/nonexistent"}, "`cwd`"),
        ({"argv": ["true"], "network": "full"}, "`network` is a sandbox setting"),
        ({"argv": ["true"], "model": "m"}, "`model`"),
        ({"agent": "pi"}, "`task`"),
        ({}, "`argv`"),
    ]
    for args, want in cases:
        r = await s.call_tool("run", args)
        assert r.is_error, (args, text(r))
        assert want in text(r), (args, want, text(r))
        assert not flag_in(text(r)), (args, text(r))
    print(f"bad_requests: {len(cases)} refused naming their field")


async def long_run(s):
    """A run with the default arguments of a program longer than 60 s answers before 60 s,
    with the run still going."""
    t0 = time.monotonic()
    r = await s.call_tool(
        "run", {"argv": ["sleep", "75"], "run_id": "long", "grace": "1s"},
        read_timeout_seconds=59,
    )
    took = time.monotonic() - t0
    assert not r.is_error, text(r)
    assert took < 60, f"answered after {took:.1f}s"
    doc = r.structured_content
    assert doc["status"] == "running", doc
    assert "still running" in text(r) and "`wait`" in text(r), text(r)
    st = sp("status", "long")
    assert st.returncode == 3, (st.returncode, st.stdout, st.stderr)
    r = await s.call_tool("cancel", {"run_id": "long"})
    assert not r.is_error, text(r)
    r = await s.call_tool("wait", {"run_ids": ["long"]})
    assert r.structured_content["runs"][0]["status"] == "cancelled", r.structured_content
    print(f"long_run: answered after {took:.1f}s")


async def sizes(s):
    """Huge labels, a huge line of output, many runs: each answer stays one message under
    64 KiB, and says what it cut."""
    label = "L" * 200_000
    for i in range(3):
        r = await s.call_tool("run", {"argv": ["true"], "run_id": f"big{i}", "labels": {"big": label}})
        assert not r.is_error, text(r)
        assert size(r) < MAX_MESSAGE, ("run", size(r))
    r = await s.call_tool("run", {
        "argv": ["sh", "-c", "head -c 786000 /dev/zero | tr '\\0' 'x'; echo"], "run_id": "line"})
    assert size(r) < MAX_MESSAGE, ("run", size(r))
    tasks = [{"argv": ["sh", "-c", "echo " + "y" * 3000], "run_id": f"m{i}", "labels": {"big": label}}
             for i in range(40)]
    r = await s.call_tool("fanout", {"tasks": tasks, "concurrency": 8})
    assert not r.is_error, text(r)
    assert size(r) < MAX_MESSAGE, ("fanout", size(r))
    group = r.structured_content["group"]
    checks = [
        ("list", {}),
        ("list", {"limit": 500}),
        ("wait", {"group": group}),
        ("status", {"run_id": "big0"}),
        ("logs", {"run_id": "line", "max_bytes": 262144}),
    ]
    for tool, args in checks:
        r = await s.call_tool(tool, args)
        assert not r.is_error, (tool, text(r))
        assert size(r) < MAX_MESSAGE, (tool, size(r))
    # The log's text is sent once: in the content, not again as structured content.
    assert "text" not in r.structured_content, r.structured_content.keys()
    r = await s.call_tool("wait", {"group": group})
    assert text(r).startswith("40 runs: 40 completed"), text(r)[:200]
    print("sizes: ok")


async def close_mid_fanout():
    """stdin closed with a fan-out in flight: the server exits within 2 s, and every task
    still completes."""
    said = []

    async def progress(p, total, message):
        said.append(message or "")

    tasks = [{"argv": ["sh", "-c", "sleep 1; echo done"], "run_id": f"f{i}"} for i in range(6)]
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            call = asyncio.ensure_future(s.call_tool(
                "fanout", {"tasks": tasks, "concurrency": 2}, progress_callback=progress))
            deadline = time.monotonic() + 30
            while not any(m.startswith("group ") for m in said):
                assert time.monotonic() < deadline, said
                await asyncio.sleep(0.05)
            group = next(m for m in said if m.startswith("group ")).split()[1].rstrip(":")
            # Close the server's stdin with the call in flight (no cancel is sent).
            t0 = time.monotonic()
            await write.aclose()
            call.cancel()
    # The SDK waits 2 s for the server to exit before it terminates it.
    took = time.monotonic() - t0
    assert took < 1.9, f"the server took {took:.2f}s to exit"
    w = sp("wait", "--json", "--group", group)
    assert w.returncode == 0, (w.returncode, w.stdout, w.stderr)
    ends = json.loads(w.stdout)
    assert len(ends) == 6 and all(e["status"] == "completed" for e in ends), ends
    print(f"close_mid_fanout: exited after {took:.2f}s; 6 of 6 tasks completed")


async def answers(s):
    """What a model reads first: `summary` leads every structured content, `next` says the
    call to make when runs go on, a finished run's answer is at most 4 KiB without its bulky
    parts (`detail: true` has them), and a cancel is named in the envelope."""
    r = await s.call_tool("run", {"argv": ["sh", "-c", "echo hello-answers"], "run_id": "a1"})
    assert not r.is_error, text(r)
    doc = r.structured_content
    assert list(doc)[0] == "summary", list(doc)
    assert doc["summary"] == text(r).splitlines()[0], (doc["summary"], text(r))
    assert "next" not in doc, doc
    for bulky in ("artifacts", "filter", "tmux"):
        assert bulky not in doc, (bulky, doc)
    n = len(json.dumps(doc, separators=(",", ":")))
    assert n <= 4096, f"a finished run's structured content is {n} bytes"
    assert doc["tails"]["stdout"] == "hello-answers\n", doc
    r = await s.call_tool("status", {"run_id": "a1", "detail": True})
    assert not r.is_error, text(r)
    full = r.structured_content
    assert list(full)[0] == "summary", list(full)
    assert full["artifacts"] and full["filter"] and full["tmux"], full.keys()
    # An answer before the run ended: `next` is the wait call, made as it is.
    r = await s.call_tool("run", {"argv": ["sleep", "30"], "run_id": "a2", "max_wait": "1s",
                                  "grace": "0s"})
    doc = r.structured_content
    assert list(doc)[:2] == ["summary", "next"], list(doc)
    assert doc["status"] == "running", doc
    nxt = doc["next"]
    assert nxt == {"tool": "wait", "arguments": {"run_ids": ["a2"]}}, nxt
    r = await s.call_tool(nxt["tool"], {**nxt["arguments"], "max_wait": "500ms"})
    assert not r.is_error, text(r)
    assert list(r.structured_content)[0] == "summary", r.structured_content
    assert r.structured_content["next"] == nxt, r.structured_content
    # Every tool's structured content starts with `summary`.
    checks = [("list", {}), ("logs", {"run_id": "a1"}), ("cancel", {"run_id": "a2"})]
    for tool, args in checks:
        r = await s.call_tool(tool, args)
        assert not r.is_error, (tool, text(r))
        assert list(r.structured_content)[0] == "summary", (tool, r.structured_content)
    r = await s.call_tool("wait", {"run_ids": ["a2"]})
    run = r.structured_content["runs"][0]
    assert run["status"] == "cancelled" and run["cancelled_by"] == "cancel", run
    print("answers: ok")


async def running_fanout(s):
    """A fan-out still going at max_wait: status running with counts, no exit code or
    duration, and next is the wait for its group."""
    flag = os.path.join(WORK, "fanout-go")
    script = f"while [ ! -e '{flag}' ]; do sleep 0.05; done"
    tasks = [{"argv": ["sh", "-c", script], "run_id": f"rf{i}"} for i in range(3)]
    r = await s.call_tool("fanout", {"tasks": tasks, "concurrency": 2, "max_wait": "1s"})
    assert not r.is_error, text(r)
    doc = r.structured_content
    assert list(doc)[:2] == ["summary", "next"], list(doc)
    assert doc["status"] == "running", doc
    counts = doc["counts"]
    assert counts["running"] + counts.get("queued", 0) == 3, counts
    assert "exit_code" not in counts and "duration_ms" not in counts, counts
    assert doc["next"] == {"tool": "wait", "arguments": {"group": doc["group"]}}, doc["next"]
    assert " in 0.0s" not in text(r), text(r)
    open(flag, "w").close()
    r = await s.call_tool("wait", {"group": doc["group"]})
    g = r.structured_content["group"]
    assert g["status"] == "ended" and g["counts"]["exit_code"] == 0, g
    print("running_fanout: ok")


def gated(path):
    """A shell script that waits until `path` exists."""
    return f"while [ ! -e '{path}' ]; do sleep 0.05; done"


async def group_controls(s):
    """`pause` and `resume` of a group the `fanout` tool started: the SDK checks each answer
    against the tools' output schemas; a paused group starts no new task until resumed."""
    gate = os.path.join(WORK, "controls-go")
    tasks = [{"argv": ["sh", "-c", gated(gate)], "run_id": "gc0"},
             {"argv": ["true"], "run_id": "gc1"}]
    r = await s.call_tool("fanout", {"tasks": tasks, "concurrency": 1, "max_wait": "300ms"})
    assert not r.is_error, text(r)
    group = r.structured_content["group"]
    r = await s.call_tool("pause", {"group": group[:-2]})
    assert not r.is_error, text(r)
    doc = r.structured_content
    assert list(doc)[0] == "summary", list(doc)
    assert doc["group"] == group and doc["paused"] and not doc["stop_running"], doc
    assert doc["taken"] and doc["concurrency"] == 1, doc
    assert doc["summary"].startswith(f"group {group} paused"), doc["summary"]
    open(gate, "w").close()
    deadline = time.monotonic() + 30
    done = os.path.join(os.environ["SUBPANE_HOME"], "runs", "gc0", "attempts", "1", "result.json")
    while not os.path.exists(done):
        assert time.monotonic() < deadline, "gc0 did not end"
        await asyncio.sleep(0.05)
    r = await s.call_tool("pause", {"group": group, "stop_running": True, "concurrency": 2})
    doc = r.structured_content
    assert doc["taken"] and doc["stop_running"] and doc["concurrency"] == 2, doc
    gc1 = os.path.join(os.environ["SUBPANE_HOME"], "runs", "gc1")
    assert not os.path.exists(gc1), "gc1 started while its group was paused"
    r = await s.call_tool("resume", {"group": group})
    assert not r.is_error, text(r)
    doc = r.structured_content
    assert list(doc)[:2] == ["summary", "next"], list(doc)
    assert not doc["paused"] and not doc["stop_running"] and doc["taken"], doc
    assert doc["next"] == {"tool": "wait", "arguments": {"group": group}}, doc["next"]
    r = await s.call_tool(doc["next"]["tool"], doc["next"]["arguments"])
    g = r.structured_content["group"]
    assert g["status"] == "ended" and g["counts"]["completed"] == 2, g
    r = await s.call_tool("pause", {"group": "g-nosuch"})
    assert r.is_error and "no group `g-nosuch`" in text(r), text(r)
    assert not flag_in(text(r)), text(r)
    print("group_controls: ok")


async def pages(s):
    """`list` pages through 80 runs with offset and next_offset."""
    tasks = [{"argv": ["true"], "run_id": f"pg{i:02}", "labels": {"pages": "yes"}}
             for i in range(80)]
    r = await s.call_tool("fanout", {"tasks": tasks, "concurrency": 16})
    assert r.structured_content["status"] == "ended", r.structured_content
    seen, offset = [], 0
    while True:
        r = await s.call_tool("list", {"labels": {"pages": "yes"}, "limit": 25, "offset": offset})
        assert not r.is_error, text(r)
        doc = r.structured_content
        assert doc["total"] == 80, doc
        seen += [row["run_id"] for row in doc["runs"]]
        if not doc["more"]:
            assert doc["next_offset"] is None, doc
            break
        offset = doc["next_offset"]
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 80, seen
    print("pages: ok")


def invalid_requests():
    """JSON that is no request gets -32600 with id null (the SDK sends only valid messages,
    so this speaks to the server's stdin itself)."""
    p = subprocess.Popen([BIN, "mcp"], env=ENV, cwd=WORK, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in ("{}", "[1,2,3]", "7"):
            p.stdin.write(line + "\n")
            p.stdin.flush()
            answer = json.loads(p.stdout.readline())
            assert answer["error"]["code"] == -32600 and answer["id"] is None, (line, answer)
    finally:
        p.stdin.close()
        p.wait(timeout=10)
    print("invalid_requests: ok")


async def secrets(s):
    """A run given secrets through `env`: no answer (progress messages included) holds a
    value or its base64; the one given through `env_plain` shows; a short one is named."""
    import base64
    token = "mcp-Secret-Value/7Qz+9Lw"
    said = []

    async def progress(p, total, message):
        said.append(message or "")

    program = ("printf 'raw %s\\n' \"$T\"; printf '%s' \"$T\" | base64; "
               "printf 'plain %s\\n' \"$P\"; sleep 1.5; printf 'err %s\\n' \"$T\" >&2; exit 3")
    r = await s.call_tool("run", {
        "argv": ["sh", "-c", program], "run_id": "sec",
        "env": {"T": token, "PIN": "1234"}, "env_plain": {"P": "plain-visible-value"},
    }, progress_callback=progress)
    answers = [r.model_dump_json(by_alias=True)]
    for tool, args in [("status", {"run_id": "sec", "detail": True}),
                       ("wait", {"run_ids": ["sec"], "detail": True}),
                       ("logs", {"run_id": "sec", "file": "stdout"}),
                       ("logs", {"run_id": "sec", "file": "stderr"}),
                       ("logs", {"run_id": "sec", "file": "events"})]:
        a = await s.call_tool(tool, args)
        assert not a.is_error, (tool, text(a))
        answers.append(a.model_dump_json(by_alias=True))
    b64 = base64.b64encode(token.encode()).decode()[:-4]
    for place in answers + said:
        for form in (token, json.dumps(token)[1:-1], b64):
            assert form not in place, (form, place[:2000])
    doc = r.structured_content
    assert doc["secrets"] == {"masked": ["T"], "too_short": ["PIN"]}, doc.get("secrets")
    logs = answers[3]
    assert "raw ***" in logs and "plain plain-visible-value" in logs, logs[:2000]
    assert "err ***" in answers[4], answers[4][:2000]
    print(f"secrets: {len(answers)} answers and {len(said)} progress messages hold no value")


async def connected(scenario):
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            await scenario(s)


def main():
    name = sys.argv[1]
    if name == "close_mid_fanout":
        asyncio.run(close_mid_fanout())
    elif name == "invalid_requests":
        invalid_requests()
    else:
        scenarios = {"schemas": schemas, "long_run": long_run, "sizes": sizes,
                     "answers": answers, "running_fanout": running_fanout, "pages": pages,
                     "defaults": defaults, "bad_requests": bad_requests, "secrets": secrets,
                     "group_controls": group_controls}
        asyncio.run(connected(scenarios[name]))


if __name__ == "__main__":
    main()
