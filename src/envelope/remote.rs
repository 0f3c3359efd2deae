//! An envelope that came from another host: trusted only once it validates against
//! `schema/result.v1.json` (the schema this build documents) and names the run it was asked
//! for.
//!
//! ```text
//!  bytes ─► JSON ─► schema/result.v1.json (compiled once) ─► Envelope ─► run_id, attempt match
//!    └─ any step fails ─► Untrusted(why): the caller records that, never the bytes' outcome
//! ```
//!
//! The host runs the same binary, so its envelope should always validate; one that does not
//! was altered, cut off or made by something else, and its `status` means nothing.

use std::sync::OnceLock;

use super::Envelope;

/// Why a remote envelope is not trusted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Untrusted(pub String);

fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schema/result.v1.json"))
                .expect("the schema is JSON");
        jsonschema::validator_for(&schema).expect("the schema compiles")
    })
}

/// Compiles the schema now (it is compiled once per process, on first use): for
/// `__bench-check`, which times this and then [`from_remote`].
pub fn compile_schema() {
    validator();
}

/// The envelope in `bytes` if it is a valid `subpane.result/v1` document for attempt
/// `attempt` of run `run_id`.
pub fn from_remote(bytes: &[u8], run_id: &str, attempt: u32) -> Result<Envelope, Untrusted> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| Untrusted(format!("it is not JSON ({e})")))?;
    let errors: Vec<String> = validator()
        .iter_errors(&value)
        .take(3)
        .map(|e| format!("{} at `{}`", e, e.instance_path()))
        .collect();
    if !errors.is_empty() {
        let said = crate::term::sanitize(errors.join("; ").as_bytes(), 400);
        return Err(Untrusted(format!(
            "it does not validate against subpane.result/v1: {said}"
        )));
    }
    let env: Envelope = serde_json::from_value(value)
        .map_err(|e| Untrusted(format!("it cannot be read as an envelope ({e})")))?;
    if env.run_id != run_id || env.attempt != attempt {
        let said = crate::term::sanitize(env.run_id.as_bytes(), 80);
        return Err(Untrusted(format!(
            "it is the envelope of run `{said}` attempt {}, not of run `{run_id}` attempt {attempt}",
            env.attempt
        )));
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> serde_json::Value {
        serde_json::json!({
            "schema": "subpane.result/v1", "run_id": "r1", "attempt": 1, "agent": "command",
            "argv": ["true"], "cwd": "/w", "labels": {}, "correlation_id": null,
            "status": "completed", "failure_kind": null, "exit_code": 0, "signal": null,
            "signals_sent": [], "started_at": null, "finished_at": null, "duration_ms": 5,
            "terminal_event": null, "lingered": false,
            "output": {"final_text": null, "session_id": null, "model": null, "usage": null,
                       "cost_usd": null, "turns": null, "tool_calls": null, "errors": [],
                       "context_length_exceeded": false},
            "filter": {"kept_lines": 0, "dropped_lines": 0, "dropped_bytes": 0,
                       "oversized_lines": 0, "plain_lines": 0, "lost_lines": 0,
                       "lost_stderr_bytes": 0},
            "cleanup": {"output_held_open": false, "killed_descendants": 0},
            "tmux": {"socket": null, "session": null, "pane_id": null},
            "sandbox": {"enabled": false}, "artifacts": []
        })
    }

    #[test]
    fn a_valid_envelope_of_the_run_asked_for_is_trusted() {
        let bytes = serde_json::to_vec(&valid()).unwrap();
        let env = from_remote(&bytes, "r1", 1).unwrap();
        assert_eq!(env.run_id, "r1");
        let mut with_host = valid();
        with_host["host"] = serde_json::json!({"name": "h", "kind": "ssh", "job_id": null});
        let env = from_remote(&serde_json::to_vec(&with_host).unwrap(), "r1", 1).unwrap();
        assert_eq!(env.host.unwrap().name, "h");
    }

    #[test]
    fn what_is_not_a_valid_envelope_of_that_run_is_untrusted() {
        let mut bad_status = valid();
        bad_status["status"] = "done".into();
        let mut extra = valid();
        extra["trust_me"] = true.into();
        let cases = [
            (b"{nope".to_vec(), "not JSON"),
            (b"[]".to_vec(), "does not validate"),
            (
                serde_json::to_vec(&bad_status).unwrap(),
                "does not validate",
            ),
            (serde_json::to_vec(&extra).unwrap(), "does not validate"),
        ];
        for (bytes, says) in cases {
            let e = from_remote(&bytes, "r1", 1).unwrap_err();
            assert!(e.0.contains(says), "{e}");
        }
        let bytes = serde_json::to_vec(&valid()).unwrap();
        let e = from_remote(&bytes, "r2", 1).unwrap_err();
        assert!(e.0.contains("not of run `r2`"), "{e}");
        assert!(from_remote(&bytes, "r1", 2).is_err());
    }
}
