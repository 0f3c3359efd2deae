//! `send`: a user message (or an interrupt) for a running agent, through its worker's input
//! socket (see `worker::input`); the answer comes once the agent has taken it.
//!
//! ```text
//!  find the run ─ finished? refused ─ started without input? refused (why)
//!    ─► connect input.sock (its worker makes it at the agent's start: a start under way is
//!       waited for, bounded) ─► one request line ─► one answer line: taken, refused, or not
//! ```
//!
//! Common pitfalls:
//! * A run that finished, took no input, or whose agent cannot be interrupted is refused as
//!   input (exit 2); a message the agent did not take (it ended first) is a fault (exit 1).
//! * The socket is removed when the agent ends: a connect that finds none looks at the
//!   attempt again, which has ended or is about to.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::Found;
use crate::adapter::adapter_for;
use crate::app::Error;
use crate::sandbox::relay::SocketPath;
use crate::spec::{AgentKind, InputAnswer, InputFrom, InputRequest, Stdin};
use crate::supervisor::{AttemptState, observe};

/// How long `send` waits for an attempt's agent to start (its worker makes the socket then).
const START_WAIT: Duration = Duration::from_secs(30);

/// What the agent took.
///
/// ```json
/// {"run_id": "review", "attempt": 1, "seq": 2, "taken": true}
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Sent {
    pub run_id: String,
    pub attempt: u32,
    /// The message's number in the attempt (its `subpane.input` event's `seq`).
    pub seq: u64,
    pub taken: bool,
}

/// Gives the running agent of `found` a message (`text`), or interrupts its turn; answers
/// once the agent took it.
pub fn send(
    found: &Found,
    from: InputFrom,
    text: Option<String>,
    interrupt: bool,
) -> Result<Sent, Error> {
    send_within(found, from, text, interrupt, None)
}

/// [`send`], answering after `wait` at the latest: then `taken` is false, and the message
/// still reaches the agent (the worker keeps it; only this answer is given up).
pub fn send_within(
    found: &Found,
    from: InputFrom,
    text: Option<String>,
    interrupt: bool,
    wait: Option<Duration>,
) -> Result<Sent, Error> {
    let spec = &found.spec;
    let (id, n) = (spec.run_id.as_str(), spec.attempt);
    let command = spec.agent == AgentKind::Command;
    let refuse_finished = |status: &str| {
        Error::invalid(if command {
            format!("run `{id}` has finished ({status}): nothing can be sent to it")
        } else {
            format!(
                "run `{id}` has finished ({status}): nothing can be sent to it; continue its session with a new attempt ({{@retry:{id}}} with {{resume}})"
            )
        })
    };
    if let AttemptState::Finished(env) = observe(&found.paths, spec)? {
        return Err(refuse_finished(env.status.as_str()));
    }
    if spec.stdin != Stdin::Input {
        let why = match spec.agent {
            AgentKind::Command => {
                "a command takes input only when started with {stdin} pipe".to_owned()
            }
            kind => match adapter_for(kind).no_input() {
                Some(why) => format!("{} cannot take input: {why}", kind.as_str()),
                None => "it was started with {stdin} null".to_owned(),
            },
        };
        return Err(Error::invalid(format!(
            "run `{id}` (attempt {n}) takes no input: {why}"
        )));
    }
    // Waiting to start (`retry --at-reset`, `--after`): its agent, and its input, come then.
    if let Some(at) = spec.start_at.as_ref().filter(|a| {
        a.instant()
            .is_some_and(|t| t > std::time::SystemTime::now())
    }) {
        return Err(Error::invalid(format!(
            "run `{id}` (attempt {n}) waits until {} to start ({}): its agent takes messages once it runs",
            at.at, at.why
        )));
    }
    let path = found.paths.input_socket();
    let deadline = Instant::now() + START_WAIT;
    let mut stream = loop {
        let at = SocketPath::new(&path)
            .map_err(|e| Error::NotSent(format!("cannot reach run `{id}`: {e}")))?;
        match UnixStream::connect(at.usable()) {
            Ok(s) => break s,
            Err(e) => {
                match observe(&found.paths, spec)? {
                    AttemptState::Finished(env) => {
                        return Err(refuse_finished(env.status.as_str()));
                    }
                    // The agent starts, or its input just ended (the envelope follows).
                    _ if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    _ => {
                        return Err(Error::NotSent(format!(
                            "run `{id}` (attempt {n}) is not taking input: its worker's socket {} cannot be reached ({e})",
                            path.display()
                        )));
                    }
                }
            }
        }
    };
    let req = InputRequest {
        from,
        text,
        interrupt,
    };
    let mut line = serde_json::to_vec(&req).expect("a request serializes");
    line.push(b'\n');
    let lost = |e: std::io::Error| {
        Error::NotSent(format!(
            "the worker of run `{id}` did not answer ({e}); the message may not have reached the agent"
        ))
    };
    stream.write_all(&line).map_err(lost)?;
    // The worker's first answer comes at once (it never waits for the agent to give it).
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(lost)?;
    let mut lines = BufReader::new(&stream);
    let read = |lines: &mut BufReader<&UnixStream>| -> Result<Option<InputAnswer>, Error> {
        let mut line = String::new();
        match lines.read_line(&mut line) {
            Ok(0) => Err(Error::NotSent(format!(
                "the worker of run `{id}` hung up without an answer (the attempt ended); the message was not taken"
            ))),
            Ok(_) => serde_json::from_str(&line).map(Some).map_err(|e| {
                Error::NotSent(format!(
                    "the worker of run `{id}` answered what subpane cannot read ({e})"
                ))
            }),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(lost(e)),
        }
    };
    // The first line: given to the agent (its number), or refused; then whether it took it.
    let first = read(&mut lines)?.ok_or_else(|| {
        Error::NotSent(format!("the worker of run `{id}` did not answer in time"))
    })?;
    let seq = first.seq.unwrap_or(0);
    let a = if first.queued {
        stream.set_read_timeout(wait).map_err(lost)?;
        match read(&mut lines)? {
            Some(a) => a,
            None => {
                return Ok(Sent {
                    run_id: id.to_owned(),
                    attempt: n,
                    seq,
                    taken: false,
                });
            }
        }
    } else {
        first
    };
    match (a.taken, a.error, a.refused) {
        (true, _, _) => Ok(Sent {
            run_id: id.to_owned(),
            attempt: n,
            seq: a.seq.unwrap_or(seq),
            taken: true,
        }),
        (false, Some(e), true) => Err(Error::invalid(format!("run `{id}`: {e}"))),
        (false, e, _) => Err(Error::NotSent(format!(
            "run `{id}`: {}",
            e.unwrap_or_else(|| "the message was not taken".into())
        ))),
    }
}
