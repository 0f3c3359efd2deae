//! The tools that start runs and wait for them: `run`, `retry`, `wait`, `fanout`. Each waits
//! at most its `max_wait`, says progress while it waits, and answers with what it has.

use super::*;

/// How a `run` or `retry` call answers: whether it waits, how long at most, and whether
/// with the whole envelope.
pub(super) struct Answering {
    pub wait: bool,
    pub max_wait: Duration,
    pub detail: bool,
}

/// How often a long call reports progress while nothing else happens.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// Who a `run`, `retry` or `fanout` call's cancel is recorded as coming from.
const CANCELLED_BY: CancelOrigin = CancelOrigin::McpClient;

impl Server {
    pub(super) async fn run(&self, mut args: Value, call: &Call) -> Answer {
        // `wait`, `max_wait` and `detail` are the call's; the rest is the request.
        let w: Waiting = split(tools::RUN, &mut args)?;
        let Detail { detail } = split(tools::RUN, &mut args)?;
        let req: RunRequest = parse(tools::RUN, args)?;
        let max_wait = self.max_wait(w.max_wait.as_deref())?;
        let home = self.home.clone();
        if req.host.is_some() {
            let wait = w.wait.unwrap_or(true);
            return blocking_tool(move || remote::run(&home, req, wait, max_wait, detail)).await;
        }
        let plan = blocking(move || app::plan(&req, &home, &RealSystem)).await?;
        let how = Answering {
            wait: w.wait.unwrap_or(true),
            max_wait,
            detail,
        };
        self.start_and_answer(plan, how, call).await
    }

    pub(super) async fn retry(&self, mut args: Value, call: &Call) -> Answer {
        let Detail { detail } = split(tools::RETRY, &mut args)?;
        let a: RetryArgs = parse(tools::RETRY, args)?;
        if a.run_id.is_empty() {
            return Err(ToolError::Invalid(
                "`run_id` is required: the id of the run to retry (`list` shows the runs)".into(),
            ));
        }
        let max_wait = self.max_wait(a.max_wait.as_deref())?;
        let (home, id) = (self.home.clone(), a.run_id.clone());
        if let Some(far) = blocking_tool(move || remote::of(&home, &id)).await? {
            if a.at_reset || a.after.is_some() {
                return Err(ToolError::Invalid(format!(
                    "`at_reset` and `after` cannot be given to a retry of run {} on a host yet: retry it there when the limit has reset",
                    a.run_id
                )));
            }
            let home = self.home.clone();
            return blocking_tool(move || remote::retry(&home, &far, &a, max_wait, detail)).await;
        }
        let home = self.home.clone();
        let opts = a.options();
        let run_id = a.run_id.clone();
        let planned =
            blocking(move || app::prepare_retry(&home, &run_id, &opts, &RealSystem)).await?;
        let how = Answering {
            wait: a.wait.unwrap_or(true),
            max_wait,
            detail,
        };
        let mut r = self.start_and_answer(planned.plan, how, call).await?;
        for w in planned.warnings.iter().rev() {
            prepend(&mut r, &format!("warning: {}\n", app::Spell::Field.text(w)));
        }
        Ok(r)
    }

