//! Secrets: which of a program's variables hold one, and the one matcher that puts `***` in
//! place of their values (and of the values' encodings) wherever subpane writes.
//!
//! ```text
//!  planner (app::plan::environment): names only ─► spec.json env.secret
//!     --env K=V (not --env-plain), a caller's variable named like a secret, the agent's key
//!  worker: values from the one-shot environment file ─► Masker (mask.rs)
//!     stdout lines ─► mask ─► adapter ─► events.jsonl, stdout.log, pane, final text, progress
//!     stderr chunks ─► StreamMask (holds back a possible start of a value) ─► stderr.log, pane
//!     proxy: each network.jsonl line
//!     the end: the envelope's output, output.txt, the agent's transcripts subpane keeps
//! ```
//!
//! Common pitfalls:
//! * Values under [`MIN_LEN`] bytes are not masked (`***` in place of every `true` would
//!   garble the logs): the run warns on stderr, and the envelope's `secrets.too_short` names
//!   them.
//! * Masking is a guard against accidents, not against a program that wants to leak: another
//!   encoding, a part of a value, a value the program computes all pass (README, "Secrets").

mod mask;

pub use mask::{Masker, StreamMask};

/// The shortest value that is masked.
pub const MIN_LEN: usize = 6;

/// A value given but too short to mask (the run warns of it by name); an empty one is no
/// secret at all.
pub fn too_short(value: &[u8]) -> bool {
    !value.is_empty() && value.len() < MIN_LEN
}

/// What a value is replaced with.
pub const MASK: &[u8] = b"***";

/// The words a secret's variable name is made of (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
/// `DB_PASSWORD`, `NPM_AUTH_TOKEN`, `OPENAI_API_KEY`, `APIKEY`, …).
const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "TOKENS",
    "KEY",
    "KEYS",
    "APIKEY",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "PASS",
    "PWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "PRIVATE",
    "AUTH",
    "COOKIE",
    "DSN",
];

/// Names that hold a secret by a word above but do not: the shell's working directory and
/// the ssh agent's socket.
const NOT_SECRET: &[&str] = &["PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY"];

/// Whether a variable's name says it holds a secret: one of its `_`-separated words (any
/// case) is a word of [`SECRET_WORDS`]. `GITHUB_TOKEN` and `github_token` do, `KEYBOARD` and
/// `TOKENIZER_PATH` do not.
pub fn looks_secret(name: &str) -> bool {
    if NOT_SECRET.contains(&name) {
        return false;
    }
    name.split('_').any(|w| {
        SECRET_WORDS
            .iter()
            .any(|s| !w.is_empty() && s.eq_ignore_ascii_case(w))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_by_their_words() {
        for n in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "OPENAI_API_KEY",
            "MOCK_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "ANTHROPIC_AUTH_TOKEN",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "npm_config__auth",
            "APIKEY",
            "SENTRY_DSN",
        ] {
            assert!(looks_secret(n), "{n} looks secret");
        }
        for n in [
            "PATH",
            "HOME",
            "KEYBOARD",
            "TOKENIZER_PATH",
            "PWD",
            "SSH_AUTH_SOCK",
            "MONKEY",
            "LANG",
            "ANTHROPIC_BASE_URL",
        ] {
            assert!(!looks_secret(n), "{n} does not look secret");
        }
    }
}
