//! Every field of a run request, declared once ([`request_fields!`]): its name, type,
//! default, bounds, help text, whether it is a sandbox setting, and how the command line
//! spells it. Each front end is made from the table:
//!
//! ```text
//!  request_fields! ─┬─► RunRequest         the serde type: fan-out lines, MCP `run`/`fanout`
//!                   ├─► FIELDS: [Field]    ─► cli::run's clap arguments (args)
//!                   │                      ─► the MCP input schemas (json_schema)
//!                   │                      ─► error wording (Spell, in invalid.rs)
//!                   └─► from_matches       the parsed command line as a RunRequest
//! ```
//!
//! Defaults and bounds are the constants the planner enforces (`spec::DEFAULT_*`,
//! `SandboxLimits`): a default shown anywhere is the one in force. Help text names other
//! fields as `{name}`, which each front end spells its way ([`Spell`](crate::app::Spell)).
//!
//! Adding a field: one row here, and its rule in the planner.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::app::invalid::{Invalid, Spell};

mod types;
use crate::spec::{
    AgentKind, DEFAULT_GRACE, DEFAULT_LINGER, DEFAULT_MAX_DEPTH, SandboxLimits, Usd,
};
use types::{FromMatches, KindOf};

/// How the command line takes a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// `--NAME`.
    Long(&'static str),
    /// Not a flag: `--FIELD @FILE` of another field fills it.
    AtFileOf(&'static str),
    /// The program and its arguments after `--`.
    Trailing,
}

/// A default, as the planner applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Text(&'static str),
    Duration(Duration),
    Count(u64),
    Size(u64),
}

impl Preset {
    /// The value as a request writes it (`"5s"`, `4096`, `"8G"`).
    pub fn json(self) -> Value {
        match self {
            Preset::Text(t) => json!(t),
            Preset::Duration(d) => json!(crate::spec::duration_text(d)),
            Preset::Count(n) => json!(n),
            Preset::Size(b) => json!(crate::spec::format_size(b)),
        }
    }
    /// The value as a command line writes it.
    pub fn text(self) -> String {
        match self.json() {
            Value::String(s) => s,
            v => v.to_string(),
        }
    }
}

/// The JSON shape of a field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    Path,
    Texts,
    Paths,
    Switch,
    Count,
    Map,
    Agent,
    /// An amount in US dollars (a JSON number).
    Money,
}

/// One field of a run request.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Its name in JSON (a fan-out line, an MCP call).
    pub name: &'static str,
    pub kind: Kind,
    pub flag: Flag,
    /// The placeholder of its value in `--help`.
    pub value_name: &'static str,
    pub default: Option<Preset>,
    pub min: Option<u64>,
    pub max: Option<u64>,
    /// Meaningful only with `sandbox`.
    pub sandbox: bool,
    /// The field the command line needs with it.
    pub requires: Option<&'static str>,
    /// Values of a list may be given comma-separated on the command line.
    pub comma_separated: bool,
    /// What it is, for a person and a model; `{other}` names another field.
    pub help: &'static str,
}

impl Field {
    const BASE: Field = Field {
        name: "",
        kind: Kind::Text,
        flag: Flag::Trailing,
        value_name: "",
        default: None,
        min: None,
        max: None,
        sandbox: false,
        requires: None,
        comma_separated: false,
        help: "",
    };

    /// The help text in `spell`'s words, with its default and what it needs.
    pub fn describe(&self, spell: Spell) -> String {
        let mut s = spell.text(self.help);
        if spell == Spell::Flag && FIELDS.iter().any(|f| f.flag == Flag::AtFileOf(self.name)) {
            s.push_str(" (or @FILE to read it from a file)");
        }
        if self.sandbox && spell != Spell::Flag {
            s.push_str(&spell.text(
                " A sandbox setting: it applies with {sandbox}; without it, a value other than the default is refused.",
            ));
        }
        if spell == Spell::Flag {
            if let (Some(lo), Some(hi)) = (self.min, self.max) {
                s.push_str(&format!(" ({lo} to {hi})"));
            }
            if let Some(d) = self.default {
                s.push_str(&format!(" [default: {}]", d.text()));
            }
        }
        s
    }

