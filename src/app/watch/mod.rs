//! Watching attempts: the one wait loop over the supervisor's waiter ([`wait_loop`]), waits
//! and their answers ([`wait`]), live progress ([`progress`]), logs made readable
//! ([`pretty`]), the ends of a program's output ([`output_end`]), and `top`'s view of every
//! run ([`board`]).

pub mod board;
pub(super) mod output_end;
pub(super) mod pretty;
pub(super) mod progress;
pub(super) mod wait;
pub(super) mod wait_loop;