    /// Starts the attempt of `plan` and, with `wait`, waits for it up to `max_wait`: the
    /// start–wait–answer of `run` and `retry`. A client's cancel of the call cancels the
    /// attempt.
    pub(super) async fn start_and_answer(&self, plan: Plan, how: Answering, call: &Call) -> Answer {
        let Answering {
            wait,
            max_wait,
            detail,
        } = how;
        let home = self.home.clone();
        let mut wl = WaitLoop::new().map_err(ToolError::App)?;
        // Each change of the attempt's `progress.json` is a progress message too: what the
        // agent has used so far, as it goes.
        wl.report_records(wait);
        if wait {
            // The client gave up on this call: the run it started stops too (a cancel that
            // comes while the pane starts is kept for it).
            let stop = wl.interrupter();
            call.on_cancel(move || stop.interrupt());
        }
        let reporter = call.reporter();
        let starting = self.starts.begin();
        let out = blocking(move || {
            let run_id = plan.spec.run_id.to_string();
            let paths = home.attempt(&plan.spec.run_id, plan.spec.attempt);
            let mut starting = Some(starting);
            let mut on_started = |s: &Started| {
                starting.take();
                if wait && s.spawn_failed.is_none() {
                    reporter.say(started_text(s));
                }
            };
            let mut report =
                |p: &WaitProgress<'_>| say_progress(&reporter, Some((&run_id, &paths)), p);
            let opts = RunOptions {
                detach: !wait,
                on_interrupt: OnInterrupt::CancelAndReturn,
                heartbeat: Some(HEARTBEAT),
                on_started: Some(&mut on_started),
                on_progress: Some(&mut report),
                max_wait: Some(max_wait),
                cancel_by: Some(CANCELLED_BY),
            };
            let out = app::run(&home, plan, &mut wl, opts)?;
            // A run still going is answered with its state now.
            let live = match &out {
                RunOutcome::StillRunning(s) => Some(app::attempt_status(&s.paths, &s.spec)?),
                _ => None,
            };
            Ok((out, live))
        })
        .await?;
        match out {
            (RunOutcome::Detached(started), _) => {
                let text = format!(
                    "{}\nuse `wait` (or `status`) with run_id {} for its result",
                    started_text(&started),
                    started.spec.run_id
                );
                let id = started.spec.run_id.as_str();
                let summary = format!(
                    "run {id} (attempt {}) started; call `wait` for its result",
                    started.spec.attempt
                );
                let next = answer::next_wait(&[id], None);
                let mut doc = to_value(&started.answer());
                if let (false, Some(o)) = (detail, doc.as_object_mut()) {
                    o.remove("tmux");
                }
                Ok(result(text, answer::lead(&summary, Some(next), doc)))
            }
            (RunOutcome::Finished { started, envelope }, _) => {
                let mut r = finished(&envelope, &started.paths, detail);
                if started.spawn_failed.is_none() {
                    for w in started.warnings.iter().rev() {
                        prepend(&mut r, &format!("warning: {}\n", app::Spell::Field.text(w)));
                    }
                }
                Ok(r)
            }
            (RunOutcome::StillRunning(started), Some(status)) => {
                let mut r = match &status {
                    AttemptStatus::Finished(env) => finished(env, &started.paths, detail),
                    AttemptStatus::Live(doc) => live(doc, detail),
                };
                if matches!(status, AttemptStatus::Live(_)) {
                    prepend(
                        &mut r,
                        &format!(
                            "still running after max_wait ({}); it goes on: call `wait` with \
                             run_ids [\"{}\"] for its result (or `status`, `logs`, `cancel`)\n",
                            humantime::format_duration(max_wait),
                            started.spec.run_id
                        ),
                    );
                }
                Ok(r)
            }
            (RunOutcome::StillRunning(started), None) | (RunOutcome::Cancelled(started), _) => {
                Err(ToolError::RunCancelled(started.spec.run_id.to_string()))
            }
        }
    }

    /// Waits for `targets` on a blocking thread, reporting progress, until the mode is met,
    /// the timeout passes, or the client cancels the call (`stopped`).
    pub(super) async fn wait_on(
        &self,
        targets: Vec<(AttemptPaths, AttemptSpec)>,
        mode: WaitMode,
        timeout: Option<Duration>,
        call: &Call,
    ) -> Result<(app::WaitResult, Vec<(AttemptPaths, AttemptSpec)>), ToolError> {
        let mut wl = WaitLoop::new()?;
        wl.report_records(targets.len() == 1);
        let stop = wl.interrupter();
        call.on_cancel(move || stop.interrupt());
        let reporter = call.reporter();
        blocking(move || {
            let only = (targets.len() == 1).then(|| &targets[0]);
            let only = only.map(|(paths, spec)| (spec.run_id.as_str(), paths));
            let mut report = |p: &WaitProgress<'_>| say_progress(&reporter, only, p);
            let res = app::wait_with(
                &mut wl,
                &targets,
                mode,
                timeout,
                WaitOptions {
                    heartbeat: Some(HEARTBEAT),
                    on_progress: Some(&mut report),
                    on_interrupt: None,
                },
            )?;
            Ok((res, targets))
        })
        .await
    }