    /// The field's JSON Schema for a model: type, description, default and bounds.
    pub fn json_schema(&self) -> Value {
        let mut s = match self.kind {
            Kind::Text | Kind::Path => json!({"type": "string"}),
            Kind::Texts | Kind::Paths => json!({"type": "array", "items": {"type": "string"}}),
            Kind::Switch => json!({"type": "boolean", "default": false}),
            Kind::Count => json!({"type": "integer"}),
            Kind::Map => json!({"type": "object", "additionalProperties": {"type": "string"}}),
            Kind::Agent => json!({"type": "string", "enum": AGENT_NAMES}),
            Kind::Money => json!({"type": "number", "exclusiveMinimum": 0}),
        };
        let o = s.as_object_mut().expect("an object");
        o.insert("description".into(), json!(self.describe(Spell::Field)));
        if let Some(d) = self.default {
            o.insert("default".into(), d.json());
        }
        if let Some(m) = self.min {
            o.insert("minimum".into(), json!(m));
        }
        if let Some(m) = self.max {
            o.insert("maximum".into(), json!(m));
        }
        s
    }

    /// The clap argument of a field the command line takes as a flag or after `--`.
    pub fn arg(&self) -> Option<Arg> {
        let a = Arg::new(self.name).help(self.describe(Spell::Flag));
        let a = match self.flag {
            Flag::AtFileOf(_) => return None,
            Flag::Trailing => {
                return Some(
                    a.last(true)
                        .num_args(0..)
                        .action(ArgAction::Append)
                        .value_name("PROGRAM [ARGS]...")
                        .value_parser(clap::value_parser!(OsString)),
                );
            }
            Flag::Long(l) => a.long(l),
        };
        let a = if self.value_name.is_empty() {
            a
        } else {
            a.value_name(self.value_name)
        };
        let a = match self.kind {
            Kind::Switch => a.action(ArgAction::SetTrue),
            Kind::Text => a.action(ArgAction::Set),
            Kind::Path => a
                .action(ArgAction::Set)
                .value_parser(clap::value_parser!(PathBuf)),
            Kind::Count => a
                .action(ArgAction::Set)
                .value_parser(clap::value_parser!(u32)),
            Kind::Texts | Kind::Map => a.action(ArgAction::Append),
            Kind::Paths => a
                .action(ArgAction::Append)
                .value_parser(clap::value_parser!(PathBuf)),
            Kind::Agent => a
                .action(ArgAction::Set)
                .value_parser(["pi", "claude", "codex"]),
            Kind::Money => a
                .action(ArgAction::Set)
                .value_parser(|s: &str| s.parse::<Usd>()),
        };
        let a = if self.comma_separated {
            a.value_delimiter(',')
        } else {
            a
        };
        let a = match self.requires {
            Some(r) => a.requires(r),
            None => a,
        };
        Some(if self.sandbox || self.name == "sandbox" {
            a.help_heading("Sandbox")
        } else {
            a
        })
    }
}

/// The names an `agent` is written as.
pub const AGENT_NAMES: [&str; 4] = ["pi", "claude", "codex", "command"];

/// The field called `name`.
pub fn field(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.name == name)
}

/// Declares [`RunRequest`], [`FIELDS`] and [`from_matches`] from one table.
macro_rules! request_fields {
    ($( $name:ident : $ty:ty { $($key:ident : $val:expr),* $(,)? } )*) => {
        /// A request to run something: the flags of `subpane run`, a line of a fan-out
        /// file, or the arguments of an MCP `run` call, with the fields of [`FIELDS`].
        /// Nothing in it is checked yet; [`crate::app::plan`] does that.
        ///
        /// Either `argv` (any program) or `agent` with `task` (or `task_file`). Durations
        /// are strings with a unit (`"30s"`, `"10m"`). `task` and `system_prompt` are the
        /// text itself; the command line's and the fan-out file's `@FILE` is turned into
        /// `task_file` and `system_prompt_file` by [`RunRequest::read_at_files`] at those
        /// edges. Unknown fields are refused, so a misspelt field is an error rather than
        /// silently ignored.
        ///
        /// ```json
        /// {"agent": "claude", "task": "review src/lib.rs", "run_id": "review-1",
        ///  "cwd": "/src/app", "tools": ["Read"], "timeout": "10m", "labels": {"team": "core"}}
        /// ```
        ///
        /// `env` values are secrets as far as subpane knows: `Debug` shows their names
        /// only, and records keep names only.
        #[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct RunRequest {
            $( pub $name: $ty, )*
        }

        /// Every field of a [`RunRequest`], in the order of the struct.
        pub const FIELDS: &[Field] = &[
            $( Field {
                name: stringify!($name),
                kind: <$ty as KindOf>::KIND,
                $($key: $val,)*
                ..Field::BASE
            }, )*
        ];

        /// The request a parsed command line (with [`FIELDS`]' arguments) makes.
        pub fn from_matches(m: &ArgMatches) -> Result<RunRequest, Invalid> {
            let mut i = FIELDS.iter();
            Ok(RunRequest {
                $( $name: <$ty as FromMatches>::from_matches(m, i.next().expect("a field"))?, )*
            })
        }
    };
}

