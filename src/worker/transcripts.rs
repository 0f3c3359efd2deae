//! The agent's session transcripts that subpane keeps (pi's sessions of the run, a sandboxed
//! agent's state directory): what the agent saw, its key among it when a tool echoed it.
//! Masked when the attempt ends, as the logs are as they stream.
//!
//! ```text
//!  Adapter::transcript_dirs(argv, sandbox.agent_state.dir)
//!    └ ProgramTree (no link followed, bounded) ─► each *.jsonl ≤ 64 MiB, depth ≤ 4
//!        any value? ─► each line masked (a JSON line stays JSON) ─► replace_file
//! ```
//!
//! Common pitfalls:
//! * The directories are the program's to write in a sandbox: every name is reached through
//!   [`ProgramTree`] (a link, a FIFO, a device is skipped, never opened), and a file is
//!   replaced by rename, never written through.
//! * Only transcripts (`*.jsonl`): the agent's settings and logins there are its own, and a
//!   masked login would break the next attempt.

use std::path::Path;

use crate::secrets::Masker;
use crate::store::{Kind, ProgramTree};

/// The biggest transcript masked (a bigger one is left, and said).
const FILE_LIMIT: u64 = 64 << 20;
/// Names read per directory, and directories deep.
const ENTRIES: usize = 10_000;
const DEPTH: usize = 4;

/// Masks every transcript below `dir`; what could not be masked, in words.
pub(crate) fn mask_below(dir: &Path, m: &Masker) -> Vec<String> {
    let mut failed = Vec::new();
    match ProgramTree::open(dir) {
        Ok(tree) => walk(&tree, m, 0, &mut failed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => failed.push(format!("{}: {e}", dir.display())),
    }
    failed
}

fn walk(tree: &ProgramTree, m: &Masker, depth: usize, failed: &mut Vec<String>) {
    let Ok((entries, _)) = tree.entries(ENTRIES) else {
        return;
    };
    for e in entries {
        let name = Path::new(&e.name);
        match e.kind {
            Kind::Dir if depth < DEPTH => {
                if let Ok(sub) = tree.subtree(name) {
                    walk(&sub, m, depth + 1, failed);
                }
            }
            Kind::File if name.extension().is_some_and(|x| x == "jsonl") => {
                if let Err(why) = mask_file(tree, name, m) {
                    failed.push(format!("{}: {why}", tree.path().join(name).display()));
                }
            }
            _ => {}
        }
    }
}

fn mask_file(tree: &ProgramTree, name: &Path, m: &Masker) -> Result<(), String> {
    let Some(bytes) = tree.read(name, FILE_LIMIT).map_err(|e| e.to_string())? else {
        return Ok(());
    };
    if !m.any(&bytes) {
        return Ok(());
    }
    let mut out = Vec::with_capacity(bytes.len());
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    for line in body.split(|b| *b == b'\n') {
        match m.line(line) {
            Some(masked) => out.extend_from_slice(&masked),
            None => out.extend_from_slice(line),
        }
        out.push(b'\n');
    }
    if !bytes.ends_with(b"\n") {
        out.pop();
    }
    tree.replace_file(name.as_os_str(), &out)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a sandboxed agent could leave where its transcripts go: a link to a file of the
    /// user's, a FIFO, a transcript deep down. The links are never followed, nothing hangs,
    /// and each transcript is masked.
    #[test]
    fn transcripts_are_masked_and_nothing_else_is_touched() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("sessions");
        std::fs::create_dir_all(root.join("p/q")).unwrap();
        let secret = "transcript-Secret-9Qz7";
        let line = format!("{{\"role\":\"tool\",\"text\":\"key {secret}\"}}\n");
        std::fs::write(root.join("a.jsonl"), &line).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o640);
        std::fs::set_permissions(root.join("a.jsonl"), mode).unwrap();
        std::fs::write(root.join("p/q/b.jsonl"), format!("{line}{line}")).unwrap();
        std::fs::write(root.join("settings.json"), &line).unwrap();
        let users = d.path().join("users.jsonl");
        std::fs::write(&users, &line).unwrap();
        std::os::unix::fs::symlink(&users, root.join("link.jsonl")).unwrap();
        std::os::unix::fs::symlink(d.path(), root.join("up")).unwrap();
        nix::unistd::mkfifo(&root.join("fifo.jsonl"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let m = Masker::new([secret.as_bytes()]);
        let failed = mask_below(&root, &m);
        assert!(failed.is_empty(), "{failed:?}");
        let masked = "{\"role\":\"tool\",\"text\":\"key ***\"}\n";
        assert_eq!(
            std::fs::read_to_string(root.join("a.jsonl")).unwrap(),
            masked
        );
        assert_eq!(
            std::fs::read_to_string(root.join("p/q/b.jsonl")).unwrap(),
            masked.repeat(2)
        );
        assert_eq!(
            std::fs::read_to_string(&users).unwrap(),
            line,
            "a link was followed"
        );
        assert!(
            std::fs::symlink_metadata(root.join("link.jsonl"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(root.join("settings.json")).unwrap(),
            line
        );
        assert!(mask_below(&d.path().join("none"), &m).is_empty());
        let kept = std::fs::metadata(root.join("a.jsonl"))
            .unwrap()
            .permissions();
        assert_eq!(
            kept.mode() & 0o777,
            0o640,
            "the replaced file keeps its mode"
        );
        // Replacing a name that is a link is refused, and the link's target is untouched.
        let tree = ProgramTree::open(&root).unwrap();
        let e = tree.replace_file("link.jsonl".as_ref(), b"x").unwrap_err();
        assert!(e.to_string().contains("link"), "{e}");
        assert_eq!(std::fs::read_to_string(&users).unwrap(), line);
    }
}
