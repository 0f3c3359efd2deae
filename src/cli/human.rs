//! Figures in words for people: durations, ages, times, tokens and cost. One place, so that
//! `status`, the live line of `run` and `wait`, `ls` and `top` say them alike.

use std::time::{Duration, SystemTime};

use crate::envelope::{LastEvent, SoFar};

/// A running time: `850ms`, `4.2s`, `2m 05s`, `1h 02m`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs();
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if s < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// A running time by the second, for a clock that ticks: `0:07`, `2:05`, `1:02:09`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s < 3600 {
        format!("{}:{:02}", s / 60, s % 60)
    } else {
        format!("{}:{:02}:{:02}", s / 3600, (s % 3600) / 60, s % 60)
    }
}

/// How long ago, in one unit: `12s`, `5m`, `3h`, `2d`.
pub fn age(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else if s < 48 * 3600 {
        format!("{}h", s / 3600)
    } else {
        format!("{}d", s / 86400)
    }
}

/// When [`age`] of something `d` old next shows another text.
pub fn age_changes_in(d: Duration) -> Duration {
    let s = d.as_secs();
    let unit = if s < 60 {
        1
    } else if s < 3600 {
        60
    } else if s < 48 * 3600 {
        3600
    } else {
        86400
    };
    let next = (s / unit + 1) * unit;
    Duration::from_secs(next) - d
}

/// An RFC 3339 UTC time as people read it, marked as UTC: `2026-11-30 03:39:43 UTC`.
pub fn utc(rfc3339: &str) -> String {
    // From records a program may have written (progress.json): made safe for a terminal.
    let shown = match rfc3339.get(..19) {
        Some(t) => format!("{} UTC", t.replace('T', " ")),
        None => rfc3339.to_owned(),
    };
    crate::term::sanitize(shown.as_bytes(), 64)
}

/// The time since an RFC 3339 time (zero for one in the future); `None` if it does not parse.
pub fn since(rfc3339: &str, now: SystemTime) -> Option<Duration> {
    let t = humantime::parse_rfc3339(rfc3339).ok()?;
    Some(now.duration_since(t).unwrap_or_default())
}

/// A token count: `950`, `12.3k`, `4.1M`.
pub fn tokens(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        format!("{:.1}M", n as f64 / 1_000_000.0)
    }
}

/// A cost in dollars: `$0.0123`, `$1.27`.
pub fn cost(usd: f64) -> String {
    if usd < 1.0 {
        format!("${usd:.4}")
    } else {
        format!("${usd:.2}")
    }
}

/// Usage so far in a few words: `12.3k tokens · $0.0123 · 3 tool calls`; empty when the
/// agent reported nothing yet.
pub fn so_far(s: &SoFar) -> String {
    let mut parts = Vec::new();
    if let Some(t) = s.total_tokens() {
        parts.push(format!("{} tokens", tokens(t)));
    }
    if let Some(c) = s.cost_usd {
        parts.push(cost(c));
    }
    if let Some(n) = s.tool_calls.filter(|n| *n > 0) {
        parts.push(counted(n, "tool call"));
    }
    parts.join(" · ")
}

/// The last event as a line: `▸ bash cargo test`, `✘ rate limited`, or the text itself.
pub fn last_event(e: &LastEvent) -> String {
    use crate::envelope::EventKind as K;
    let mark = match e.kind {
        K::ToolCall => "▸ ",
        K::ToolResult => "↳ ",
        K::Error => "✘ ",
        K::Stderr => "stderr: ",
        K::Text | K::Info | K::Output => "",
    };
    format!("{mark}{}", e.text)
}

pub use crate::term::counted;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_in_words() {
        let s = Duration::from_secs;
        assert_eq!(duration(Duration::from_millis(850)), "850ms");
        assert_eq!(duration(Duration::from_millis(4250)), "4.2s");
        assert_eq!(duration(s(125)), "2m 05s");
        assert_eq!(duration(s(3720)), "1h 02m");
        assert_eq!(clock(s(7)), "0:07");
        assert_eq!(clock(s(3729)), "1:02:09");
        assert_eq!(age(s(12)), "12s");
        assert_eq!(age(s(300)), "5m");
        assert_eq!(age(s(3 * 3600)), "3h");
        assert_eq!(age(s(50 * 3600)), "2d");
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(cost(0.01234), "$0.0123");
        assert_eq!(cost(1.271), "$1.27");
        assert_eq!(utc("2026-11-30T03:39:43.123Z"), "2026-11-30 03:39:43 UTC");
        assert_eq!(counted(1, "tool call"), "1 tool call");
        assert_eq!(counted(2, "run"), "2 runs");
    }

    #[test]
    fn an_age_says_when_it_changes() {
        let ms = Duration::from_millis;
        assert_eq!(age_changes_in(ms(12_300)), ms(700));
        assert_eq!(age_changes_in(ms(61_000)), ms(59_000));
        assert_eq!(
            age_changes_in(Duration::from_secs(3600)),
            Duration::from_secs(3600)
        );
    }

    #[test]
    fn usage_so_far_in_words() {
        let mut s = SoFar::default();
        assert_eq!(so_far(&s), "");
        s.usage = Some(crate::envelope::Usage {
            input_tokens: Some(1200),
            output_tokens: Some(80),
            ..Default::default()
        });
        s.cost_usd = Some(0.0123);
        s.tool_calls = Some(1);
        assert_eq!(so_far(&s), "1.3k tokens · $0.0123 · 1 tool call");
    }
}