const fn secs(d: Duration) -> Option<Preset> {
    Some(Preset::Duration(d))
}

request_fields! {
    agent: Option<AgentKind> {
        flag: Flag::Long("agent"), value_name: "AGENT", requires: Some("task"),
        help: "The agent CLI to run with {task}: pi, claude or codex (or leave it out, or \
               give \"command\", to run {argv} instead)",
    }
    task: Option<String> {
        flag: Flag::Long("task"), value_name: "TEXT|@FILE",
        help: "What the agent should do, as text",
    }
    task_file: Option<PathBuf> {
        flag: Flag::AtFileOf("task"),
        help: "A file whose content is the agent's task, instead of {task} (relative to the \
               caller's directory)",
    }
    argv: Vec<String> {
        flag: Flag::Trailing,
        help: "The program and its arguments, e.g. [\"make\", \"test\"]; not a shell line \
               (use [\"sh\", \"-c\", \"...\"] for one). Give either this or {agent} with {task}",
    }
    run_id: Option<String> {
        flag: Flag::Long("run-id"), value_name: "ID",
        help: "The run id (letters, digits, \".\", \"_\", \"-\"); generated when left out, \
               e.g. 20261130-033943-a1b2c3. Must be new",
    }
    host: Option<String> {
        flag: Flag::Long("host"), value_name: "NAME",
        help: "Run the attempt on this host (one recorded by `subpane hosts add`) instead of \
               this machine: the host's own subpane runs and supervises it under its home, \
               {cwd} is a directory there (its login directory when left out), and the \
               envelope is copied back here when it ends",
    }
    cwd: Option<PathBuf> {
        flag: Flag::Long("cwd"), value_name: "DIR",
        help: "The directory the program runs in; the caller's own directory when left out",
    }
    model: Option<String> {
        flag: Flag::Long("model"), value_name: "M", requires: Some("agent"),
        help: "The agent's model, as the agent CLI names it",
    }
    system_prompt: Option<String> {
        flag: Flag::Long("system-prompt"), value_name: "TEXT|@FILE", requires: Some("agent"),
        help: "The agent's system prompt, as text",
    }
    system_prompt_file: Option<PathBuf> {
        flag: Flag::AtFileOf("system_prompt"),
        help: "A file whose content is the agent's system prompt, instead of {system_prompt}",
    }
    tools: Vec<String> {
        flag: Flag::Long("tools"), value_name: "a,b", requires: Some("agent"),
        comma_separated: true,
        help: "Tools the agent may use (for claude they are pre-approved)",
    }
    thinking: Option<String> {
        flag: Flag::Long("thinking"), value_name: "LEVEL", requires: Some("agent"),
        help: "The agent's thinking level",
    }
    resume: Option<String> {
        flag: Flag::Long("resume"), value_name: "SESSION_ID", requires: Some("agent"),
        help: "An agent session to continue: the output.session_id of an earlier result",
    }
    labels: BTreeMap<String, String> {
        flag: Flag::Long("label"), value_name: "K=V",
        help: "Labels recorded with the run (K=V, repeatable on the command line); the run \
               list filters by them",
    }
    correlation_id: Option<String> {
        flag: Flag::Long("correlation-id"), value_name: "ID",
        help: "An id of the caller's, recorded with the run as it is",
    }
    timeout: Option<String> {
        flag: Flag::Long("timeout"), value_name: "DUR",
        help: "Stop (kill) the run after this long, with a unit: 30s, 10m, 2h; no limit when \
               left out",
    }
    idle_timeout: Option<String> {
        flag: Flag::Long("idle-timeout"), value_name: "DUR",
        help: "Stop (kill) the run after this long without output on stdout or stderr, e.g. 5m",
    }
    linger: Option<String> {
        flag: Flag::Long("linger"), value_name: "DUR", default: secs(DEFAULT_LINGER),
        help: "How long an agent may stay alive after its final event before it is killed",
    }
    stdin: Option<String> {
        flag: Flag::Long("stdin"), value_name: "pipe|null",
        help: "The program's stdin: pipe, its input while it runs (the messages of `subpane \
               send` and of the pane's input line: an agent CLI's structured input, or for a \
               command each message and a newline), or null (/dev/null). An agent whose CLI \
               has an input mode gets pipe when left out, a command null",
    }
    keep_open: Option<String> {
        flag: Flag::Long("keep-open"), value_name: "DUR",
        help: "With input: how long an agent that finished its turn waits for a next \
               message before its input is closed and it ends (by default it ends at once)",
    }
    grace: Option<String> {
        flag: Flag::Long("grace"), value_name: "DUR", default: secs(DEFAULT_GRACE),
        help: "Time between the polite stop signal (SIGTERM) and the kill, when a run is stopped",
    }
    max_turns: Option<u32> {
        flag: Flag::Long("max-turns"), value_name: "N", min: Some(1),
        help: "Stop the agent (failure budget) once it has done more turns than this; only for \
               an agent whose CLI reports its turns as it goes (pi)",
    }
    max_tokens: Option<u32> {
        flag: Flag::Long("max-tokens"), value_name: "N", min: Some(1),
        help: "Stop the agent (failure budget) once its total tokens (input, output and \
               cache, as its CLI counts them) pass this; only for an agent whose CLI reports \
               them as it goes (pi, claude)",
    }
    max_cost: Option<Usd> {
        flag: Flag::Long("max-cost"), value_name: "USD",
        help: "Stop the agent (failure budget) once the cost its CLI reports passes this many \
               US dollars; only for an agent whose CLI reports its cost as it goes (pi), or, \
               with a price, its tokens (claude)",
    }
    price: Option<String> {
        flag: Flag::Long("price"), value_name: "IN,OUT",
        help: "The model's price in US dollars per million tokens: input and output, then \
               optionally cache read and cache write (3,15 or 3,15,0.3,3.75). A CLI that \
               reports tokens but no cost is costed from its usage, for a max cost (the run's, \
               or a fan-out group's)",
    }
    env: BTreeMap<String, String> {
        flag: Flag::Long("env"), value_name: "K=V",
        help: "Variables set for the program (K=V, repeatable on the command line); records \
               keep their names only, never the values, and each value (with its base64, URL \
               and JSON encodings) is masked as *** in every log, file and answer",
    }
    env_plain: BTreeMap<String, String> {
        flag: Flag::Long("env-plain"), value_name: "K=V",
        help: "Variables set for the program whose values are not secret (K=V, repeatable): \
               as {env}, but their values are not masked",
    }
    keep_session: bool {
        flag: Flag::Long("keep-session"),
        help: "Keep the run's tmux session after it ends, to read its pane (gc removes it)",
    }
    sandbox: bool {
        flag: Flag::Long("sandbox"),
        help: "Run the program in a kernel sandbox: it writes only its workspace ({cwd}, or \
               the worktree; the repository's git directory is its own private copy, and only \
               its branch comes back), its artifact directory, a private /tmp and {writable} \
               paths; no network unless {network} says so",
    }
    network: Option<String> {
        flag: Flag::Long("network"), value_name: "POLICY", sandbox: true,
        default: Some(Preset::Text(crate::spec::Network::NONE)),
        help: "Network of a sandboxed program: none (its own loopback only), \
               full, or allow:HOST,... (host names, IP literals or *.example.com, through \
               subpane's egress proxy)",
    }
    writable: Vec<PathBuf> {
        flag: Flag::Long("writable"), value_name: "PATH", sandbox: true,
        help: "More files or trees the sandboxed program may write (repeatable)",
    }
    hide: Vec<PathBuf> {
        flag: Flag::Long("hide"), value_name: "PATH", sandbox: true,
        help: "Files or trees the sandboxed program cannot see (repeatable)",
    }
    env_pass: Vec<String> {
        flag: Flag::Long("env-pass"), value_name: "NAME", sandbox: true,
        help: "Variables passed from the caller's environment into the sandbox (repeatable); \
               a sandboxed program gets only what its agent needs (PATH, HOME, TERM, LANG, its \
               API keys) plus these and {env}",
    }
    max_procs: Option<u32> {
        flag: Flag::Long("max-procs"), value_name: "N", sandbox: true,
        default: Some(Preset::Count(SandboxLimits::DEFAULT.processes as u64)),
        min: Some(SandboxLimits::MIN_PROCESSES as u64),
        max: Some(SandboxLimits::MAX_PROCESSES as u64),
        help: "Processes and threads the sandboxed program may have at once",
    }
    max_memory: Option<String> {
        flag: Flag::Long("max-memory"), value_name: "SIZE", sandbox: true,
        default: Some(Preset::Size(SandboxLimits::DEFAULT.memory_bytes)),
        help: "What one sandboxed process may allocate (its heap and writable mappings), e.g. 4G",
    }
    max_tmp: Option<String> {
        flag: Flag::Long("max-tmp"), value_name: "SIZE", sandbox: true,
        default: Some(Preset::Size(SandboxLimits::DEFAULT.tmp_bytes)),
        help: "The size of the sandbox's private /tmp (its files take memory), e.g. 512M",
    }
    max_file_size: Option<String> {
        flag: Flag::Long("max-file-size"), value_name: "SIZE", sandbox: true,
        default: Some(Preset::Size(SandboxLimits::DEFAULT.file_size_bytes)),
        help: "The largest file a sandboxed process may write, e.g. 1G",
    }
    worktree: bool {
        flag: Flag::Long("worktree"),
        help: "Run in a new git worktree of the {cwd} repository, made from HEAD under \
               $SUBPANE_HOME/worktrees/RUN-N on branch subpane/RUN. At the end its status and \
               diff go to the attempt directory; a completed attempt's worktree is removed \
               (its branch too unless it has commits), a failed or cancelled one is kept until \
               gc. Outside a git work tree: refused",
    }
    max_depth: Option<u32> {
        flag: Flag::Long("max-depth"), value_name: "N",
        default: Some(Preset::Count(DEFAULT_MAX_DEPTH as u64)), min: Some(0),
        help: "How deep runs started by this run's program (and theirs) may nest; it can only \
               lower the limit an enclosing run gave",
    }
}

