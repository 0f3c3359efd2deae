//! The tools that look at runs that exist, or stop one: `status`, `logs`, `list`, `cancel`.
//! None of them waits for a run to end.

use super::*;

impl Server {
    pub(super) async fn status(&self, mut args: Value) -> Answer {
        let Detail { detail } = split(tools::STATUS, &mut args)?;
        let a: StatusArgs = parse(tools::STATUS, args)?;
        let home = self.home.clone();
        blocking_tool(move || {
            if let Some(r) = remote::of(&home, &a.run_id)? {
                return remote::status(&home, &r, a.attempt, detail);
            }
            let f = app::find_run(&home, &a.run_id, a.attempt)?;
            Ok(match app::attempt_status(&f.paths, &f.spec)? {
                AttemptStatus::Finished(env) => finished(&env, &f.paths, detail),
                AttemptStatus::Live(doc) => live(&doc, detail),
            })
        })
        .await
    }

    pub(super) async fn logs(&self, args: Value) -> Answer {
        let a: LogsArgs = parse(tools::LOGS, args)?;
        let max = a
            .max_bytes
            .unwrap_or(tools::LOGS_DEFAULT)
            .clamp(1, tools::LOGS_MAX);
        let home = self.home.clone();
        blocking_tool(move || {
            if let Some(r) = remote::of(&home, &a.run_id)? {
                return remote::logs(&home, &r, a.file, a.attempt, max);
            }
            let f = app::find_run(&home, &a.run_id, a.attempt)?;
            let path = f.log_path(a.file).ok_or_else(|| {
                app::Error::invalid(format!(
                    "`file: output`: run `{}` is a command, which has no final text \
                     (output.txt is an agent's); `file: stdout` gives its output",
                    f.spec.run_id
                ))
            })?;
            let Some((tail, size)) = app::log_end(&path, max)? else {
                let text = format!("{} does not exist (yet)", path.display());
                let doc = json!({"summary": text, "run_id": f.spec.run_id.as_str(),
                                 "attempt": f.spec.attempt, "path": path, "exists": false,
                                 "size": 0, "truncated": false});
                return Ok(result(text, doc));
            };
            let truncated = size > max;
            let header = if truncated {
                format!("(the last {max} of {size} bytes of {})", path.display())
            } else {
                format!("({size} bytes of {})", path.display())
            };
            // The text once: in the content, not again in the structured content.
            let doc = json!({"summary": header, "run_id": f.spec.run_id.as_str(),
                             "attempt": f.spec.attempt, "path": path, "exists": true,
                             "size": size, "truncated": truncated, "shown_bytes": tail.len()});
            Ok(result(format!("{header}\n{tail}"), doc))
        })
        .await
    }

    pub(super) async fn cancel(&self, mut args: Value) -> Answer {
        let Detail { detail } = split(tools::CANCEL, &mut args)?;
        let a: CancelArgs = parse(tools::CANCEL, args)?;
        let grace_ms = a
            .grace
            .as_deref()
            .map(|g| parse_duration("`grace`", g))
            .transpose()
            .map_err(app::Error::from)?
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let home = self.home.clone();
        blocking_tool(move || {
            if let Some(r) = remote::of(&home, &a.run_id)? {
                return remote::cancel(&home, &r, a.grace.as_deref(), detail);
            }
            let f = app::find_run(&home, &a.run_id, a.attempt)?;
            Ok(match app::cancel(&f, grace_ms)? {
                CancelOutcome::AlreadyFinished(env) => {
                    let mut r = finished(&env, &f.paths, detail);
                    // The driver of a group that died with work left: the group is stopped.
                    let group = app::fanout::revive::stop_if_dead(&home, &f)?
                        .map(|n| {
                            format!(
                                "{}\n",
                                app::fanout::revive::stopped_words(f.spec.run_id.as_str(), n)
                            )
                        })
                        .unwrap_or_default();
                    prepend(
                        &mut r,
                        &format!("already finished; nothing to cancel\n{group}"),
                    );
                    r
                }
                CancelOutcome::Requested(c) => {
                    // Its state as the request left it (it ends soon; `wait` shows the end).
                    let status = match app::attempt_status(&f.paths, &f.spec)? {
                        AttemptStatus::Finished(env) => env.status.as_str(),
                        AttemptStatus::Live(doc) => doc.status.as_str(),
                    };
                    let mut doc = to_value(&c);
                    if let Some(o) = doc.as_object_mut() {
                        o.insert("status".into(), status.into());
                    }
                    let text = format!(
                        "cancel requested for run {} (attempt {}); `wait` shows it end",
                        c.run_id, c.attempt
                    );
                    let next = answer::next_wait(&[c.run_id.as_str()], None);
                    result(text.clone(), answer::lead(&text, Some(next), doc))
                }
            })
        })
        .await
    }

    pub(super) async fn send(&self, args: Value) -> Answer {
        let a: SendArgs = parse(tools::SEND, args)?;
        let max_wait = self.max_wait(a.max_wait.as_deref())?;
        let home = self.home.clone();
        blocking_tool(move || {
            if remote::of(&home, &a.run_id)?.is_some() {
                return Err(app::Error::invalid(format!(
                    "run `{}` runs on a host: this server sends to runs of this machine only",
                    a.run_id
                ))
                .into());
            }
            let f = app::find_run(&home, &a.run_id, None)?;
            let s = app::send_within(&f, InputFrom::Mcp, a.text, a.interrupt, Some(max_wait))?;
            let what = if a.interrupt { "the interrupt" } else { "the message" };
            let text = if s.taken {
                format!("run {} (attempt {}) took {what} (#{})", s.run_id, s.attempt, s.seq)
            } else {
                format!(
                    "{what} (#{}) waits for run {} (attempt {}) to take it: it reaches the agent at its next step",
                    s.seq, s.run_id, s.attempt
                )
            };
            let doc = json!({"summary": text, "run_id": s.run_id, "attempt": s.attempt,
                             "seq": s.seq, "taken": s.taken});
            Ok(result(text, doc))
        })
        .await
    }

    pub(super) async fn list(&self, mut args: Value) -> Answer {
        let Paging { offset } = split(tools::LIST, &mut args)?;
        let a: ListArgs = parse(tools::LIST, args)?;
        let limit = a
            .limit
            .unwrap_or(tools::LIST_DEFAULT)
            .clamp(1, tools::LIST_MAX);
        let home = self.home.clone();
        blocking(move || {
            let group = a.group.map(|g| app::resolve_group(&home, &g)).transpose()?;
            let mut rows = app::list_group(&home, a.status, group.as_deref())?;
            rows.retain(|r| a.labels.iter().all(|(k, v)| r.labels.get(k) == Some(v)));
            let total = rows.len();
            // A page: `limit` rows from `offset`, as many of them as one answer holds.
            let mut rows: Vec<_> = rows.into_iter().skip(offset).take(limit).collect();
            let (docs, _) = answer::fit(rows.iter().map(answer::row_doc), MAX_DOC);
            rows.truncate(docs.len());
            let end = offset.saturating_add(docs.len()).min(total);
            let more = end < total;
            let text = answer::rows_text(&rows, total, offset);
            let summary = text.lines().next().unwrap_or_default().to_owned();
            let doc = json!({"total": total, "offset": offset, "more": more,
                             "next_offset": more.then_some(end),
                             "truncated": more, "runs": docs});
            Ok(result(text, answer::lead(&summary, None, doc)))
        })
        .await
    }
}
