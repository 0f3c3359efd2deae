//! Durations on the command line: `500ms`, `30s`, `5m`, `2h` (also `1d`, `1h30m`).

use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid duration `{input}` for {flag}: {why}; use a number with a unit, like 500ms, 30s, 5m or 2h"
)]
pub struct DurationError {
    pub flag: String,
    pub input: String,
    pub why: String,
}

/// Parses a duration given to `flag`. A bare number is refused: the unit is never guessed.
pub fn parse_duration(flag: &str, input: &str) -> Result<Duration, DurationError> {
    let err = |why: String| DurationError {
        flag: flag.to_owned(),
        input: input.to_owned(),
        why,
    };
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err(err("it is empty".into()));
    }
    humantime::parse_duration(trimmed).map_err(|e| err(e.to_string()))
}

/// Like [`parse_duration`] but refuses zero (a zero timeout would end every attempt at once).
pub fn parse_positive_duration(flag: &str, input: &str) -> Result<Duration, DurationError> {
    let d = parse_duration(flag, input)?;
    if d.is_zero() {
        return Err(DurationError {
            flag: flag.to_owned(),
            input: input.to_owned(),
            why: "it must be greater than zero".into(),
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
    fn refuses_malformed() {
        for bad in ["", "5", "abc", "5x", "-1s", "1.5.2s"] {
            let e = parse_duration("--timeout", bad).unwrap_err();
            assert!(e.to_string().contains("--timeout"), "{e}");
        }
        assert!(parse_positive_duration("--timeout", "0s").is_err());
    }
}
