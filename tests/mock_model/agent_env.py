#!/usr/bin/env python3
"""Writes the config that points pi, codex and claude at the mock model server.

Usage:
  agent_env.py SCRATCH_DIR PORT [--format shell|json]

Creates SCRATCH_DIR/{pi,codex,claude,home} and prints the environment variables to set
(shell `export K=V` lines by default, or one JSON object). The caller owns SCRATCH_DIR and
removes it. See agent_env.md for what each setting is for.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

MODEL = "mock-model"
PROVIDER = "mock"


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def setup(scratch: str, port: int) -> dict[str, str]:
    scratch = os.path.abspath(scratch)
    base = f"http://127.0.0.1:{port}"

    # pi: a custom provider on the OpenAI chat completions wire format. A cost is set so the
    # usage.cost fields are non-zero; retries are kept short so model_error ends quickly.
    pi_dir = os.path.join(scratch, "pi")
    write(os.path.join(pi_dir, "models.json"), json.dumps({
        "providers": {
            PROVIDER: {
                "baseUrl": f"{base}/v1",
                "api": "openai-completions",
                "apiKey": "mock-key",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{
                    "id": MODEL, "name": "Mock Model", "reasoning": False, "input": ["text"],
                    "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": 1.0, "output": 2.0, "cacheRead": 0.5, "cacheWrite": 0},
                }],
            }
        }
    }, indent=2))
    write(os.path.join(pi_dir, "settings.json"), json.dumps({
        "defaultProvider": PROVIDER,
        "defaultModel": MODEL,
        "quietStartup": True,
        # pi's provider retries are left as a user has them: subpane turns them off per
        # attempt (its client would sleep a 429's whole retry-after).
        "retry": {"enabled": True, "maxRetries": 2, "baseDelayMs": 100,
                  "provider": {"timeoutMs": 30000}},
    }, indent=2))

    # codex: a Responses-API provider without retries, full access (the sandbox is subpane's
    # job, and codex's own sandbox may be unavailable in containers), no update checks.
    codex_dir = os.path.join(scratch, "codex")
    write(os.path.join(codex_dir, "config.toml"), "\n".join([
        f'model = "{MODEL}"',
        f'model_provider = "{PROVIDER}"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        'check_for_update_on_startup = false',
        '',
        '[analytics]',
        'enabled = false',
        '',
        f'[model_providers.{PROVIDER}]',
        'name = "Mock"',
        f'base_url = "{base}/v1"',
        'wire_api = "responses"',
        'env_key = "MOCK_API_KEY"',
        'request_max_retries = 1',  # one retry: the flaky scenario recovers, model_error still ends fast
        'stream_max_retries = 0',
        'stream_idle_timeout_ms = 300000',
        '',
    ]))

    # claude: the Anthropic base URL, any API key, a private config dir; no background traffic.
    claude_dir = os.path.join(scratch, "claude")
    os.makedirs(claude_dir, exist_ok=True)
    # claude keeps per-session files in $CLAUDE_CODE_TMPDIR/claude-<uid>/ (default: the system
    # temp dir, where they would outlive SCRATCH).
    claude_tmp = os.path.join(scratch, "claude-tmp")
    os.makedirs(claude_tmp, exist_ok=True)

    home = os.path.join(scratch, "home")
    os.makedirs(home, exist_ok=True)
    tmp = os.path.join(scratch, "tmp")
    os.makedirs(tmp, exist_ok=True)

    return {
        # isolation: no CLI reads or writes the real home
        "HOME": home,
        # Temporary files of every CLI (claude's `cc-socks` directory among them) stay in SCRATCH.
        "TMPDIR": tmp,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        # pi
        "PI_CODING_AGENT_DIR": pi_dir,
        "PI_OFFLINE": "1",
        # codex
        "CODEX_HOME": codex_dir,
        "MOCK_API_KEY": "mock-key",
        # claude
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": "sk-ant-mock",
        "ANTHROPIC_MODEL": MODEL,
        "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
        "CLAUDE_CONFIG_DIR": claude_dir,
        "CLAUDE_CODE_TMPDIR": claude_tmp,
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def main() -> None:
    args = sys.argv[1:]
    fmt = "shell"
    if "--format" in args:
        i = args.index("--format")
        fmt = args[i + 1]
        del args[i : i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    env = setup(args[0], int(args[1]))
    if fmt == "json":
        print(json.dumps(env))
    else:
        for k, v in env.items():
            print(f"export {k}={shlex.quote(v)}")


if __name__ == "__main__":
    main()
