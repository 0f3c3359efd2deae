//! Splitting a byte stream into lines without ever buffering more than the bound.

/// Lines longer than this are dropped and counted, never buffered whole.
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// One piece of the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// A complete line, without `\n` (and a trailing `\r`).
    Line(&'a [u8]),
    /// A line over the bound; only its size is known.
    Oversized { bytes: u64 },
}

/// Incremental splitter. Lines wholly inside a chunk are passed without copying.
#[derive(Debug)]
pub struct LineSplitter {
    partial: Vec<u8>,
    /// Bytes of an oversized line seen so far (we are skipping to its end).
    discarding: Option<u64>,
    max: usize,
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        Self {
            partial: Vec::new(),
            discarding: None,
            max,
        }
    }

    /// Feeds a chunk; `f` gets every piece it completes.
    pub fn feed(&mut self, chunk: &[u8], f: &mut dyn FnMut(Piece<'_>)) {
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', chunk) {
            let seg = &chunk[start..nl];
            start = nl + 1;
            if let Some(n) = self.discarding.take() {
                f(Piece::Oversized {
                    bytes: n + seg.len() as u64,
                });
            } else if !self.partial.is_empty() {
                if self.partial.len() + seg.len() > self.max {
                    f(Piece::Oversized {
                        bytes: (self.partial.len() + seg.len()) as u64,
                    });
                } else {
                    self.partial.extend_from_slice(seg);
                    f(Piece::Line(trim_cr(&self.partial)));
                }
                self.reset_partial();
            } else if seg.len() > self.max {
                f(Piece::Oversized {
                    bytes: seg.len() as u64,
                });
            } else {
                f(Piece::Line(trim_cr(seg)));
            }
        }
        let rest = &chunk[start..];
        if rest.is_empty() {
            return;
        }
        if let Some(n) = self.discarding.as_mut() {
            *n += rest.len() as u64;
        } else if self.partial.len() + rest.len() > self.max {
            self.discarding = Some((self.partial.len() + rest.len()) as u64);
            self.reset_partial();
        } else {
            self.partial.extend_from_slice(rest);
        }
    }

    /// End of stream: a last line without `\n` still counts.
    pub fn finish(&mut self, f: &mut dyn FnMut(Piece<'_>)) {
        if let Some(n) = self.discarding.take() {
            f(Piece::Oversized { bytes: n });
        } else if !self.partial.is_empty() {
            f(Piece::Line(trim_cr(&self.partial)));
            self.reset_partial();
        }
    }

    fn reset_partial(&mut self) {
        self.partial.clear();
        if self.partial.capacity() > 1024 * 1024 {
            self.partial = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]], max: usize) -> Vec<String> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        let mut f = |p: Piece<'_>| {
            out.push(match p {
                Piece::Line(l) => String::from_utf8_lossy(l).into_owned(),
                Piece::Oversized { bytes } => format!("<{bytes}>"),
            })
        };
        for c in chunks {
            s.feed(c, &mut f);
        }
        s.finish(&mut f);
        out
    }

    #[test]
    fn joins_lines_across_chunks() {
        assert_eq!(
            split(&[b"ab", b"c\nd", b"e\r\n", b"f"], 100),
            ["abc", "de", "f"]
        );
        assert_eq!(split(&[b"\n\n"], 100), ["", ""]);
    }

    #[test]
    fn drops_oversized_lines_without_buffering() {
        assert_eq!(split(&[b"12345678\nok\n"], 4), ["<8>", "ok"]);
        assert_eq!(split(&[b"12", b"345", b"678", b"9\nok"], 4), ["<9>", "ok"]);
        assert_eq!(split(&[b"123", b"456"], 4), ["<6>"]);
        let mut s = LineSplitter::new(4);
        s.feed(b"1234567890", &mut |_| {});
        assert!(s.partial.capacity() < 16, "an oversized line is not kept");
    }
}