    pub(super) async fn wait(&self, mut args: Value, call: &Call) -> Answer {
        let Detail { detail } = split(tools::WAIT, &mut args)?;
        let a: WaitArgs = parse(tools::WAIT, args)?;
        let timeout = a
            .timeout
            .as_deref()
            .map(|t| parse_positive_duration("`timeout`", t))
            .transpose()
            .map_err(app::Error::from)?;
        let max_wait = self.max_wait(a.max_wait.as_deref())?;
        if a.run_ids.is_empty() && a.group.is_none() {
            return Err(ToolError::Invalid(
                "give `run_ids` (a list of run ids) or `group` (a fan-out group id)".into(),
            ));
        }
        if let ([one], None) = (a.run_ids.as_slice(), &a.group) {
            let (home, one) = (self.home.clone(), one.clone());
            let attempt = a.attempt;
            let limit = timeout.map_or(max_wait, |t| t.min(max_wait));
            let by_max_wait = timeout.is_none_or(|t| t > max_wait);
            let far = blocking_tool(move || {
                Ok(match remote::of(&home, &one)? {
                    Some(r) => Some(remote::wait(
                        &home,
                        &r,
                        attempt,
                        limit,
                        by_max_wait,
                        detail,
                    )?),
                    None => None,
                })
            })
            .await?;
            if let Some(r) = far {
                return Ok(r);
            }
        }
        let home = self.home.clone();
        let (group, targets) = blocking(move || {
            let group = a.group.map(|g| app::resolve_group(&home, &g)).transpose()?;
            let targets = app::wait_targets(&home, &a.run_ids, group.as_deref(), a.attempt)?;
            Ok((group, targets))
        })
        .await?;
        let mode = match a.mode {
            Mode::Any => WaitMode::Any,
            Mode::All => WaitMode::All,
        };
        call.reporter().say(app::waiting_for(&targets));
        let limit = timeout.map_or(max_wait, |t| t.min(max_wait));
        let (mut res, mut targets) = self.wait_on(targets, mode, Some(limit), call).await?;
        if res.stopped {
            return Err(ToolError::WaitCancelled);
        }
        let max_wait_passed = res.timed_out && timeout.is_none_or(|t| t > max_wait);
        let home = self.home.clone();
        blocking(move || {
            app::regroup(&home, group.as_deref(), &mut targets, &mut res)?;
            let report = group
                .as_deref()
                .map(|g| app::fanout::group_report(&home, g))
                .transpose()?
                .flatten();
            let answers = app::wait_answers(targets, res)?;
            Ok(reply::wait_answer(
                &answers,
                report.as_ref(),
                max_wait_passed,
                max_wait,
                detail,
            ))
        })
        .await
    }

