//! What a program wrote is its own tree: subpane reads it only through `store::ProgramTree`,
//! so a sparse file, a link or a FIFO the program left makes the end neither wait, follow nor
//! hang.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::*;
use crate::harness::{DEADLINE, assert_valid_envelope};
use crate::trust::git;

#[test]
fn sparse_artifacts_are_listed_whole_and_hashed_only_up_to_the_bound() {
    let env = TestEnv::new();
    // 8 GiB each that take no room on disk: hashing them whole took over a minute.
    let script = r#"for i in 1 2 3; do truncate -s 8G "$SUBPANE_OUT_DIR/sparse-$i"; done
        printf small > "$SUBPANE_OUT_DIR/small""#;
    let r = env.sp_within(
        DEADLINE,
        "the end waited for the hashes of sparse artifacts",
        [
            "run", "--json", "--run-id", "sparse", "--", "sh", "-c", script,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_valid_envelope(&v);
    let of = |path: &str| {
        v["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["path"] == path)
            .unwrap_or_else(|| panic!("no {path} in {}", v["artifacts"]))
            .clone()
    };
    for i in 1..=3 {
        let a = of(&format!("out/sparse-{i}"));
        assert_eq!(a["bytes"], 8u64 << 30, "{a}");
        let hashed = a["hashed_bytes"].as_u64().unwrap_or_else(|| panic!("{a}"));
        assert!(hashed < 8 << 30, "{a}");
        // What was hashed is the file's beginning: zeros, as a sparse file reads.
        let mut h = Sha256::new();
        let zeros = vec![0u8; 1 << 20];
        let mut left = hashed;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            h.update(&zeros[..n]);
            left -= n as u64;
        }
        assert_eq!(a["sha256"], format!("{:x}", h.finalize()), "{a}");
    }
    // A file within the bounds is hashed whole, and says nothing more.
    let small = of("out/small");
    assert_eq!(small["bytes"], 5);
    assert!(small.get("hashed_bytes").is_none(), "{small}");
    assert_eq!(small["sha256"], format!("{:x}", Sha256::digest(b"small")));
    let errors = v["output"]["errors"].to_string();
    assert!(errors.contains("not hashed whole"), "{errors}");
    env.assert_no_leftovers();
}

#[test]
fn a_workspace_whose_git_is_a_fifo_gets_no_repository_view_and_no_hang() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("tree-fifo-");
    let ws = o.join("ws");
    std::fs::create_dir(&ws).unwrap();
    nix::unistd::mkfifo(
        &ws.join(".git"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let r = env.sp_within(
        DEADLINE,
        "the planner opened a FIFO .git for reading",
        ["run", "--json", "--sandbox", "--cwd", s(&ws), "--", "true"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert!(v["sandbox"]["policy"]["git"].is_null(), "{}", v["sandbox"]);
    assert!(
        std::fs::symlink_metadata(ws.join(".git"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    env.assert_no_leftovers();
}

#[test]
fn the_carry_never_links_objects_through_a_link_at_objects() {
    let env = TestEnv::with_home_outside_tmp();
    let (_o, o) = outside("tree-objects-");
    let repo = super::git::repo(&o);
    // A file of the user's, on the same file system as the attempt (so that a hard link of
    // it could be made), which the program can read but not write.
    let victim = o.join("victim");
    std::fs::create_dir_all(victim.join("pack")).unwrap();
    std::fs::write(victim.join("pack/pack-1.pack"), "the user's").unwrap();
    let before = std::fs::metadata(victim.join("pack/pack-1.pack")).unwrap();
    // Give the ctime of a link made later a chance to differ on coarse clocks.
    std::thread::sleep(Duration::from_millis(20));
    let script = format!(
        r#"echo new > new.txt && git add new.txt && git commit -qm program && echo committed
        rm -rf .git/objects && ln -s {v} .git/objects && echo linked"#,
        v = q(&victim)
    );
    let r = run_bash(&env, "objects", &["--sandbox", "--cwd", s(&repo)], &script);
    let out = stdout_log(&env, "objects", 1);
    assert!(out.contains("committed") && out.contains("linked"), "{out}");
    let v = r.json();
    let errors = v["output"]["errors"].to_string();
    assert!(
        errors.contains("could not be carried back") && errors.contains("symbolic link"),
        "{errors}"
    );
    // The user's file was never linked (a link changes its ctime, even once removed).
    let after = std::fs::metadata(victim.join("pack/pack-1.pack")).unwrap();
    assert_eq!(
        (after.nlink(), after.ctime(), after.ctime_nsec()),
        (before.nlink(), before.ctime(), before.ctime_nsec())
    );
    // Nothing came back: the branch is where it was.
    assert_eq!(git(&repo, &["log", "--format=%s"]), "first\n");
    env.assert_no_leftovers();
}
