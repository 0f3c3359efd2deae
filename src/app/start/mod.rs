//! Starting attempts: a request ([`request`], its fields declared once in [`field`], refusals
//! as [`invalid`]), the one planner ([`plan`]), the start of attempt 1 ([`launch`], [`run`],
//! [`start_many`]) or *n+1* ([`retry`]), and what an attempt starts with ([`seed`],
//! [`overlay`], [`worktree`]).

pub mod field;
pub mod invalid;
pub(super) mod launch;
pub(super) mod overlay;
pub(super) mod plan;
pub(super) mod request;
pub(super) mod retry;
pub(super) mod run;
pub(super) mod seed;
pub(super) mod start_many;
pub mod worktree;
