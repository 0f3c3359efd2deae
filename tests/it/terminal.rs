//! A real terminal for tests: a command in a tmux session of the test's own server (its own
//! socket), whose screen is read with `capture-pane` and typed into with `send-keys`.
//! Dropping it closes the session.

use std::time::{Duration, Instant};

use crate::harness::{BIN, DEADLINE, TestEnv};

pub struct Terminal<'a> {
    env: &'a TestEnv,
    pub session: String,
}

impl<'a> Terminal<'a> {
    /// `subpane ARGS` in a `cols`×`rows` terminal, with this test's home and socket and `vars`
    /// set (`NAME=` unsets NAME). The screen stays after the command exits.
    pub fn subpane(
        env: &'a TestEnv,
        session: &str,
        (cols, rows): (u16, u16),
        vars: &[(&str, &str)],
        args: &[&str],
    ) -> Self {
        let mut argv: Vec<String> = vec!["env".into()];
        for (k, v) in vars {
            if v.is_empty() {
                argv.extend(["-u".into(), (*k).into()]);
            } else {
                argv.push(format!("{k}={v}"));
            }
        }
        argv.push(format!("SUBPANE_HOME={}", env.home.display()));
        argv.push(format!("SUBPANE_TMUX_SOCKET={}", env.socket.display()));
        argv.push(BIN.into());
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        Self::command(env, session, (cols, rows), &argv)
    }

    /// `argv` in a `cols`×`rows` terminal.
    pub fn command(
        env: &'a TestEnv,
        session: &str,
        (cols, rows): (u16, u16),
        argv: &[String],
    ) -> Self {
        let out = env
            .tmux()
            .args(["new-session", "-d", "-s", session])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()])
            .arg("-c")
            .arg(&env.work)
            .arg("--")
            .args(argv)
            // The screen stays after the command exits; in the same command, so tmux applies
            // it before it sees the command exit.
            .args([
                ";",
                "set-option",
                "-t",
                &format!("={session}:"),
                "remain-on-exit",
                "on",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        Self {
            env,
            session: session.to_owned(),
        }
    }

    fn target(&self) -> String {
        format!("={}:", self.session)
    }

    /// What the screen shows now, one line per row.
    pub fn screen(&self) -> String {
        let out = self
            .env
            .tmux()
            .args(["capture-pane", "-p", "-t", &self.target()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen and what scrolled off it, wrapped lines joined.
    pub fn history(&self) -> String {
        self.env.capture_pane(&self.session)
    }

    /// Waits until the screen satisfies `pred` (up to the harness's deadline); the screen.
    pub fn wait_until(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < end,
                "the terminal never showed {what}; it shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the screen shows `needle`; the screen.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait_until(&format!("{needle:?}"), |s| s.contains(needle))
    }

    /// Types keys (tmux key names: `q`, `Enter`, `C-c`, `Down`).
    pub fn keys(&self, keys: &[&str]) {
        let out = self
            .env
            .tmux()
            .args(["send-keys", "-t", &self.target()])
            .args(keys)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// A tmux format of the terminal's pane (`#{pane_pid}`, `#{alternate_on}`).
    pub fn format(&self, f: &str) -> String {
        let out = self
            .env
            .tmux()
            .args(["display-message", "-p", "-t", &self.target(), f])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Whether the command in the terminal has exited.
    pub fn exited(&self) -> bool {
        self.format("#{pane_dead}") == "1"
    }

    /// The exit status of the command, once it has exited.
    pub fn wait_exit(&self) -> i32 {
        let mut dead_since = None;
        crate::harness::wait_until("the terminal's command to exit", || {
            // Dead, but the status may be set a moment later.
            if !self.exited() {
                return None;
            }
            let status = self.format("#{pane_dead_status}").parse().ok();
            // tmux 3.3a built with libutempter sets SIGCHLD to SIG_DFL while its utmp helper
            // runs (when another pane closes): a pane that exits then is never reaped and its
            // status never set, until the next SIGCHLD. Give the server that one.
            let since = *dead_since.get_or_insert_with(Instant::now);
            if status.is_none()
                && since.elapsed() > Duration::from_millis(500)
                && let Ok(server) = self.format("#{pid}").parse::<i32>()
            {
                // SAFETY: plain kill(2); SIGCHLD only makes tmux reap its children.
                unsafe { libc::kill(server, libc::SIGCHLD) };
            }
            status
        })
    }

    /// The pid of the command in the terminal.
    pub fn pid(&self) -> i32 {
        self.format("#{pane_pid}").parse().unwrap()
    }
}

impl Drop for Terminal<'_> {
    fn drop(&mut self) {
        let _ = self
            .env
            .tmux()
            .args(["kill-session", "-t", &format!("={}", self.session)])
            .output();
    }
}
