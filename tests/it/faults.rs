//! (tests to come)
