//! Durations on the command line: `500ms`, `30s`, `5m`, `2h` (also `1d`, `1h30m`).

use std::time::Duration;

/// A value that is not a duration. Its message is the one every edge gives: what was wrong
/// with the value ([`DurationError::problem`]) and what is accepted ([`DurationError::hint`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{flag} {}; {}", self.problem(), self.hint())]
pub struct DurationError {
    /// What was given the value: a flag, a field, a variable of the environment.
    pub flag: String,
    pub input: String,
    pub why: Why,
}

/// What is wrong with a value that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Empty,
    /// A number without a unit (`5`): the unit is never guessed.
    NoUnit,
    /// A unit that is not one (`5x`).
    UnknownUnit(String),
    Negative,
    TooLarge,
    Zero,
    /// Anything else (`soon`).
    NotADuration,
}

/// What is accepted, said the same way for every value but a number without a unit.
const ACCEPTED: &str = "give a number with a unit, like 30s, 5m or 1h30m";

impl DurationError {
    /// What was wrong with the value, to follow the name of what was given it.
    pub fn problem(&self) -> String {
        let v = &self.input;
        match &self.why {
            Why::Empty => "is empty".to_owned(),
            Why::NoUnit => format!("`{v}` needs a unit"),
            Why::UnknownUnit(u) => {
                format!("`{v}` is not a duration: `{u}` is not a unit (ms, s, m, h, d)")
            }
            Why::Negative => format!("`{v}` is not a duration: it cannot be negative"),
            Why::TooLarge => format!("`{v}` is too large a duration"),
            Why::Zero => format!("`{v}` must be greater than zero"),
            Why::NotADuration => format!("`{v}` is not a duration"),
        }
    }

    /// What is accepted instead.
    pub fn hint(&self) -> String {
        match &self.why {
            Why::NoUnit => {
                let n = self.input.trim();
                format!("give {n}s, {n}m or {n}h (or 500ms)")
            }
            _ => ACCEPTED.to_owned(),
        }
    }
}

/// Parses a duration given to `flag`. A bare number is refused: the unit is never guessed.
pub fn parse_duration(flag: &str, input: &str) -> Result<Duration, DurationError> {
    let err = |why: Why| DurationError {
        flag: flag.to_owned(),
        input: input.to_owned(),
        why,
    };
    let trimmed = input.trim();
    humantime::parse_duration(trimmed).map_err(|e| {
        use humantime::DurationError as H;
        err(match e {
            H::Empty => Why::Empty,
            _ if trimmed.starts_with('-') => Why::Negative,
            H::UnknownUnit { unit, .. } if unit.is_empty() => Why::NoUnit,
            H::UnknownUnit { unit, .. } => Why::UnknownUnit(unit),
            H::NumberOverflow => Why::TooLarge,
            _ => Why::NotADuration,
        })
    })
}

/// Like [`parse_duration`] but refuses zero (a zero timeout would end every attempt at once).
pub fn parse_positive_duration(flag: &str, input: &str) -> Result<Duration, DurationError> {
    let d = parse_duration(flag, input)?;
    if d.is_zero() {
        return Err(DurationError {
            flag: flag.to_owned(),
            input: input.to_owned(),
            why: Why::Zero,
        });
    }
    Ok(d)
}

/// A duration as a user writes it (`5s`, `1m 30s`), the form [`parse_duration`] reads back:
/// how a default is shown in help and schemas.
pub fn duration_text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Milliseconds, saturating (durations here are far below the limit).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_documented_forms() {
        assert_eq!(
            parse_duration("--timeout", "500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            parse_duration("--timeout", "30s").unwrap(),
            Duration::from_secs(30)
        );
        assert_eq!(
            parse_duration("--timeout", "5m").unwrap(),
            Duration::from_secs(300)
        );
        assert_eq!(
            parse_duration("--timeout", "2h").unwrap(),
            Duration::from_secs(7200)
        );
        assert_eq!(parse_duration("--grace", "0s").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_duration("--timeout", "1h30m").unwrap(),
            Duration::from_secs(5400),
            "the form the hint shows"
        );
    }

    #[test]
    fn a_duration_as_text_reads_back() {
        for d in [
            Duration::from_secs(5),
            Duration::from_millis(1500),
            Duration::ZERO,
        ] {
            assert_eq!(parse_duration("--x", &duration_text(d)).unwrap(), d);
        }
        assert_eq!(duration_text(Duration::from_secs(3)), "3s");
    }

    #[test]
    fn each_refusal_says_what_was_wrong_and_what_is_accepted_once() {
        let msg = |v: &str| {
            parse_positive_duration("--timeout", v)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            msg("5"),
            "--timeout `5` needs a unit; give 5s, 5m or 5h (or 500ms)"
        );
        assert_eq!(
            msg("soon"),
            "--timeout `soon` is not a duration; give a number with a unit, like 30s, 5m or 1h30m"
        );
        assert_eq!(
            msg("5x"),
            "--timeout `5x` is not a duration: `x` is not a unit (ms, s, m, h, d); give a number with a unit, like 30s, 5m or 1h30m"
        );
        assert!(msg("-1s").contains("cannot be negative"), "{}", msg("-1s"));
        assert!(msg("0s").contains("greater than zero"));
        assert!(msg("").starts_with("--timeout is empty; give"));
        for m in [
            msg("5"),
            msg("soon"),
            msg("5x"),
            msg("-1s"),
            msg("99999999999999999999h"),
        ] {
            assert!(!m.contains(" at 0") && !m.contains("sec or"), "{m}");
            assert_eq!(m.matches("; ").count(), 1, "one hint: {m}");
        }
    }

    #[test]
    fn refuses_malformed() {
        for bad in ["", "5", "abc", "5x", "-1s", "1.5.2s"] {
            let e = parse_duration("--timeout", bad).unwrap_err();
            assert!(e.to_string().contains("--timeout"), "{e}");
        }
        assert!(parse_positive_duration("--timeout", "0s").is_err());
    }
}
