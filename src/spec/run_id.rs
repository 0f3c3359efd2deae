//! Run ids: `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`, never `.` or `..`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A validated run id. It is safe to use as one path component.
///
/// ```json
/// "fix-login-bug.2"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

/// Why a run id was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RunIdError {
    #[error(
        "run id is empty; give one like `build-42` or leave the run id out to get one generated"
    )]
    Empty,
    #[error("run id is {0} characters long; the limit is 128")]
    TooLong(usize),
    #[error("run id `{0}` is not allowed: `.` and `..` name directories")]
    Dots(String),
    #[error(
        "run id `{0}` is not allowed: use letters, digits, `.`, `_` and `-`, starting with a letter or digit"
    )]
    BadChars(String),
}

impl RunId {
    pub fn parse(s: &str) -> Result<Self, RunIdError> {
        if s.is_empty() {
            return Err(RunIdError::Empty);
        }
        if s.len() > 128 {
            return Err(RunIdError::TooLong(s.len()));
        }
        if s == "." || s == ".." {
            return Err(RunIdError::Dots(s.to_owned()));
        }
        let mut bytes = s.bytes();
        let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric());
        let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !first_ok || !rest_ok {
            return Err(RunIdError::BadChars(s.to_owned()));
        }
        Ok(Self(s.to_owned()))
    }

    /// The id generated at `when` with the random bytes `rnd`: UTC time to the second plus 6
    /// hex digits, so ids sort by start (`crate::fresh::run_id` hands in the time and bytes).
    pub fn at(when: std::time::SystemTime, rnd: [u8; 3]) -> Self {
        let now = humantime::format_rfc3339_seconds(when).to_string();
        let digits: String = now.chars().filter(|c| c.is_ascii_digit()).collect();
        let (date, time) = digits.split_at(8.min(digits.len()));
        let hex: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
        Self(format!("{date}-{time}-{hex}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = RunIdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_ids() {
        for ok in ["a", "A1", "build-42", "x.y_z-1", "0", &"a".repeat(128)] {
            assert!(RunId::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_bad_ids() {
        assert_eq!(RunId::parse(""), Err(RunIdError::Empty));
        assert_eq!(
            RunId::parse(&"a".repeat(129)),
            Err(RunIdError::TooLong(129))
        );
        assert!(matches!(RunId::parse("."), Err(RunIdError::Dots(_))));
        assert!(matches!(RunId::parse(".."), Err(RunIdError::Dots(_))));
        for bad in ["a/b", "../x", "-a", ".a", "_a", "a b", "a\nb", "é", "a:b"] {
            assert!(
                matches!(RunId::parse(bad), Err(RunIdError::BadChars(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = crate::fresh::run_id();
        let b = crate::fresh::run_id();
        assert!(RunId::parse(a.as_str()).is_ok());
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), "20261130-033943-a1b2c3".len());
    }
}
