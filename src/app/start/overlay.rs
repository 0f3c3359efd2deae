//! An agent CLI's settings per attempt (`Adapter::settings_defaults`: pi's provider retries
//! off), without touching the user's files: the attempt's state directory holds the merged
//! settings file, and the CLI is pointed at it.
//!
//! ```text
//!  unsandboxed: spec.agent_overlay { var, dir: attempts/<n>/agent, from: the user's }
//!     dir/<every entry of from but the settings file> ── link ──► the user's (a refreshed
//!                                                                  login reaches it)
//!     dir/settings.json = the user's, with the defaults under it (the user's keys win)
//!  sandboxed: the seeded copy of the settings file (seed.rs) gets the same merge
//! ```
//!
//! Common pitfalls:
//! * The user's settings win where they say something: a default fills only what is absent.
//! * A settings file that is not a JSON object is left as it is (linked), with a warning:
//!   the CLI reports it its own way, and the defaults do not hold.

use std::path::Path;

use serde_json::{Map, Value};

use crate::adapter::adapter_for;
use crate::spec::AttemptSpec;

/// Makes the unsandboxed attempt's state directory (see the module docs); warnings.
pub(in crate::app) fn make_overlay(spec: &AttemptSpec) -> Vec<String> {
    let mut warnings = Vec::new();
    let (Some(o), Some((file, defaults))) = (
        &spec.agent_overlay,
        adapter_for(spec.agent).settings_defaults(),
    ) else {
        return warnings;
    };
    use std::os::unix::fs::DirBuilderExt;
    if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&o.dir) {
        warnings.push(format!("cannot create {}: {e}", o.dir.display()));
        return warnings;
    }
    if let Ok(entries) = std::fs::read_dir(&o.from) {
        for e in entries.flatten() {
            let name = e.file_name();
            if name == file {
                continue;
            }
            if let Err(err) = std::os::unix::fs::symlink(e.path(), o.dir.join(&name)) {
                warnings.push(format!("cannot link {}: {err}", e.path().display()));
            }
        }
    }
    let user = o.from.join(file);
    if let Err(why) = write_merged(&user, &o.dir.join(file), defaults) {
        warnings.push(format!(
            "{}: {why}; the attempt's {} defaults do not hold",
            user.display(),
            spec.agent.as_str()
        ));
        let _ = std::os::unix::fs::symlink(&user, o.dir.join(file));
    }
    warnings
}

/// Writes `to`: the JSON object in `from` (none: `{}`) with `defaults` merged under it.
pub(in crate::app) fn write_merged(from: &Path, to: &Path, defaults: &str) -> Result<(), String> {
    let mut settings = match std::fs::read(from) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err("is not a JSON object".into()),
            Err(e) => return Err(format!("cannot be read as JSON ({e})")),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
        Err(e) => return Err(format!("cannot be read ({e})")),
    };
    let Ok(Value::Object(defaults)) = serde_json::from_str::<Value>(defaults) else {
        return Err("the adapter's defaults are not a JSON object".into());
    };
    fill(&mut settings, defaults);
    let text = serde_json::to_vec_pretty(&Value::Object(settings)).map_err(|e| e.to_string())?;
    // A sandboxed seed's copy is replaced whole (the CLI there may have made it read-only).
    let _ = std::fs::remove_file(to);
    crate::store::write_atomic(to, &text).map_err(|e| e.to_string())
}

/// `defaults` under `into`: each key `into` lacks is added; objects on both sides merge.
fn fill(into: &mut Map<String, Value>, defaults: Map<String, Value>) {
    for (k, v) in defaults {
        match (into.get_mut(&k), v) {
            (None, v) => {
                into.insert(k, v);
            }
            (Some(Value::Object(mine)), Value::Object(d)) => fill(mine, d),
            // The user's says something: it stands.
            (Some(_), _) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PI: &str = r#"{"retry": {"provider": {"maxRetries": 0}}}"#;

    fn merged(user: Option<&str>) -> Result<Value, String> {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("user.json");
        if let Some(u) = user {
            std::fs::write(&from, u).unwrap();
        }
        let to = d.path().join("merged.json");
        write_merged(&from, &to, PI)?;
        Ok(serde_json::from_slice(&std::fs::read(to).unwrap()).unwrap())
    }

    #[test]
    fn the_defaults_fill_what_the_user_left_out_and_nothing_else() {
        assert_eq!(
            merged(None).unwrap(),
            json!({"retry": {"provider": {"maxRetries": 0}}})
        );
        let user =
            r#"{"defaultModel": "m", "retry": {"enabled": true, "provider": {"timeoutMs": 5}}}"#;
        assert_eq!(
            merged(Some(user)).unwrap(),
            json!({"defaultModel": "m",
                   "retry": {"enabled": true, "provider": {"timeoutMs": 5, "maxRetries": 0}}})
        );
        // The user's own value stands.
        let own = r#"{"retry": {"provider": {"maxRetries": 3}}}"#;
        assert_eq!(
            merged(Some(own)).unwrap(),
            json!({"retry": {"provider": {"maxRetries": 3}}})
        );
        assert!(
            merged(Some("[1]"))
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            merged(Some("{oops"))
                .unwrap_err()
                .contains("cannot be read as JSON")
        );
    }
}