    pub(super) async fn fanout(&self, args: Value, call: &Call) -> Answer {
        let a: FanoutArgs = parse(tools::FANOUT, args)?;
        if a.tasks.is_empty() {
            return Err(ToolError::Invalid(
                "`tasks` is empty: give at least one request".into(),
            ));
        }
        let max_wait = self.max_wait(a.max_wait.as_deref())?;
        let opts = Options {
            concurrency: a.concurrency.unwrap_or(DEFAULT_CONCURRENCY as usize),
            fail_fast: a.fail_fast,
            cancel_siblings: a.cancel_siblings,
            tick: None,
            hosts: a.hosts,
            budget: crate::app::fanout::GroupBudget {
                max_tokens: a.max_tokens,
                max_cost: a.max_cost.map(crate::spec::Usd),
            },
            on_usage_limit: a.on_usage_limit,
        };
        if opts.concurrency == 0 {
            return Err(ToolError::Invalid(
                "`concurrency` must be at least 1".into(),
            ));
        }
        let mut requests = Vec::with_capacity(a.tasks.len());
        for (i, t) in a.tasks.into_iter().enumerate() {
            let l = crate::app::fanout::Line::from_value(t).map_err(|e| ToolError::Args {
                tool: tools::FANOUT,
                path: match e.path().to_string() {
                    p if p == "." => format!("tasks[{i}]"),
                    p => format!("tasks[{i}].{p}"),
                },
                source: e.into_inner(),
            })?;
            requests.push(l);
        }
        let home = self.home.clone();
        let reporter = call.reporter();
        // The group's driver is a run of its own: this call only starts it, and waits.
        let starting = self.starts.begin();
        let (group, total, driver) = blocking(move || {
            let group = new_group_id();
            let tasks = plan_requests(requests, &home, &RealSystem, &group, &opts.hosts)?;
            let started = detach(&home, &group, &tasks, &opts)?;
            let driver = app::find_run(&home, &group, None)?;
            Ok((group, tasks.len(), (started, driver)))
        })
        .await?;
        drop(starting);
        let (started, found) = driver;
        reporter.say(format!(
            "group {group}: {total} tasks, driven by run {group} (a human can watch it with \
             `subpane attach {group}`)"
        ));
        let mut wl = WaitLoop::new()?;
        if started.spawn_failed.is_none() {
            let stop = wl.interrupter();
            call.on_cancel(move || stop.interrupt());
        }
        let home = self.home.clone();
        let g = group.clone();
        let (stopped, report) = blocking(move || {
            let mut failed = None;
            let mut on_interrupt = |_n: u32| {
                // The client gave up on the call: the group stops, as `cancel` of its id does.
                if let Err(e) = app::cancel_by(&found, None, CANCELLED_BY) {
                    failed = Some(e);
                }
                std::ops::ControlFlow::Break(())
            };
            let mut report = |_: &WaitProgress<'_>| {
                if let Ok(Some(r)) = app::fanout::group_report(&home, &g) {
                    reporter.say(fanout_progress(&r));
                }
            };
            let res = if started.spawn_failed.is_some() {
                None
            } else {
                Some(app::wait_with(
                    &mut wl,
                    &[(found.paths.clone(), found.spec.clone())],
                    WaitMode::All,
                    Some(max_wait),
                    WaitOptions {
                        heartbeat: Some(HEARTBEAT),
                        on_progress: Some(&mut report),
                        on_interrupt: Some(&mut on_interrupt),
                    },
                )?)
            };
            if let Some(e) = failed {
                return Err(e);
            }
            let r = app::fanout::group_report(&home, &g)?;
            if let Some(r) = &r {
                reporter.say(fanout_progress(r));
            }
            Ok((res.is_some_and(|r| r.stopped), r))
        })
        .await?;
        if stopped {
            return Err(ToolError::RunCancelled(group));
        }
        let Some(report) = report else {
            return Err(ToolError::Invalid(format!("group {group} has no record")));
        };
        Ok(reply::fanout_answer(&report, max_wait))
    }
}

/// A progress message of a fan-out: how many tasks are done, running and queued.
fn fanout_progress(r: &crate::envelope::FanoutReport) -> String {
    let s = &r.summary;
    format!(
        "{}/{} done ({} running, {} queued)",
        s.completed + s.failed + s.cancelled + s.skipped,
        s.total,
        s.running,
        s.queued
    )
}

/// A progress message for a wait: how many finished, and which one just did. `only`: the
/// run id and attempt when the wait is for one run; its heartbeat says what the agent has
/// used so far (`progress.json`), as the live line of `run` and `wait` does.
fn say_progress(reporter: &Reporter, only: Option<(&str, &AttemptPaths)>, p: &WaitProgress<'_>) {
    let secs = p.elapsed.as_secs();
    let msg = match (p.finished.and_then(|i| p.results[i].as_ref()), only) {
        (Some(env), _) => format!(
            "{}/{} finished; {}",
            p.done,
            p.total,
            answer::ended_line(env)
        ),
        (None, Some((id, paths))) => {
            let so_far = app::progress(paths)
                .map(|p| crate::cli::human::so_far(&p.so_far))
                .unwrap_or_default();
            match so_far.is_empty() {
                true => format!("run {id} running for {secs}s"),
                false => format!("run {id} running for {secs}s; so far {so_far}"),
            }
        }
        (None, None) => format!("{}/{} finished after {secs}s", p.done, p.total),
    };
    reporter.say(msg);
}

/// What a `run` call says once its attempt runs: where it is, and its warnings.
fn started_text(s: &Started) -> String {
    let mut text = format!(
        "run {} (attempt {}) started; attempt directory {}; a human can watch it with \
         `subpane attach {}`",
        s.spec.run_id,
        s.spec.attempt,
        s.paths.dir().display(),
        s.spec.run_id
    );
    for w in &s.warnings {
        text.push_str(&format!("\nwarning: {}", app::Spell::Field.text(w)));
    }
    text
}
