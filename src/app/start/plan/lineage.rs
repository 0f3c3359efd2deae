//! Where a run sits below the attempt that started it, and the nesting limit.

use super::*;

/// Where this run sits below the attempt that starts it (from the `SUBPANE_*` variables
/// every attempt's program gets), and the nesting limit in force: the lower of `max_depth`
/// and the one inherited. A run deeper than the limit is refused, naming the chain.
pub(in crate::app) fn lineage(
    req: &RunRequest,
    var: &dyn Fn(&str) -> Option<OsString>,
    run_id: &RunId,
) -> Result<(Option<Lineage>, u32), Error> {
    let num =
        |name: &str| var(name).and_then(|v| v.to_str().and_then(|s| s.trim().parse::<u32>().ok()));
    let max = match (req.max_depth, num("SUBPANE_MAX_DEPTH")) {
        (Some(asked), Some(inherited)) => asked.min(inherited),
        (asked, inherited) => asked.or(inherited).unwrap_or(DEFAULT_MAX_DEPTH),
    };
    let Some(parent) = var("SUBPANE_RUN_ID").and_then(|v| v.into_string().ok()) else {
        return Ok((None, max));
    };
    let mut chain: Vec<String> = var("SUBPANE_CHAIN")
        .and_then(|v| v.into_string().ok())
        .map(|c| {
            c.split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if chain.last() != Some(&parent) {
        chain.push(parent.clone());
    }
    let depth = num("SUBPANE_DEPTH").unwrap_or(0) + 1;
    if depth > max {
        return Err(Error::invalid(format!(
            "runs may nest at most {max} deep ({{max_depth}}, inherited through SUBPANE_MAX_DEPTH), and this one would be {depth} deep: {} > {run_id}; finish the work in this run instead of starting another",
            chain.join(" > ")
        )));
    }
    Ok((
        Some(Lineage {
            parent_run: parent,
            parent_attempt: num("SUBPANE_ATTEMPT").unwrap_or(1),
            depth,
            chain,
        }),
        max,
    ))
}