/// The clap arguments of every field the command line takes.
pub fn args() -> impl Iterator<Item = Arg> {
    FIELDS.iter().filter_map(Field::arg)
}

/// The `properties` of a JSON Schema with every field.
pub fn properties() -> serde_json::Map<String, Value> {
    FIELDS
        .iter()
        .map(|f| (f.name.to_owned(), f.json_schema()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field is a field of the serde type (a fan-out line), in the table's order.
    #[test]
    fn the_table_is_the_request() {
        let v = serde_json::to_value(RunRequest::default()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut names: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        names.sort();
        assert_eq!(sorted, names);
    }

    /// A field a front end lacks fails here: each is a clap argument (or filled by another's
    /// `@FILE`), a property of the schema, and a field of a fan-out line.
    #[test]
    fn every_front_end_has_every_field() {
        let cmd = args().fold(clap::Command::new("t"), clap::Command::arg);
        let props = properties();
        for f in FIELDS {
            match f.flag {
                Flag::AtFileOf(of) => assert!(field(of).is_some(), "{}", f.name),
                Flag::Long(_) | Flag::Trailing => assert!(
                    cmd.get_arguments().any(|a| a.get_id() == f.name),
                    "{} is no argument",
                    f.name
                ),
            }
            assert!(props.contains_key(f.name), "{}", f.name);
            let line =
                json!({ f.name: serde_json::to_value(RunRequest::default()).unwrap()[f.name] });
            assert!(
                serde_json::from_value::<RunRequest>(line).is_ok(),
                "{} is no field of a line",
                f.name
            );
            assert!(!f.help.is_empty(), "{}", f.name);
            if let Some(r) = f.requires {
                assert!(field(r).is_some(), "{} requires {r}", f.name);
            }
        }
    }

    /// Help text names fields that exist, and a model's never speaks of flags.
    #[test]
    fn help_names_real_fields() {
        for f in FIELDS {
            let d = f.describe(Spell::Field);
            assert!(!d.contains("--") && !d.contains('{'), "{}: {d}", f.name);
            let d = f.describe(Spell::Flag);
            assert!(!d.contains('{'), "{}: {d}", f.name);
        }
    }
}
