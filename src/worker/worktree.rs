//! The end of a `--worktree` attempt: record what the program changed, then remove or keep
//! the worktree.
//!
//! ```text
//!  outcome decided ─► worktree.status.txt (git status --porcelain=v1 --untracked-files=all)
//!                 ─► worktree.diff.patch (everything since base, untracked files included, binary)
//!                 ─► completed: git worktree remove; the branch deleted unless it has commits
//!                    failed / cancelled: kept for debugging (its path in the envelope)
//!                 ─► facts.worktree ─► worker.json, result.json
//! ```
//!
//! Runs only for attempts that have a worktree: an attempt without one does nothing new at
//! its end.
//!
//! Common pitfalls:
//! * The program has ended but was untrusted: git is given every location from the spec,
//!   never the worktree's `.git` file (see [`crate::git`]).
//! * Both files are written before the worktree may go: once removed, nothing is left to
//!   record. A record that fails keeps the worktree, so nothing is lost.
//! * A failure here is an error in the envelope, never a different outcome: the program's
//!   result stands.

use super::run::Worker;
use crate::envelope::{Output, Status, WorktreeInfo};
use crate::git;

impl Worker {
    /// Records the worktree, and removes it if the attempt `status` is completed. Fills
    /// `facts.worktree`; what went wrong goes to `output.errors`.
    pub(crate) fn end_worktree(&mut self, status: Status, output: &mut Output) {
        let Some(wt) = self.spec.worktree.clone() else {
            return;
        };
        if let Some(ms) = wt.git_time_limit_ms {
            git::set_time_limit(std::time::Duration::from_millis(ms));
        }
        let mut recorded = true;
        if let Err(e) = git::worktree::write_status(&wt, &self.paths.worktree_status()) {
            output.push_error(format!("worktree: cannot store its status: {e}"));
            recorded = false;
        }
        let diff = git::worktree::write_diff(&wt, self.paths.dir(), &self.paths.worktree_diff());
        if let Err(e) = diff {
            output.push_error(format!("worktree: cannot store its diff: {e}"));
            recorded = false;
        }
        let (kept, branch_kept) = if status == Status::Completed && recorded {
            let disposed = git::worktree::Lock::for_worktree(&wt.path)
                .and_then(|_lock| git::worktree::dispose(&wt));
            match disposed {
                Ok(branch_kept) => (false, branch_kept),
                Err(e) => {
                    output.push_error(format!(
                        "worktree: cannot remove {}: {e}; `subpane gc` tries again",
                        wt.path.display()
                    ));
                    (wt.path.exists(), branch_exists(&wt))
                }
            }
        } else {
            (true, branch_exists(&wt))
        };
        self.facts.worktree = Some(WorktreeInfo {
            path: wt.path.display().to_string(),
            branch: wt.branch.clone(),
            base: wt.base.clone(),
            kept,
            branch_kept,
        });
    }
}

/// Whether the worktree's branch is still there (the program may have deleted or renamed it).
fn branch_exists(wt: &crate::spec::WorktreeSpec) -> bool {
    git::branch_tip(&wt.common_dir, &wt.branch).is_ok_and(|t| t.is_some())
}
