//! Why a program could not be started, in words that point at the cause.
//!
//! The kernel answers `ENOENT` both for a program that is not there and for a script whose
//! interpreter (its `#!` line) is not there: the second reads as if the script itself were
//! missing. The script's first line tells them apart.

use std::io::Read;
use std::path::Path;

/// The spawn error of `program`: the missing interpreter named as such, else the OS's words.
pub(crate) fn why_not_started(program: &str, err: &std::io::Error) -> String {
    if err.kind() == std::io::ErrorKind::NotFound
        && let Some(interp) = missing_interpreter(Path::new(program))
    {
        return format!(
            "cannot start {program}: its interpreter {interp} (named on its first line, `#!{interp}`) does not exist"
        );
    }
    format!("cannot start {program}: {err}")
}

/// The interpreter a script's `#!` line names, when it does not exist.
fn missing_interpreter(script: &Path) -> Option<String> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|b| *b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    let interp = line.split_whitespace().next()?;
    (!Path::new(interp).exists()).then(|| interp.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interpreter_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s.sh");
        std::fs::write(&script, "#!/nonexistent/interp -x\necho hi\n").unwrap();
        let enoent = std::io::Error::from_raw_os_error(libc::ENOENT);
        let p = script.to_str().unwrap();
        assert_eq!(
            why_not_started(p, &enoent),
            format!(
                "cannot start {p}: its interpreter /nonexistent/interp (named on its first line, `#!/nonexistent/interp`) does not exist"
            )
        );
        // A script whose interpreter exists, and a program that is missing: the OS's words.
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert!(why_not_started(p, &enoent).ends_with("No such file or directory (os error 2)"));
        let gone = dir.path().join("gone");
        assert!(
            why_not_started(gone.to_str().unwrap(), &enoent).contains("No such file or directory")
        );
    }
}
