//! Short names for runs and groups: what a person types instead of a whole id.
//!
//! Wherever a run id is taken (`status`, `wait`, `logs`, `attach`, `cancel`, `retry`, the MCP
//! tools), the name given is resolved here, in this order:
//!
//! 1. a run with exactly that id;
//! 2. [`NEWEST`] (`@`): the newest run (by creation time);
//! 3. a unique run whose id starts with the name, or, for a generated id
//!    (`20261201-215754-642cee`), whose random part starts with it (`642c`).
//!
//! A name that fits several runs is refused (exit 2) with the candidates listed; one that
//! fits none says where it looked. Group names (`--group`) resolve the same way among the
//! groups that exist. Only directory names are read: no `run.json`, no tmux.

use crate::app::Error;
use crate::store::{self, Home};

/// The short name of the newest run.
pub const NEWEST: &str = "@";

/// How many candidates an ambiguous name lists.
const SHOWN: usize = 8;

/// The run id `name` stands for (see the module's rules).
pub fn resolve_run(home: &Home, name: &str) -> Result<String, Error> {
    if name == NEWEST {
        // The newest here, or on a host (its record here says when it was started).
        let here = store::list_runs(home)
            .0
            .into_iter()
            .next()
            .map(|r| (r.record.created_at, r.id.to_string()));
        let far = crate::hosts::remote::list(home)
            .into_iter()
            .next()
            .map(|r| (r.created_at, r.run_id));
        return here
            .into_iter()
            .chain(far)
            .max()
            .map(|(_, id)| id)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "there is no run yet in {} for `{NEWEST}` (the newest run) to name",
                    home.runs_dir().display()
                ))
            });
    }
    // A whole id is that run: one look, not a listing of every run (find_run is called once
    // per task by a fan-out's driver and its waits).
    if let Ok(id) = crate::spec::RunId::parse(name)
        && home
            .run_dir(&id)
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir())
    {
        return Ok(name.to_owned());
    }
    let ids = names_in(&home.runs_dir());
    pick(&ids, name, "run").map_err(|m| {
        Error::invalid(match m {
            Miss::None => format!(
                "no run `{name}` in {}; {{@ls}} lists the runs there",
                home.runs_dir().display()
            ),
            Miss::Several(m) => m,
        })
    })
}

/// The group id `name` stands for, among the groups of the runs in the home and the records
/// of detached fan-outs. A name that fits none is an error (exit 2), for every verb alike.
pub fn resolve_group(home: &Home, name: &str) -> Result<String, Error> {
    match pick(&groups(home), name, "group") {
        Ok(g) => Ok(g),
        Err(Miss::None) => Err(Error::invalid(format!(
            "no group `{name}` in {}; {{@ls}} shows each run's group",
            home.root().display()
        ))),
        Err(Miss::Several(m)) => Err(Error::invalid(m)),
    }
}

/// The groups of the home: those the runs name and the records of detached fan-outs.
pub fn groups(home: &Home) -> Vec<String> {
    let mut groups: Vec<String> = store::list_runs(home)
        .0
        .into_iter()
        .filter_map(|r| r.record.group)
        .chain(names_in(&home.groups_dir()))
        .chain(
            crate::hosts::remote::list(home)
                .into_iter()
                .filter_map(|r| r.group),
        )
        .collect();
    groups.sort();
    groups.dedup();
    groups
}

/// Every run id in the home, for shell completion: directory names only, newest first.
pub fn completions(home: &Home) -> Vec<String> {
    let mut ids = names_in(&home.runs_dir());
    ids.sort_by(|a, b| b.cmp(a));
    ids
}

enum Miss {
    None,
    Several(String),
}

/// The one of `names` that `name` is, or starts, or is the start of the random part of.
fn pick(names: &[String], name: &str, what: &str) -> Result<String, Miss> {
    if names.iter().any(|n| n == name) {
        return Ok(name.to_owned());
    }
    if name.is_empty() {
        return Err(Miss::None);
    }
    let mut fits: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with(name) || random_part(n).is_some_and(|r| r.starts_with(name)))
        .collect();
    match fits.len() {
        0 => Err(Miss::None),
        1 => Ok(fits[0].clone()),
        n => {
            fits.sort_by(|a, b| b.cmp(a));
            let mut list: Vec<String> = fits.iter().take(SHOWN).map(|s| s.to_string()).collect();
            if n > SHOWN {
                list.push(format!("and {} more", n - SHOWN));
            }
            Err(Miss::Several(format!(
                "`{name}` fits {n} {what}s: {}; give more of the id",
                list.join(", ")
            )))
        }
    }
}

/// The random part of a generated id (`[g-]YYYYMMDD-HHMMSS-xxxxxx`): its last six hex digits,
/// a short name of the run or group (what `top` shows when room is short).
pub fn random_part(id: &str) -> Option<&str> {
    let id = id.strip_prefix("g-").unwrap_or(id);
    let (stamp, rnd) = id.rsplit_once('-')?;
    let (date, time) = stamp.split_once('-')?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let hex = rnd.len() == 6 && rnd.bytes().all(|b| b.is_ascii_hexdigit());
    (digits(date, 8) && digits(time, 6) && hex).then_some(rnd)
}

/// The names of the directories in `dir` that are run ids.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| crate::spec::RunId::parse(n).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_exact_id_wins_over_a_longer_one_it_starts() {
        let n = names(&["build", "build-2"]);
        assert_eq!(pick(&n, "build", "run").ok(), Some("build".into()));
        assert_eq!(pick(&n, "build-", "run").ok(), Some("build-2".into()));
    }

    #[test]
    fn a_prefix_or_the_random_part_of_a_generated_id_names_it() {
        let n = names(&[
            "20261201-215754-642cee",
            "20261201-215754-a91f03",
            "g-20261201-215800-77aa01",
        ]);
        assert_eq!(pick(&n, "642c", "run").ok(), Some(n[0].clone()));
        assert_eq!(
            pick(&n, "20261201-215754-a", "run").ok(),
            Some(n[1].clone())
        );
        assert_eq!(pick(&n, "77aa", "run").ok(), Some(n[2].clone()));
        assert_eq!(pick(&n, "g-", "run").ok(), Some(n[2].clone()));
    }

    #[test]
    fn an_ambiguous_name_lists_its_candidates_and_an_unknown_one_fits_none() {
        let n = names(&["20261201-215754-642cee", "20261201-215754-a91f03"]);
        match pick(&n, "20261201", "run") {
            Err(Miss::Several(m)) => {
                assert!(m.contains("fits 2 runs"), "{m}");
                assert!(m.contains("642cee") && m.contains("a91f03"), "{m}");
            }
            _ => panic!("an ambiguous prefix was taken"),
        }
        assert!(matches!(pick(&n, "zz", "run"), Err(Miss::None)));
        assert!(matches!(pick(&n, "", "run"), Err(Miss::None)));
    }

    #[test]
    fn only_generated_ids_have_a_random_part() {
        assert_eq!(random_part("20261201-215754-642cee"), Some("642cee"));
        assert_eq!(random_part("g-20261201-215754-642cee"), Some("642cee"));
        assert_eq!(random_part("fix-login-bug"), None);
        assert_eq!(random_part("2026-215754-642cee"), None);
        assert_eq!(random_part("20261201-215754-xyzxyz"), None);
    }
}
