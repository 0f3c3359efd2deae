//! The waiter's watches: its one inotify instance (the watches it adds and removes as an
//! attempt's needs change, and what a read of it touched), the look at an attempt after a
//! wake-up ([`Waiter::refresh`]), and the completion FIFO it opens.

use super::*;

impl Waiter {
    pub(super) fn read_inotify(&mut self, touched: &mut Vec<Token>) {
        let Some(n) = &self.inotify else { return };
        while let Ok(events) = n.read_events() {
            if events.is_empty() {
                break;
            }
            for ev in events {
                let Some(tokens) = self.by_wd.get(&ev.wd) else {
                    continue;
                };
                let name = ev.name.as_ref().and_then(|n| n.to_str());
                let record = matches!(name, Some("result.json" | "worker.json" | "launch.json"));
                let live = name.is_some_and(|n| RECORDS.contains(&n));
                for t in tokens {
                    let report = match self.slots.get(t) {
                        Some(s) => {
                            if record {
                                touched.push(*t);
                            }
                            match s.interest {
                                Interest::End => false,
                                Interest::Records => live,
                                Interest::Files => true,
                            }
                        }
                        // A watched directory.
                        None => self.dirs.contains_key(t),
                    };
                    if report && !self.changed.contains(t) {
                        self.changed.push(*t);
                    }
                }
            }
        }
    }

    /// Adds a watch on the attempt's directory. `false` when none can be had (degraded).
    pub(super) fn watch(&mut self, t: Token) -> bool {
        if self.inotify.is_none() {
            self.inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok();
        }
        let (Some(n), Some(slot)) = (&self.inotify, self.slots.get_mut(&t)) else {
            self.degraded = true;
            return false;
        };
        // IN_MASK_ADD (nix has no name for it): a second attempt in the same directory adds
        // to the watch instead of replacing its mask.
        let mut flags =
            AddWatchFlags::IN_MOVED_TO | AddWatchFlags::from_bits_retain(libc::IN_MASK_ADD);
        if slot.interest == Interest::Files {
            flags |= AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE;
        }
        match n.add_watch(slot.paths.dir(), flags) {
            Ok(wd) => {
                slot.watch = Some(wd);
                let tokens = self.by_wd.entry(wd).or_default();
                if !tokens.contains(&t) {
                    tokens.push(t);
                }
                true
            }
            Err(_) => {
                self.degraded = true;
                false
            }
        }
    }

    pub(super) fn unwatch(&mut self, t: Token, wd: Option<WatchDescriptor>) {
        let Some(wd) = wd else { return };
        if let Some(tokens) = self.by_wd.get_mut(&wd) {
            tokens.retain(|x| *x != t);
            if tokens.is_empty() {
                self.by_wd.remove(&wd);
                if let Some(n) = &self.inotify {
                    let _ = n.rm_watch(wd);
                }
            }
        }
    }

    /// Looks at an attempt again; a finished one moves to the ready queue.
    pub(super) fn refresh(&mut self, t: Token) -> Result<(), SuperviseError> {
        let Some(slot) = self.slots.get_mut(&t) else {
            return Ok(());
        };
        // A worker known to have ended, whose records are gone: no look can ever find it.
        let ended = slot.worker.filter(|w| !procs::is_alive(w));
        let gone = std::fs::symlink_metadata(slot.paths.dir())
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        if gone {
            if slot.worker.is_some() && ended.is_none() {
                // Its end is what is waited for: the pidfd tells it.
                return Ok(());
            }
            let error = SuperviseError::Vanished {
                dir: slot.paths.dir().to_path_buf(),
                worker: ended.map(|w| w.pid),
            };
            let slot = self.slots.remove(&t);
            self.unwatch(t, slot.and_then(|s| s.watch));
            self.vanished.push_back((t, error));
            return Ok(());
        }
        for _ in 0..3 {
            match observe(&slot.paths, &slot.spec)? {
                AttemptState::Finished(env) => {
                    let slot = self.slots.remove(&t);
                    let follows = slot.as_ref().is_some_and(|s| s.interest == Interest::Files);
                    if follows && !self.changed.contains(&t) {
                        self.changed.push(t);
                    }
                    self.unwatch(t, slot.and_then(|s| s.watch));
                    self.ready.push_back((t, env));
                    return Ok(());
                }
                AttemptState::Starting { since } => {
                    if let Some(w) = ended {
                        // Its worker.json and launch.json were removed: the look cannot
                        // tell that it ran, but this waiter saw it end.
                        let why = format!(
                            "the worker (pid {}) ended, and its records (worker.json, launch.json) had been removed from the attempt directory",
                            w.pid
                        );
                        let env = write_lost(&slot.paths, &slot.spec, &why)?;
                        let slot = self.slots.remove(&t);
                        self.unwatch(t, slot.and_then(|s| s.watch));
                        self.ready.push_back((t, Box::new(env)));
                        return Ok(());
                    }
                    slot.starting_since = Some(since);
                    return Ok(());
                }
                AttemptState::Running(info) => {
                    slot.starting_since = None;
                    if slot.pidfd.is_some() {
                        return Ok(());
                    }
                    if let Some(fd) = procs::pidfd_for(&info.worker) {
                        slot.pidfd = Some(fd);
                        slot.worker = Some(info.worker);
                        return Ok(());
                    }
                    // It died between the look and the pidfd: look again.
                }
            }
        }
        Ok(())
    }
}

/// Closes an inotify fd off the caller's path (the kernel makes the close wait for an RCU
/// grace period, often 10-20 ms).
pub(super) fn release(inotify: Inotify) {
    let _ = std::thread::Builder::new()
        .name("inotify-close".into())
        .spawn(move || drop(inotify));
}

/// Opens the attempt's completion FIFO for reading, without blocking. `None` when the
/// attempt has none (e.g. created by an older subpane), or when something else is under its
/// name: a link is not followed, and a regular file would be "readable" on every poll (the
/// worker's pidfd still tells the end).
pub(super) fn open_done_fifo(paths: &AttemptPaths) -> Option<File> {
    use std::os::unix::fs::FileTypeExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(paths.done_fifo())
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.file_type().is_fifo()))
}
