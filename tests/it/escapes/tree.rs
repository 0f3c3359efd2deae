//! What a program wrote is its own tree: subpane reads it only through `store::ProgramTree`,
//! so a sparse file, a link or a FIFO the program left makes the end neither wait, follow nor
//! hang.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use super::*;
use crate::trust::git;

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
