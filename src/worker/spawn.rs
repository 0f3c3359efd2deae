//! Setting up and starting the program: the pane's header, the log files, the command (its
//! own session, a clean signal state, the attempt's environment), and the spawn.
//!
//! Common pitfalls:
//! * The logs are opened before the spawn: a program that cannot be recorded is not started.
//! * The clock of the timeout starts just before the spawn, not when the loop first polls.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use super::logfile::LogFile;
use super::pane::Style;
use super::run::Worker;
use super::stop::Event;
use crate::envelope::ProcRef;
use crate::fresh::now_rfc3339;
use crate::procs;
use crate::secrets::Masker;
use crate::spec::Stdin;
use crate::store;
use crate::term::sanitize;

impl Worker {
    /// What runs, where, at the top of the pane.
    pub(crate) fn header(&mut self) {
        let s = &self.spec;
        let argv: Vec<String> = s
            .argv
            .iter()
            .map(|a| shell_escape::escape(std::borrow::Cow::Borrowed(a.as_str())).into_owned())
            .collect();
        let title = format!(
            "subpane ▸ run {} · attempt {} · {}",
            s.run_id,
            s.attempt,
            s.agent.as_str()
        );
        let command = format!("$ {}", argv.join(" "));
        let cwd = format!("cwd: {}", s.cwd.display());
        self.pane
            .line(Style::Bold, &sanitize(title.as_bytes(), 400));
        self.pane
            .line(Style::Dim, &sanitize(command.as_bytes(), 400));
        self.pane.line(Style::Dim, &sanitize(cwd.as_bytes(), 400));
        self.pane.line(
            Style::Dim,
            &format!(
                "{} · Ctrl-C twice cancels the run",
                crate::tmux::DETACH_HINT
            ),
        );
        if self.pane.takes_keys() {
            self.pane.line(
                Style::Dim,
                "type on the bottom line and press Enter to send the agent a message",
            );
        }
        self.pane.line(Style::Dim, &"─".repeat(60));
    }

