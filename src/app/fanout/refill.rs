//! Starting a fan-out's tasks: the ready ones (their dependencies and times met, by
//! priority) up to each place's concurrency, here in one batch and on hosts each in a thread,
//! and what a start made (a run, or a task that could not start).

use super::*;

impl State<'_> {
    /// Starts queued tasks up to the concurrency of each place: here in one batch, on
    /// hosts each in a thread of its own. How many it started.
    pub(super) fn fill(
        &mut self,
        wl: &mut WaitLoop,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) -> usize {
        let mut here_free = self.opts.concurrency.saturating_sub(self.running.len());
        let mut batch = Vec::new();
        let mut there = Vec::new();
        let mut left = VecDeque::with_capacity(self.queue.len());
        // The ready ones, higher priority first (a stable sort: then the file's order).
        let now = std::time::SystemTime::now();
        let (mut ready, waiting): (Vec<usize>, Vec<usize>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|&i| self.is_ready(i, now));
        ready.sort_by_key(|&i| std::cmp::Reverse(self.order.priority[i]));
        for i in ready {
            let to = match &self.slots[i].state {
                Phase::Queued(_) if here_free > 0 => {
                    here_free -= 1;
                    batch.push(i);
                    continue;
                }
                Phase::QueuedThere(_, Some(h)) => {
                    (self.far.running_on(h) < self.opts.concurrency).then(|| h.clone())
                }
                Phase::QueuedThere(_, None) => self
                    .opts
                    .hosts
                    .iter()
                    .map(|h| (self.far.running_on(h), h))
                    .filter(|(n, _)| *n < self.opts.concurrency)
                    .min_by_key(|(n, _)| *n)
                    .map(|(_, h)| h.clone()),
                _ => None,
            };
            match to {
                Some(h) => {
                    self.far.reserve(i, &h);
                    there.push((i, h));
                }
                None => left.push_back(i),
            }
        }
        // The queue keeps the file's order.
        left.extend(waiting);
        let mut left: Vec<usize> = left.into();
        left.sort_unstable();
        self.queue = left.into();
        let n = batch.len() + there.len();
        for (i, host) in there {
            let Phase::QueuedThere(req, _) =
                std::mem::replace(&mut self.slots[i].state, Phase::There { run: None })
            else {
                continue;
            };
            self.progress.queued -= 1;
            self.progress.running += 1;
            let group = self.group.clone();
            self.far.send(i, host, *req, group);
        }
        if batch.is_empty() {
            return n;
        }
        let mut plans = Vec::with_capacity(batch.len());
        let mut records = Vec::with_capacity(batch.len());
        for &i in &batch {
            if let Phase::Queued(p) = std::mem::replace(&mut self.slots[i].state, Phase::Starting) {
                records.push(p.record.clone());
                plans.push(*p);
            }
        }
        self.progress.queued -= batch.len();
        let results = start_many(self.home, plans);
        for ((i, record), res) in batch.into_iter().zip(records).zip(results) {
            match res {
                Ok(started) => self.started(wl, i, record, started, on_event),
                Err(e) => {
                    let t = self.not_started(i, e.to_string());
                    self.finish(i, t, on_event);
                }
            }
        }
        n
    }

    /// A task whose run started and whose end cannot be known here (why).
    pub(super) fn unheard(
        &self,
        i: usize,
        attempt_dir: Option<std::path::PathBuf>,
        why: String,
    ) -> FanoutTask {
        let (line, run_id, what) = self.ids(i);
        FanoutTask {
            line,
            id: None,
            run_id: Some(run_id),
            status: TaskStatus::Failed,
            failure_kind: None,
            exit_code: None,
            duration_ms: None,
            attempt_dir,
            what,
            error: Some(why),
            waiting: None,
        }
    }

    /// A task whose run was not created (it never started), with why.
    pub(super) fn not_started(&self, i: usize, error: String) -> FanoutTask {
        let (line, _, what) = self.ids(i);
        FanoutTask {
            line,
            id: None,
            run_id: None,
            status: TaskStatus::Failed,
            failure_kind: Some(crate::envelope::FailureKind::Spawn),
            exit_code: None,
            duration_ms: None,
            attempt_dir: None,
            what,
            error: Some(error),
            waiting: None,
        }
    }

    pub(super) fn started(
        &mut self,
        wl: &mut WaitLoop,
        i: usize,
        record: RunRecord,
        started: Started,
        on_event: &mut dyn FnMut(&Event<'_>, &Progress),
    ) {
        for w in &started.warnings {
            let (line, ..) = self.ids(i);
            self.emit(&Event::Warning(format!("line {line}: {w}")), on_event);
        }
        self.progress.running += 1;
        let run_id = started.spec.run_id.to_string();
        self.emit(
            &Event::Started {
                task: i,
                run_id: &run_id,
            },
            on_event,
        );
        if let Some(env) = &started.spawn_failed {
            self.progress.running -= 1;
            let t = self.outcome(i, env, Some(started.paths.dir().to_path_buf()));
            self.finish(i, t, on_event);
            return;
        }
        match wl.add(started.paths.clone(), started.spec.clone()) {
            Ok(token) => {
                self.running.insert(token, i);
                self.slots[i].state = Phase::Running {
                    record: Box::new(record),
                    started: Box::new(started),
                };
            }
            Err(e) => {
                // Not watched: it runs on, and `wait --group` still finds it.
                self.progress.running -= 1;
                let dir = started.paths.dir().to_path_buf();
                let t = self.unheard(i, Some(dir), format!("cannot wait for it: {e}"));
                self.finish(i, t, on_event);
            }
        }
    }
}
