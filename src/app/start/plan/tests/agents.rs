//! The planner's rules of agents: thinking levels, budgets.

use super::*;

#[test]
fn thinking_levels_are_the_agents_own() {
    let mut sys = Fake::new();
    sys.on_path.insert("pi".into(), "/usr/bin/pi".into());
    sys.on_path
        .insert("claude".into(), "/usr/bin/claude".into());
    let req = |agent, level: &str| RunRequest {
        agent: Some(agent),
        task: Some("fix the test".into()),
        thinking: Some(level.into()),
        ..RunRequest::default()
    };
    let m = refused(&req(AgentKind::Pi, "extreme"), &sys);
    assert!(
        m.contains("--thinking extreme is not a thinking level of pi")
            && m.contains("off, minimal, low, medium, high, xhigh"),
        "{m}"
    );
    assert!(refused(&req(AgentKind::Pi, "max"), &sys).contains("not a thinking level"));
    for level in ["off", "high", "xhigh"] {
        plan(&req(AgentKind::Pi, level), &home(), &sys).unwrap();
    }
    plan(&req(AgentKind::Claude, "max"), &home(), &sys).unwrap();
}

/// A budget is checked before anything starts: above zero, an agent's only, and a cost only
/// where the CLI reports it as it goes (pi); each is recorded in the spec's limits.
#[test]
fn budgets_are_an_agents_and_a_cost_only_where_the_cli_reports_it() {
    let mut sys = Fake::new();
    for cli in ["pi", "claude", "codex"] {
        sys.on_path
            .insert(cli.into(), format!("/usr/bin/{cli}").into());
    }
    let agent = |kind| RunRequest {
        agent: Some(kind),
        task: Some("t".into()),
        ..RunRequest::default()
    };
    let req = RunRequest {
        max_turns: Some(3),
        max_tokens: Some(1000),
        max_cost: Some(crate::spec::Usd(0.25)),
        ..agent(AgentKind::Pi)
    };
    let l = plan(&req, &home(), &sys).unwrap().spec.limits;
    assert_eq!(
        (l.max_turns, l.max_tokens, l.max_cost_usd),
        (Some(3), Some(1000), Some(crate::spec::Usd(0.25)))
    );
    let v = serde_json::to_value(&l).unwrap();
    assert_eq!(v["max_cost_usd"], 0.25, "{v}");
    // Unset, they are absent from spec.json.
    let v = serde_json::to_value(plan(&cmd(&["make"]), &home(), &sys).unwrap().spec.limits);
    assert!(v.unwrap().get("max_turns").is_none());

    // What a CLI reports only at its end cannot stop it: refused, saying why.
    let cost = |r: &mut RunRequest| r.max_cost = Some(crate::spec::Usd(1.0));
    let turns = |r: &mut RunRequest| r.max_turns = Some(1);
    let tokens = |r: &mut RunRequest| r.max_tokens = Some(10);
    let at_end = "Codex reports its usage only when its one turn ends";
    for (kind, set, flag, says) in [
        (
            AgentKind::Claude,
            cost as fn(&mut RunRequest),
            "--max-cost",
            "Claude Code reports its cost only in its final result",
        ),
        (
            AgentKind::Claude,
            turns,
            "--max-turns",
            "Claude Code reports its turns only in its final result",
        ),
        (
            AgentKind::Codex,
            cost,
            "--max-cost",
            "Codex reports no cost",
        ),
        (AgentKind::Codex, tokens, "--max-tokens", at_end),
        (AgentKind::Codex, turns, "--max-turns", at_end),
    ] {
        let mut req = agent(kind);
        set(&mut req);
        let m = refused(&req, &sys);
        assert!(m.contains(flag) && m.contains(says), "{m}");
    }
    let mut req = agent(AgentKind::Claude);
    tokens(&mut req);
    assert!(plan(&req, &home(), &sys).is_ok());
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let req = RunRequest {
            max_cost: Some(crate::spec::Usd(bad)),
            ..agent(AgentKind::Pi)
        };
        assert!(refused(&req, &sys).contains("greater than zero"), "{bad}");
    }
    let command = |f: fn(&mut RunRequest)| {
        let mut r = cmd(&["make"]);
        f(&mut r);
        refused(&r, &sys)
    };
    let m = command(|r| r.max_cost = Some(crate::spec::Usd(1.0)));
    assert!(
        m.contains("--max-cost cannot be enforced for a command: it reports no usage"),
        "{m}"
    );
    let m = command(|r| r.max_turns = Some(2));
    assert!(m.contains("--max-turns") && m.contains("no usage"), "{m}");
    let m = command(|r| r.max_tokens = Some(2));
    assert!(m.contains("--max-tokens"), "{m}");
}
