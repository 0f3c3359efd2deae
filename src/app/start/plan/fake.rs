//! A machine in memory for the plan's tests (and the tests of `worktree.rs` and `retry.rs`),
//! and the helpers they share.

use super::*;
use crate::store::Found;
use std::collections::HashMap;

/// A machine in memory: directories, files, executables, what `which` finds, and git
/// repositories.
pub(crate) struct Fake {
    pub(crate) cwd: PathBuf,
    pub(crate) dirs: Vec<PathBuf>,
    pub(crate) files: HashMap<PathBuf, String>,
    /// path → executable?
    pub(crate) programs: HashMap<PathBuf, bool>,
    pub(crate) on_path: HashMap<String, PathBuf>,
    pub(crate) vars: Vec<(OsString, OsString)>,
    pub(crate) arg_max: usize,
    pub(crate) repos: Vec<RepoDirs>,
    /// What [`System::attempt_ancestor_vars`] finds.
    pub(crate) ancestor_vars: Vec<(OsString, OsString)>,
    /// pi's saved sessions: id → the directory holding it.
    pub(crate) pi_sessions: HashMap<String, PathBuf>,
    /// Symbolic links: a path → where it leads (a whole path, resolved as one step).
    pub(crate) links: HashMap<PathBuf, PathBuf>,
}

impl Fake {
    pub(crate) fn new() -> Self {
        let mut on_path = HashMap::new();
        on_path.insert("tmux".into(), PathBuf::from("/usr/bin/tmux"));
        on_path.insert("make".into(), PathBuf::from("/usr/bin/make"));
        Self {
            cwd: "/work".into(),
            dirs: vec!["/work".into(), "/src".into()],
            files: HashMap::new(),
            programs: HashMap::new(),
            on_path,
            vars: vec![
                ("PATH".into(), "/usr/bin".into()),
                ("HOME".into(), "/root".into()),
                ("TMUX".into(), "/tmp/tmux-0/default,1,0".into()),
            ],
            arg_max: 2 * 1024 * 1024,
            repos: Vec::new(),
            ancestor_vars: Vec::new(),
            pi_sessions: HashMap::new(),
            links: HashMap::new(),
        }
    }
}

impl System for Fake {
    fn current_dir(&self) -> std::io::Result<PathBuf> {
        Ok(self.cwd.clone())
    }
    fn canonicalize(&self, p: &Path) -> std::io::Result<PathBuf> {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        };
        let p = self.links.get(&p).cloned().unwrap_or(p);
        if self.dirs.contains(&p) || self.files.contains_key(&p) {
            Ok(p)
        } else {
            Err(std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }
    fn is_dir(&self, p: &Path) -> bool {
        self.dirs.iter().any(|d| d == p)
    }
    fn read_to_string(&self, p: &Path) -> std::io::Result<String> {
        self.files
            .get(&self.cwd.join(p))
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
    fn read_record(&self, p: &Path) -> std::io::Result<Vec<u8>> {
        self.read_to_string(p).map(String::into_bytes)
    }
    fn look_in_tree(&self, tree: &Path, rel: &str, limit: u64) -> std::io::Result<Found> {
        let p = tree.join(rel);
        if self.is_dir(&p) {
            return Ok(Found::Dir);
        }
        match self.files.get(&p) {
            Some(text) if text.len() as u64 <= limit => Ok(Found::File(text.clone().into_bytes())),
            Some(_) => Err(std::io::ErrorKind::FileTooLarge.into()),
            None => Err(std::io::ErrorKind::NotFound.into()),
        }
    }
    fn vars(&self) -> Vec<(OsString, OsString)> {
        self.vars.clone()
    }
    fn which(&self, program: &str, path: Option<&OsStr>, _cwd: &Path) -> Option<PathBuf> {
        path?;
        self.on_path.get(program).cloned()
    }
    fn executable(&self, p: &Path) -> Option<bool> {
        self.programs.get(p).copied()
    }
    fn tmux_socket(&self) -> PathBuf {
        "/tmp/tmux-0/subpane".into()
    }
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000)
    }
    fn new_run_id(&self) -> RunId {
        RunId::parse("generated-1").unwrap()
    }
    fn arg_max(&self) -> usize {
        self.arg_max
    }
    fn git_repo(&self, dir: &Path) -> Option<RepoDirs> {
        self.repos
            .iter()
            .find(|r| dir.starts_with(&r.toplevel))
            .cloned()
    }
    fn attempt_ancestor_vars(&self) -> Vec<(OsString, OsString)> {
        self.ancestor_vars.clone()
    }
    fn subpane_exe(&self) -> Option<PathBuf> {
        Some("/usr/bin/subpane".into())
    }
    fn pi_session_dir(&self, _home: &Home, id: &str) -> Option<PathBuf> {
        self.pi_sessions.get(id).cloned()
    }
}

pub(crate) fn home() -> Home {
    Home::at("/h".into())
}

pub(crate) fn cmd(argv: &[&str]) -> RunRequest {
    RunRequest {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        ..RunRequest::default()
    }
}

pub(crate) fn refused(req: &RunRequest, sys: &Fake) -> String {
    match plan(req, &home(), sys) {
        Err(e) if e.nothing_started() => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
