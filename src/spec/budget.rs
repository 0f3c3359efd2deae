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

/// A model's price in US dollars per million tokens (`--price IN,OUT[,CACHE_READ[,CACHE_WRITE]]`),
/// for a CLI that reports tokens but no cost: its cost is computed from its usage.
///
/// ```json
/// {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

impl Eq for Price {}

impl std::str::FromStr for Price {
    type Err = String;
    /// `3,15`, `3,15,0.3` or `3,15,0.3,3.75`: each finite and not negative.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{s}` is not a price: give US dollars per million tokens as IN,OUT[,CACHE_READ[,CACHE_WRITE]], e.g. 3,15"
            )
        };
        let parts: Vec<f64> = s
            .split(',')
            .map(|p| p.trim().trim_start_matches('$').parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        if !(2..=4).contains(&parts.len()) || parts.iter().any(|p| !p.is_finite() || *p < 0.0) {
            return Err(bad());
        }
        let at = |i: usize| parts.get(i).copied().unwrap_or(0.0);
        Ok(Price {
            input: at(0),
            output: at(1),
            cache_read: at(2),
            cache_write: at(3),
        })
    }
}

impl Price {
    /// What `tokens` (input, output, cache read, cache write) cost at this price.
    pub fn cost(&self, tokens: [Option<u64>; 4]) -> Option<f64> {
        if tokens.iter().all(Option::is_none) {
            return None;
        }
        let per = [self.input, self.output, self.cache_read, self.cache_write];
        let dollars = tokens
            .iter()
            .zip(per)
            .map(|(t, p)| t.unwrap_or(0) as f64 * p / 1e6)
            .sum();
        Some(dollars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_is_read_and_costs_tokens() {
        let p: Price = "3,15".parse().unwrap();
        assert_eq!(
            p.cost([Some(1_000_000), Some(100_000), None, None]),
            Some(4.5)
        );
        let full: Price = "3, 15, 0.3, 3.75".parse().unwrap();
        assert_eq!(full.cache_write, 3.75);
        assert_eq!(p.cost([None; 4]), None);
        for bad in ["3", "a,b", "1,2,3,4,5", "-1,2", "inf,1"] {
            assert!(bad.parse::<Price>().is_err(), "{bad}");
        }
    }
}
