//! The `artifacts` list of the envelope: every known file with its size and SHA-256.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::layout::{ARTIFACT_FILES, AttemptPaths, WORKTREE_ARTIFACT_FILES};
use crate::envelope::Artifact;

/// Hex SHA-256 and size of a file.
pub fn sha256_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        n_total += n as u64;
        h.update(&buf[..n]);
    }
    let digest = h.finalize();
    let hex = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok((n_total, hex))
}

/// Every artifact file that exists, in a fixed order.
pub fn collect_artifacts(paths: &AttemptPaths) -> Vec<Artifact> {
    collect_named(paths, ARTIFACT_FILES)
}

/// The worktree's status and diff, when they exist (`--worktree` attempts).
pub fn collect_worktree_artifacts(paths: &AttemptPaths) -> Vec<Artifact> {
    collect_named(paths, WORKTREE_ARTIFACT_FILES)
}

fn collect_named(paths: &AttemptPaths, files: &[(&str, &str)]) -> Vec<Artifact> {
    files
        .iter()
        .filter_map(|(kind, name)| {
            let p = paths.dir().join(name);
            let (bytes, sha256) = sha256_file(&p).ok()?;
            Some(Artifact {
                kind: (*kind).to_owned(),
                path: (*name).to_owned(),
                bytes,
                sha256,
            })
        })
        .collect()
}
