//! The documented exit codes of `run`, `wait` and `status`.

/// The attempt completed.
pub const COMPLETED: i32 = 0;
/// The agent or command failed, or the attempt was lost.
pub const FAILED: i32 = 1;
/// Invalid input: nothing was started.
pub const INVALID: i32 = 2;
/// `wait --timeout` or `status` found the attempt still running.
pub const STILL_RUNNING: i32 = 3;
/// The attempt timed out (`timeout` or `idle_timeout`).
pub const TIMED_OUT: i32 = 124;
/// The attempt was cancelled.
pub const CANCELLED: i32 = 130;
