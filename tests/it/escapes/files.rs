//! Nothing outside changes, bytes or metadata: the host's tree is read-only in the sandbox's
//! mount namespace, with writable binds for the allowed paths only.

use std::os::unix::fs::MetadataExt;

use super::*;

#[test]
fn metadata_of_host_files_outside_the_writable_paths_does_not_change() {
    crate::harness::require_tool("python3", &["--version"], "python3");
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("escape-meta-");
    let victim = o.join("victim.txt");
    let dir = o.join("dir");
    std::fs::write(&victim, "v").unwrap();
    std::fs::create_dir(&dir).unwrap();
    let before = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode(), m.uid(), m.gid(), m.mtime(), m.atime())
    };
    let (v0, d0) = (before(&victim), before(&dir));
    let probe = r#"
import os, sys
for p in sys.argv[1:]:
    st = os.stat(p)
    for name, op in (
        ("chmod", lambda: os.chmod(p, 0o777)),
        ("chown", lambda: os.chown(p, st.st_uid, st.st_gid)),
        ("utime", lambda: os.utime(p, (0, 0))),
        ("setxattr", lambda: os.setxattr(p, "user.subpane", b"x")),
    ):
        try:
            op()
            print("CHANGED", name, p)
        except OSError as e:
            print("refused", name, e.errno)
"#;
    let script = format!(
        "python3 -c {} {} {}; python3 -c {} ws-file",
        shell_quote(probe),
        q(&victim),
        q(&dir),
        shell_quote(probe)
    );
    std::fs::write(env.work.join("ws-file"), "w").unwrap();
    let r = run_bash(&env, "meta", &["--sandbox"], &script);
    assert_eq!(r.code, 0, "{r:?}");
    let out = stdout_log(&env, "meta", 1);
    assert!(!out.contains("CHANGED refused"), "{out}");
    let outside_changes: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("CHANGED") && !l.ends_with("ws-file"))
        .collect();
    assert!(outside_changes.is_empty(), "{out}");
    assert_eq!(out.matches("refused").count(), 8, "{out}");
    // The workspace is the control: the same calls change its file.
    assert_eq!(out.matches("CHANGED").count(), 4, "{out}");
    assert_eq!((before(&victim), before(&dir)), (v0, d0));
    assert!(xattr_absent(&victim));
    env.assert_no_leftovers();
}

fn xattr_absent(p: &Path) -> bool {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut buf = [0u8; 16];
    // SAFETY: getxattr into a buffer of the size passed.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"user.subpane".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n < 0
}
