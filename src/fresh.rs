//! What the contract layer ([`crate::spec`], [`crate::envelope`]) may not make itself: the
//! time now and random bytes. Those two modules are pure (a test reads their source for IO);
//! the values they need come from here, through their callers.

use crate::spec::RunId;

/// The time now as RFC 3339 UTC with milliseconds, as every record writes it.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Seconds east of UTC of this machine's local time at `now` (the `TZ` and zone files the
/// CLIs use too).
pub fn local_offset(now: i64) -> Option<i64> {
    local_tm(now).map(|tm| tm.tm_gmtoff)
}

/// `t` on this machine's clock, for people: `14:05` today, `Dec 4 14:05` on another day.
pub fn local_hh_mm(t: std::time::SystemTime) -> String {
    let secs = |t: std::time::SystemTime| match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let (Some(at), Some(now)) = (
        local_tm(secs(t)),
        local_tm(secs(std::time::SystemTime::now())),
    ) else {
        return humantime::format_rfc3339_seconds(t).to_string();
    };
    let clock = format!("{:02}:{:02}", at.tm_hour, at.tm_min);
    if (at.tm_year, at.tm_yday) == (now.tm_year, now.tm_yday) {
        return clock;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.get(at.tm_mon as usize).copied().unwrap_or("?");
    format!("{month} {} {clock}", at.tm_mday)
}

/// For people: `waiting until 14:05 (usage limit)`, the time in this machine's zone.
pub fn waiting_words(s: &crate::spec::StartAt) -> String {
    let when = s.instant().map(local_hh_mm).unwrap_or_else(|| s.at.clone());
    format!("waiting until {when} ({})", s.why)
}

/// The local broken-down time of `secs` since the epoch (the `TZ` and zone files).
fn local_tm(secs: i64) -> Option<libc::tm> {
    let t: libc::time_t = secs;
    // SAFETY: localtime_r writes only the `tm` given; zeroed is a valid `tm`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::localtime_r(&t, &mut tm) };
    (!r.is_null()).then_some(tm)
}

/// A fresh run id: the time now to the second and 6 random hex digits (see [`RunId::at`]).
pub fn run_id() -> RunId {
    let mut rnd = [0u8; 3];
    random_bytes(&mut rnd);
    RunId::at(std::time::SystemTime::now(), rnd)
}

/// 16 random hex digits: the id of a cancel request.
pub fn request_id() -> String {
    let mut rnd = [0u8; 8];
    random_bytes(&mut rnd);
    rnd.iter().map(|b| format!("{b:02x}")).collect()
}

/// Random bytes for ids (run ids, cancel requests).
pub fn random_bytes(buf: &mut [u8]) {
    use std::io::Read;
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok();
    if !ok {
        // Fall back to a hash of time and pid: ids only need to be unlikely to collide, and
        // creation of the run directory is exclusive anyway.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let v = h.finish().to_le_bytes();
        for (d, s) in buf.iter_mut().zip(v.iter()) {
            *d = *s;
        }
    }
}

#[cfg(test)]
mod tests {
    /// The contract layer reads no file, clock, environment or randomness and starts no
    /// process: what it needs is handed in. Its source is read for the calls that would.
    #[test]
    fn the_contract_layer_does_no_io() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let forbidden = [
            "std::fs",
            "fs::",
            "File::",
            "std::io::Read",
            "std::io::Write",
            "read_to_string",
            "SystemTime::now",
            "Instant::now",
            "std::env::",
            "env::var",
            "Command::new",
            "TcpStream",
            "TcpListener",
            "UdpSocket",
            "UnixStream",
            "std::process::",
            "/dev/",
            "/proc/",
        ];
        let mut seen = Vec::new();
        for dir in ["spec", "envelope"] {
            let mut stack = vec![root.join(dir)];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).unwrap() {
                    let p = e.unwrap().path();
                    if p.is_dir() {
                        stack.push(p);
                        continue;
                    }
                    let text = std::fs::read_to_string(&p).unwrap();
                    // Unit tests may make files to check what they parse.
                    let code = text.split("#[cfg(test)]").next().unwrap_or("");
                    for (n, line) in code.lines().enumerate() {
                        let line = line.split("//").next().unwrap_or("");
                        for f in forbidden {
                            if line.contains(f) {
                                seen.push(format!("{}:{}: {f}", p.display(), n + 1));
                            }
                        }
                    }
                }
            }
        }
        assert!(
            seen.is_empty(),
            "IO in the contract layer:\n{}",
            seen.join("\n")
        );
    }
}
