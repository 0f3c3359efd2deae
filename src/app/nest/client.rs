//! The client: `subpane run` inside a sandbox sends its request to the attempt's worker and
//! reads the answers.
//!
//! ```text
//!  socket_of_caller: $SUBPANE_NEST_SOCKET, or (a caller that lost its variables, `env -i`)
//!                    the nearest ancestor's inside the attempt
//!  NestRequest::from_caller: @FILE read here (with the caller's rights), the variables the
//!                    run needs, the cwd ─► Client::send (one line) ─► answer(): Reply…
//!  Ctrl-C ─► Interrupts::interrupt ─► "interrupt" line (the worker cancels the run)
//! ```
//!
//! Common pitfalls:
//! * The write side stays open while the run is waited for: closing it gives the run up.
//! * A socket path longer than a Unix address holds is reached through its directory
//!   (`SocketPath`), which must stay open while connecting.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use super::{ClientLine, NestError, NestRequest, REQUEST_LIMIT, Reply};
use crate::app::plan::{passes_into_sandbox, text_or_file, var_in};
use crate::app::{Error, RealSystem, RunRequest, System};
use crate::sandbox::relay::SocketPath;
use crate::spec::{AgentKind, NEST_SOCKET_VAR};

/// The request socket when this process runs inside a sandboxed attempt: from its own
/// environment, or for `run` (which looks anyway, for its lineage) from the nearest ancestor
/// inside the attempt.
pub fn socket_of_caller(run: bool) -> Option<PathBuf> {
    let own = std::env::var_os(NEST_SOCKET_VAR).filter(|v| !v.is_empty());
    let lost = run && std::env::var_os("SUBPANE_RUN_ID").is_none();
    own.or_else(|| {
        lost.then(|| var_in(&RealSystem.attempt_ancestor_vars(), NEST_SOCKET_VAR))
            .flatten()
            .filter(|v| !v.is_empty())
    })
    .map(PathBuf::from)
}

impl NestRequest {
    /// The request of this process (inside the sandbox): `@FILE` read, its directory, and
    /// the variables the run takes from the caller.
    pub fn from_caller(mut request: RunRequest, detach: bool) -> Result<Self, Error> {
        let sys = RealSystem;
        // A file is read here, where the caller sees it: the request carries its text.
        for (flag, text, file) in [
            ("task", &mut request.task, &mut request.task_file),
            (
                "system_prompt",
                &mut request.system_prompt,
                &mut request.system_prompt_file,
            ),
        ] {
            if let Some(t) = text_or_file(&sys, flag, text.as_deref(), file.as_deref())? {
                *text = Some(t);
                *file = None;
            }
        }
        let cwd = sys.current_dir().map_err(|e| {
            Error::invalid(format!(
                "cannot read the current directory: {e}; pass {{cwd}}"
            ))
        })?;
        let agent = request.agent.unwrap_or(AgentKind::Command);
        let vars: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .filter(|(k, _)| passes_into_sandbox(&request, agent, k))
            .collect();
        let req = Self {
            request,
            cwd,
            vars,
            detach,
        };
        let size = serde_json::to_vec(&req).map_or(0, |v| v.len());
        if size > REQUEST_LIMIT {
            return Err(Error::invalid(format!(
                "the request is {} MiB; a run from a sandbox takes at most {} MiB, its task and variables included",
                size >> 20,
                REQUEST_LIMIT >> 20
            )));
        }
        Ok(req)
    }
}

/// A connection to the attempt's worker.
pub struct Client {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

/// Sends interrupts from another thread (the one that takes Ctrl-C).
pub struct Interrupts(UnixStream);

impl Interrupts {
    pub fn interrupt(&self) {
        if let Ok(mut line) = serde_json::to_vec(&ClientLine::Interrupt) {
            line.push(b'\n');
            let _ = (&self.0).write_all(&line);
        }
    }
}

impl Client {
    pub fn connect(socket: &Path) -> Result<Self, Error> {
        let why = |source: std::io::Error| NestError::Unreachable {
            socket: socket.to_path_buf(),
            source,
        };
        let at = SocketPath::new(socket).map_err(why)?;
        let stream = UnixStream::connect(at.usable()).map_err(why)?;
        let reader = BufReader::new(stream.try_clone().map_err(why)?);
        Ok(Self { stream, reader })
    }

    pub fn interrupts(&self) -> Result<Interrupts, Error> {
        self.stream.try_clone().map(Interrupts).map_err(|source| {
            NestError::Io {
                what: "cannot hand on interrupts",
                source,
            }
            .into()
        })
    }

    pub fn send(&self, req: &NestRequest) -> Result<(), Error> {
        let mut line = serde_json::to_vec(req).map_err(|source| NestError::Json {
            what: "cannot write the request",
            source,
        })?;
        line.push(b'\n');
        (&self.stream).write_all(&line).map_err(|source| {
            NestError::Io {
                what: "cannot send the request to the worker",
                source,
            }
            .into()
        })
    }

    /// The worker's next answer.
    pub fn answer(&mut self) -> Result<Reply, Error> {
        let mut line = Vec::new();
        let limit = crate::store::RECORD_LIMIT;
        (&mut self.reader)
            .take(limit + 1)
            .read_until(b'\n', &mut line)
            .map_err(|source| NestError::Io {
                what: "cannot read the worker's answer",
                source,
            })?;
        if line.is_empty() {
            return Err(NestError::NoAnswer.into());
        }
        serde_json::from_slice(&line).map_err(|source| {
            NestError::Json {
                what: "the worker's answer cannot be read",
                source,
            }
            .into()
        })
    }
}
