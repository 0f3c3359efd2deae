//! Sizes on the command line: `512K`, `100M`, `2G`, `1T` (binary units; `MiB` and `MB` are
//! read alike, as most tools print them).

/// Parses a size given to `flag` into bytes. A bare number is bytes; zero is refused.
pub fn parse_size(flag: &str, input: &str) -> Result<u64, String> {
    let err = |why: &str| {
        format!(
            "invalid size `{input}` for {flag}: {why}; use a number with a unit, like 512M, 2G or 1T"
        )
    };
    let t = input.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(err("it does not start with a number"));
    }
    let n: u64 = t[..digits]
        .parse()
        .map_err(|_| err("the number is too large"))?;
    let unit = t[digits..].trim().to_ascii_uppercase();
    let shift = match unit.trim_end_matches('B').trim_end_matches('I') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(err("the unit is not K, M, G or T")),
    };
    if unit.ends_with('I') {
        return Err(err("the unit is not K, M, G or T"));
    }
    let bytes = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| err("it is too large"))?;
    if bytes == 0 {
        return Err(err("it must be greater than zero"));
    }
    Ok(bytes)
}

/// A size as people read it: `2G`, `512M`, `1500K`, `100` (bytes), exact.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_binary_and_spelt_as_tools_print_them() {
        for (s, n) in [
            ("100", 100),
            ("512K", 512 << 10),
            ("512k", 512 << 10),
            ("100M", 100 << 20),
            ("100MB", 100 << 20),
            ("100MiB", 100 << 20),
            ("2G", 2 << 30),
            (" 1T ", 1 << 40),
        ] {
            assert_eq!(parse_size("--max-tmp", s), Ok(n), "{s}");
        }
        for (s, says) in [
            ("", "does not start"),
            ("G", "does not start"),
            ("0", "greater than zero"),
            ("1.5G", "unit"),
            ("10X", "unit"),
            ("10I", "unit"),
            ("99999999999T", "too large"),
        ] {
            let e = parse_size("--max-tmp", s).unwrap_err();
            assert!(e.contains(says) && e.contains("--max-tmp"), "{s}: {e}");
        }
    }

    #[test]
    fn sizes_print_exactly() {
        assert_eq!(format_size(2 << 30), "2G");
        assert_eq!(format_size(1536 << 20), "1536M");
        assert_eq!(format_size(100), "100");
    }
}
