//! The documented exit codes of `run`, `wait` and `status`.

/// The attempt completed.
pub const COMPLETED: i32 = 0;
/// The agent or command failed, its budget stopped it, or the attempt was lost.
pub const FAILED: i32 = 1;
/// Invalid input: nothing was started.
pub const INVALID: i32 = 2;
/// `wait --timeout` or `status` found the attempt still running.
pub const STILL_RUNNING: i32 = 3;
/// The agent hit its account's usage limit: try again later (EX_TEMPFAIL).
pub const USAGE_LIMIT: i32 = 75;
/// The attempt timed out (`timeout` or `idle_timeout`).
pub const TIMED_OUT: i32 = 124;
/// The attempt was cancelled.
pub const CANCELLED: i32 = 130;

/// The worst of several exit codes: failed (1) > usage limit (75) > timed out (124) >
/// cancelled (130) > still running (3) > completed (0). Codes outside this list rank just
/// above completed.
pub fn worst(codes: impl IntoIterator<Item = i32>) -> i32 {
    let rank = |c: i32| match c {
        FAILED => 7,
        USAGE_LIMIT => 6,
        TIMED_OUT => 4,
        CANCELLED => 3,
        STILL_RUNNING => 2,
        COMPLETED => 0,
        _ => 1,
    };
    codes
        .into_iter()
        .max_by_key(|c| rank(*c))
        .unwrap_or(COMPLETED)
}
