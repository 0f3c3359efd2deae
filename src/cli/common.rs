//! Shared pieces of the verbs: printing to stdout.

use std::io::Write;

/// Writes stdout text; a closed pipe (e.g. `| head`) is not an error.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// One JSON document on stdout. On a terminal, C1 controls inside strings are escaped too
/// (see [`crate::term::json_for_terminal`]); piped, the text is serde_json's.
pub fn print_json<T: serde::Serialize>(value: &T) {
    use std::io::IsTerminal;
    let mut s = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
    s.push('\n');
    if std::io::stdout().is_terminal() {
        print(&crate::term::json_for_terminal(&s));
    } else {
        print(&s);
    }
}

/// Whether colour may be used on stdout.
pub fn color_stdout() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal()
}
