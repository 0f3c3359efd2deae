//! The envelope's `git`: what came back of the branch a sandboxed program could move, when its
//! workspace was the top of a repository (see [`crate::git::carry`]).
//!
//! ```text
//!  the program's tip N, the branch's O ─► carried   (N a descendant of O, no new submodule)
//!                                      ├► unchanged (no tip of its own, or N == O)
//!                                      ├► refused   (reason, why; commits kept in a bundle)
//!                                      └► failed    (git failed; output.errors says how)
//! ```
//!
//! Common pitfalls:
//! * `from` is the branch when the attempt ended, not when it started: a user who committed
//!   meanwhile is the reason a tip that was a fast-forward at the start is refused.
//! * `commits` counts the tip's commits the branch lacks whether they came back or not:
//!   `result` says which.
//! * The program chooses how many gitlinks it commits, and their paths: `submodules` is
//!   bounded ([`bounded_paths`]), as `output.errors` is, or an envelope (and an MCP answer)
//!   could be made as large as it likes.

use serde::{Deserialize, Serialize};

/// What came back of the program's branch.
///
/// ```json
/// {"branch": "main", "result": "refused", "from": "3f2a1c9d…", "to": "8b7e6d5c…",
///  "commits": 1, "behind": 1, "reason": "not_fast_forward",
///  "why": "the program's tip 8b7e6d5c4b3a is not a descendant of main (…)",
///  "submodules": [], "kept": "git-refused.bundle"}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitCarry {
    /// The branch (`null`: HEAD was detached, so nothing comes back but the work tree).
    pub branch: Option<String>,
    pub result: CarryResult,
    /// The branch in the repository when the attempt ended, before anything came back
    /// (`null`: there was no such branch).
    pub from: Option<String>,
    /// Where the program left the branch (`null`: it left no tip of its own, or deleted it).
    pub to: Option<String>,
    /// Commits of `to` that `from` lacks: carried back, or kept (`null`: not known).
    pub commits: Option<u64>,
    /// Commits of `from` that `to` lacks (a fast-forward has none).
    pub behind: Option<u64>,
    pub reason: Option<RefusalReason>,
    /// Why nothing came back, in a sentence (refused, failed or detached).
    pub why: Option<String>,
    /// Refused gitlinks: paths of the carried commits with a submodule the branch lacks (at
    /// most [`MAX_SUBMODULES`], each at most 300 bytes: [`bounded_paths`]).
    pub submodules: Vec<String>,
    /// The refused commits as a git bundle, relative to the attempt dir.
    pub kept: Option<String>,
}

/// The most refused gitlinks an envelope names (a program chooses how many it commits).
pub const MAX_SUBMODULES: usize = 20;

/// `paths` as the envelope keeps them: the first [`MAX_SUBMODULES`], each cut at 300 bytes.
pub fn bounded_paths(paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .take(MAX_SUBMODULES)
        .map(|p| {
            let mut p = p.clone();
            crate::term::cut(&mut p, 300);
            p
        })
        .collect()
}

/// What became of the branch.
///
/// ```json
/// "carried"
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CarryResult {
    /// Fast-forwarded to the program's tip.
    Carried,
    #[default]
    Unchanged,
    /// Left where it was; `reason` says why.
    Refused,
    /// git failed on the way (`output.errors` has its words); look at the branch.
    Failed,
}

/// Why the program's tip did not come back.
///
/// ```json
/// "not_fast_forward"
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// The tip is not a descendant of the branch: taking it would drop the branch's commits.
    NotFastForward,
    /// The commits bring a gitlink at a path where the branch has no submodule.
    Submodule,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refused_paths_kept_are_bounded() {
        let many: Vec<String> = (0..30).map(|i| format!("{i}{}", "é".repeat(400))).collect();
        let kept = bounded_paths(&many);
        assert_eq!(kept.len(), MAX_SUBMODULES);
        assert!(kept.iter().all(|p| p.len() <= 304 && p.ends_with('…')));
        assert_eq!(bounded_paths(&["lib".into()]), ["lib"]);
    }
}
