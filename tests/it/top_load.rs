//! `top` with many runs: 500 finished runs on disk and 100 running. The board loads them,
//! top draws them, answers a key at once, and takes next to no CPU while nothing changes
//! (its only timer is the clock of the running rows).

use std::path::Path;
use std::time::{Duration, Instant};

use subpane::app::WaitLoop;
use subpane::app::board::Board;
use subpane::envelope::RunState;
use subpane::store::Home;

use crate::harness::{TestEnv, wait_until};
use crate::terminal::Terminal;

/// Copies run `from` as run `to`, with its id changed in its records.
fn copy_run(runs: &Path, from: &str, to: &str) {
    let (src, dst) = (runs.join(from), runs.join(to));
    for entry in walk(&src) {
        let rel = entry.strip_prefix(&src).unwrap();
        let target = dst.join(rel);
        if entry.is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            continue;
        }
        let bytes = std::fs::read(&entry).unwrap();
        let is_json = entry.extension().is_some_and(|e| e == "json");
        let bytes = if is_json {
            String::from_utf8(bytes)
                .unwrap()
                .replace(&format!("\"{from}"), &format!("\"{to}"))
                .replace(&format!("/{from}/"), &format!("/{to}/"))
                .into_bytes()
        } else {
            bytes
        };
        std::fs::write(&target, bytes).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        // FIFOs and sockets are not copied: a finished run's are no longer used.
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(walk(&p));
        } else if t.is_file() {
            out.push(p);
        }
    }
    out
}

/// CPU time (user and system) of `pid` so far.
fn cpu(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf with a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

#[test]
fn top_with_500_runs_on_disk_and_100_running() {
    let env = TestEnv::new();
    let r = env.sp(["run", "--run-id", "seed", "--", "sh", "-c", "echo done"]);
    assert_eq!(r.code, 0, "{r:?}");
    let runs = env.home.join("runs");
    for i in 1..500 {
        copy_run(&runs, "seed", &format!("old-{i:03}"));
    }
    for i in 0..100 {
        let r = env.sp([
            "run",
            "--detach",
            "--run-id",
            &format!("live-{i:03}"),
            "--",
            "sleep",
            "600",
        ]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    wait_until("every live run running", || {
        let r = env.sp(["ls", "--json", "--status", "running"]);
        (r.json().as_array().map(Vec::len) == Some(100)).then_some(())
    });
    // The board as top loads it: every run, each live one watched.
    let home = Home::at(env.home.clone());
    let mut wl = WaitLoop::new().unwrap();
    let t0 = Instant::now();
    let board = Board::load(&home, &mut wl).unwrap();
    let loaded = t0.elapsed();
    assert_eq!(board.runs().len(), 600);
    let running = board
        .runs()
        .iter()
        .filter(|r| r.row.status == RunState::Running);
    assert_eq!(running.count(), 100);
    eprintln!("the board of 600 runs loaded in {loaded:?}");
    drop((board, wl));
    // top itself: it shows them, and answers a key at once.
    let t = Terminal::subpane(&env, "top-load", (200, 50), &[], &["top"]);
    t.wait_for("600 runs · 100 running · 0 failed");
    t.keys(&["s"]);
    t.wait_for("100 of 600 runs: status running");
    // Nothing changes but the clock: over three seconds of it, top takes next to no CPU.
    let pid = t.pid();
    let clock = |s: &str| -> Option<u64> {
        let l = s.lines().find(|l| l.contains("live-099"))?;
        let c = l
            .split_whitespace()
            .find(|w| w.contains(':') && w.len() <= 5)?;
        let (m, s) = c.split_once(':')?;
        Some(m.parse::<u64>().ok()? * 60 + s.parse::<u64>().ok()?)
    };
    let first = clock(&t.screen()).unwrap_or_else(|| panic!("no clock:\n{}", t.screen()));
    let c0 = cpu(pid);
    let w0 = Instant::now();
    t.wait_until("the clock to move three seconds", |s| {
        clock(s).is_some_and(|c| c >= first + 3)
    });
    let (used, wall) = (cpu(pid) - c0, w0.elapsed());
    assert!(
        used < wall / 10,
        "top used {used:?} of CPU in {wall:?} with nothing changing but the clock"
    );
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    // The running ones end with their tmux server.
    let _ = env.tmux().arg("kill-server").output();
    env.assert_no_leftovers();
}
