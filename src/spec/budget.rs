//! An amount of money, for a budget (`--max-cost`).

use serde::{Deserialize, Serialize};

/// US dollars, as a JSON number (`0.5`). Finite when it comes from a plan (the planner
/// refuses anything else), so equality is total.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Usd(pub f64);

impl Eq for Usd {}

impl std::str::FromStr for Usd {
    type Err = String;
    /// `0.5` or `$0.5`.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let t = t.strip_prefix('$').unwrap_or(t);
        t.parse::<f64>()
            .map(Usd)
            .map_err(|_| format!("`{s}` is not an amount in US dollars, e.g. 0.50"))
    }
}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${}", self.0)
    }
}
