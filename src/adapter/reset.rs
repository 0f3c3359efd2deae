//! When a usage limit resets, from what a CLI prints: a clock time in the local time of the
//! machine it runs on (Codex: "Try again at 11:22 PM.", or with the date when the reset is
//! not today: "Try again at Dec 4th, 2026 12:38 AM."), made an RFC 3339 instant.

use std::time::{SystemTime, UNIX_EPOCH};

/// The moment `text` names after "try again at" (any case), in the local time: a date and
/// a clock time (`Dec 4th, 2026 12:38 AM`), or a clock time alone, then the next moment from
/// now that the local clock reads it (`H:MM AM`, `H:MM PM`, 24-hour `HH:MM`); `None` when it
/// names none. The end of the minute named: the CLI prints the reset to the minute, and a
/// retry at the minute's start could come before it (and meet the limit again).
pub fn retry_at_clock_time(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find("try again at")? + "try again at".len();
    let after = &lower[at..];
    let at = match dated(after) {
        Some((y, mo, d, rest)) => {
            let (h, m) = clock_time(rest)?;
            local_instant(y, mo, d, h, m)?
        }
        None => {
            let (h, m) = clock_time(after)?;
            let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs() as i64;
            next_at(now, crate::fresh::local_offset(now)?, h, m)
        }
    };
    let t = UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(at + 60).ok()?);
    Some(humantime::format_rfc3339_seconds(t).to_string())
}

/// `(year, month 1–12, day, the rest)` of a date that begins `s` as Codex prints one:
/// `dec 4th, 2026 …` (lowercased).
fn dated(s: &str) -> Option<(i32, u32, u32, &str)> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let s = s.trim_start();
    let month = MONTHS.iter().position(|m| s.starts_with(m))? as u32 + 1;
    let s = s
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .trim_start();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let day: u32 = s[..digits].parse().ok()?;
    let s = s[digits..].trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let s = s.strip_prefix(',')?.trim_start();
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let year: i32 = s[..digits].parse().ok()?;
    (1..=31)
        .contains(&day)
        .then_some((year, month, day, &s[digits..]))
}

/// The instant whose local clock reads `y-mo-d h:m` (the zone's own offset on that day).
fn local_instant(y: i32, mo: u32, d: u32, h: u32, m: u32) -> Option<i64> {
    // SAFETY: zeroed is a valid `tm`; mktime reads and normalises only the `tm` given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = y - 1900;
    tm.tm_mon = mo as i32 - 1;
    tm.tm_mday = d as i32;
    tm.tm_hour = h as i32;
    tm.tm_min = m as i32;
    tm.tm_isdst = -1;
    let t = unsafe { libc::mktime(&mut tm) };
    (t != -1).then_some(t)
}

/// `(hour 0–23, minute)` of the first clock time in `s` (`11:22 pm`, `9:05am`, `23:10`).
fn clock_time(s: &str) -> Option<(u32, u32)> {
    let s = s.trim_start();
    let colon = s.find(':')?;
    let h: u32 = s[..colon].trim().parse().ok()?;
    let rest = &s[colon + 1..];
    let m: u32 = rest.get(..2)?.parse().ok()?;
    let after = rest[2..].trim_start();
    let h = match (after.starts_with("am"), after.starts_with("pm")) {
        (true, _) if (1..=12).contains(&h) => h % 12,
        (_, true) if (1..=12).contains(&h) => h % 12 + 12,
        (false, false) if h < 24 => h,
        _ => return None,
    };
    (m < 60).then_some((h, m))
}

/// The first instant at or after a minute ago whose local clock (`offset` seconds east of
/// UTC) reads `h:m`: today's, or tomorrow's once today's has passed.
fn next_at(now: i64, offset: i64, h: u32, m: u32) -> i64 {
    let local = now + offset;
    let midnight = local - local.rem_euclid(86_400);
    let mut at = midnight + i64::from(h) * 3600 + i64::from(m) * 60;
    // The CLI prints to the minute: a time in the minute just past is still this one.
    if at < local - 60 {
        at += 86_400;
    }
    at - offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_times_in_either_form() {
        assert_eq!(clock_time(" 11:22 pm."), Some((23, 22)));
        assert_eq!(clock_time("12:05 am"), Some((0, 5)));
        assert_eq!(clock_time("12:30 pm"), Some((12, 30)));
        assert_eq!(clock_time("9:05am"), Some((9, 5)));
        assert_eq!(clock_time("23:10"), Some((23, 10)));
        assert_eq!(clock_time("13:10 pm"), None);
        assert_eq!(clock_time("soon"), None);
    }

    #[test]
    fn the_next_such_moment_in_local_time() {
        // 2026-12-03 10:28:07 UTC.
        let now = 1_796_293_687;
        // UTC: 11:28 today.
        assert_eq!(next_at(now, 0, 11, 28), 1_796_297_280);
        // UTC: 10:00 has passed today: tomorrow's.
        assert_eq!(next_at(now, 0, 10, 0), 1_796_293_687 - 1687 + 86_400);
        // This minute still counts.
        assert_eq!(next_at(now, 0, 10, 28), now - 7);
        // UTC-5: it is 05:28 there; 11:28 PM there is 04:28 UTC tomorrow.
        assert_eq!(
            next_at(now, -5 * 3600, 23, 28),
            1_796_293_687 - 37_687 + 86_400 + 4 * 3600 + 28 * 60
        );
        assert!(retry_at_clock_time("nothing here").is_none());
        // Another day's reset comes with its date.
        assert_eq!(
            dated("dec 4th, 2026 12:38 am."),
            Some((2026, 12, 4, " 12:38 am."))
        );
        assert_eq!(
            dated("jan 21st, 2027 9:05 pm"),
            Some((2027, 1, 21, " 9:05 pm"))
        );
        assert_eq!(dated("12:38 am"), None);
        assert_eq!(dated("dec 44th, 2026 1:00 am"), None);
        let t = retry_at_clock_time("You’ve hit your usage limit. Try again at 11:28 AM.").unwrap();
        // The end of the minute named.
        assert!(t.ends_with(":29:00Z"), "{t}");
    }

    /// A dated reset is that local moment, whatever the zone (read back with localtime).
    #[test]
    fn a_dated_reset_is_that_local_moment() {
        let t = retry_at_clock_time(
            "You’ve hit your usage limit. Try again at Dec 4th, 2026 12:38 AM.",
        )
        .unwrap();
        let at = humantime::parse_rfc3339(&t).unwrap();
        let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
        let offset = crate::fresh::local_offset(secs).unwrap();
        let local = secs + offset;
        // 2026-12-04 00:38 local, to its end: days since the epoch, and the minute of the day.
        assert_eq!(local.div_euclid(86_400), 20_791, "{t}");
        assert_eq!(local.rem_euclid(86_400), 39 * 60, "{t}");
    }
}