    /// Creates the logs, which must not exist yet: a link or file under their names was put
    /// there by someone else, and is never written through.
    fn open_logs(&mut self) -> std::io::Result<()> {
        let open = |p: &Path| {
            store::create_new(p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        };
        // 128 KiB a write: a big log keeps up to four such buffers (digest.rs).
        let events = LogFile::new(open(&self.paths.events())?, 128 * 1024);
        let stdout_log = LogFile::new(open(&self.paths.stdout_log())?, 64 * 1024);
        let stderr_log = LogFile::new(open(&self.paths.stderr_log())?, 0);
        self.stream.set_logs(events, stdout_log, stderr_log);
        Ok(())
    }

    /// Starts the program; on success its pipes are in `self.stream` and the machine runs.
    /// The error says why nothing was started, as the envelope tells it. A sandbox helper
    /// that started but could not set the sandbox up is a start too (the loop reaps it);
    /// `facts.sandbox_error` says what failed.
    pub(crate) fn spawn(&mut self) -> Result<(), SpawnError> {
        self.open_logs()
            .map_err(|e| format!("cannot create the attempt's log files: {e}"))?;
        // The pane starts in `/` (a directory given to tmux is expanded as a format there):
        // the worker enters the attempt's directory itself, and the program inherits it.
        std::env::set_current_dir(&self.spec.cwd).map_err(|e| {
            format!(
                "cannot enter the working directory {}: {e}",
                self.spec.cwd.display()
            )
        })?;
        // The program's own place for artifacts (the launcher made it already for a
        // sandboxed attempt, whose policy names it).
        let out = self.paths.out_dir();
        match std::fs::create_dir(&out) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(format!("cannot create {}: {e}", out.display()).into());
            }
            _ => {}
        }
        let (env, spare) = store::take_env_file(&self.paths.env_file()).map_err(|e| {
            format!(
                "cannot read the attempt's environment ({}): {e}",
                self.paths.env_file().display()
            )
        })?;
        self.spare = Some(spare);
        self.mask_secrets(&env);
        let argv = self.spec.argv.clone();
        let program = argv.first().ok_or("the spec has an empty argv")?;
        let (mut cmd, report) = if self.spec.sandbox.enabled {
            self.start_proxy().map_err(SpawnError::Sandbox)?;
            self.prepare_git_view().map_err(SpawnError::Sandbox)?;
            self.start_nest().map_err(SpawnError::Sandbox)?;
            let (cmd, pipe) = self.sandbox_command(&argv)?;
            (cmd, Some(pipe))
        } else {
            let mut cmd = Command::new(program);
            cmd.args(&argv[1..]);
            (cmd, None)
        };
        cmd.env_clear()
            .envs(env)
            .envs(self.spec.program_vars(self.paths.dir(), &out))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A new session, not only a new process group: the program then has no controlling
        // terminal, so it can never be stopped by SIGTTIN/SIGTTOU for touching the pane's tty
        // (its stdin is /dev/null anyway), and keys typed in the pane reach only the worker.
        // Its pid is still its process group id, which is what stopping signals.
        // SAFETY: the closure only makes async-signal-safe calls.
        unsafe {
            cmd.pre_exec(|| {
                procs::reset_signals_in_child()?;
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        if self.spec.stdin == Stdin::Input {
            let keep_open = self
                .spec
                .limits
                .keep_open_ms
                .map(std::time::Duration::from_millis);
            let adapter = crate::adapter::adapter_for(self.spec.agent);
            self.input = Some(super::input::Input::bind(
                adapter,
                &self.paths.input_socket(),
                keep_open,
            )?);
        }
        match self.spec.stdin {
            Stdin::Null => cmd.stdin(Stdio::null()),
            Stdin::Input => cmd.stdin(Stdio::piped()),
            Stdin::PromptFile => {
                let f = store::open_read(&self.paths.prompt())
                    .map_err(|e| format!("cannot open the prompt file: {e}"))?;
                cmd.stdin(Stdio::from(f))
            }
        };
        let started = Instant::now();
        self.facts.started_at = Some(now_rfc3339());
        let mut child = cmd
            .spawn()
            .map_err(|e| super::not_started::why_not_started(program, &e))?;
        let pid = child.id() as i32;
        self.agent = Some(pid);
        self.facts.agent = procs::proc_ref(pid).or(Some(ProcRef {
            pid,
            start_ticks: 0,
        }));
        drop(cmd);
        if let Some(pipe) = report {
            // Set up or not, the helper is our child now: the loop reaps it either way.
            self.read_sandbox_report(pipe);
        }
        self.stream.attach(child.stdout.take(), child.stderr.take());
        if let Some(i) = self.input.as_mut() {
            let prompt = self.spec.task.as_ref().map(|t| t.prompt.as_str());
            i.attach(child.stdin.take(), prompt, self.stream.parser_mut());
            self.draw_input_line();
        }
        self.feed(Event::Spawned, started);
        Ok(())
    }
}

impl Worker {
    /// The matcher of the secrets in the program's environment (`spec.env.secret`), before
    /// anything the program writes is read; the envelope names them (`secrets`).
    fn mask_secrets(&mut self, env: &[(std::ffi::OsString, std::ffi::OsString)]) {
        let secret = &self.spec.env.secret;
        if secret.is_empty() {
            return;
        }
        let values: Vec<(&str, &[u8])> = env
            .iter()
            .filter_map(|(k, v)| {
                let k = k.to_str()?;
                secret.iter().any(|s| s == k).then_some((k, v.as_bytes()))
            })
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let (mut masked, mut short): (Vec<_>, Vec<_>) = values
            .iter()
            .partition(|(_, v)| !crate::secrets::too_short(v));
        masked.sort();
        short.sort();
        let masker = Arc::new(Masker::new(masked.iter().map(|(_, v)| *v)));
        self.stream.set_masker(masker.clone());
        self.pane.set_masker(masker.clone());
        self.masker = masker;
        self.facts.secrets = Some(crate::envelope::Secrets {
            masked: masked.iter().map(|(k, _)| (*k).to_owned()).collect(),
            too_short: short.iter().map(|(k, _)| (*k).to_owned()).collect(),
        });
    }
}

/// Why nothing was started.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// The program (or the sandbox helper) could not be started.
    Spawn(String),
    /// The sandbox could not be prepared (the egress proxy).
    Sandbox(String),
}

impl From<String> for SpawnError {
    fn from(s: String) -> Self {
        SpawnError::Spawn(s)
    }
}

impl From<&str> for SpawnError {
    fn from(s: &str) -> Self {
        SpawnError::Spawn(s.to_owned())
    }
}
