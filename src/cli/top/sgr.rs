//! A line of a program's output, its plain SGR colour kept ([`crate::term::sanitize_lines_keep_sgr`]),
//! as ratatui spans: the sequences become styles and are never written to the terminal as
//! they are. Without colour (`NO_COLOR`) they are dropped.
//!
//! Common pitfalls:
//! * The text reaching here holds no other escape (the sanitizer showed those as `^[`); an
//!   ESC that does not begin an SGR is still shown as `^[`, never written.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::term::sgr_len;

/// `text` as a line in `base`, its SGR sequences turned into styles when `color`.
pub fn line(text: &str, color: bool, base: Style) -> Line<'static> {
    let mut spans = Vec::new();
    let mut style = base;
    let mut rest = text;
    while let Some(i) = rest.find('\x1b') {
        if i > 0 {
            spans.push(Span::styled(rest[..i].to_owned(), style));
        }
        let at = &rest[i..];
        match sgr_len(at) {
            Some(n) => {
                if color {
                    style = apply(style, base, &at[2..n - 1]);
                }
                rest = &at[n..];
            }
            None => {
                spans.push(Span::styled("^[", style));
                rest = &at[1..];
            }
        }
    }
    if !rest.is_empty() {
        spans.push(Span::styled(rest.to_owned(), style));
    }
    Line::from(spans)
}

/// The eight colours of SGR 30–37 (and, bright, 90–97).
const BASIC: [Color; 8] = [
    Color::Black,
    Color::Red,
    Color::Green,
    Color::Yellow,
    Color::Blue,
    Color::Magenta,
    Color::Cyan,
    Color::Gray,
];
const BRIGHT: [Color; 8] = [
    Color::DarkGray,
    Color::LightRed,
    Color::LightGreen,
    Color::LightYellow,
    Color::LightBlue,
    Color::LightMagenta,
    Color::LightCyan,
    Color::White,
];

/// `style` after the SGR parameters `params` (`1;31`, `38;5;208`, empty for a reset); 0
/// goes back to `base`. Parameters it does not know change nothing.
fn apply(mut style: Style, base: Style, params: &str) -> Style {
    let mut ps = params.split(';').map(|p| p.parse::<u32>().unwrap_or(0));
    while let Some(p) = ps.next() {
        style = match p {
            0 => base,
            1 => style.add_modifier(Modifier::BOLD),
            2 => style.add_modifier(Modifier::DIM),
            3 => style.add_modifier(Modifier::ITALIC),
            4 => style.add_modifier(Modifier::UNDERLINED),
            7 => style.add_modifier(Modifier::REVERSED),
            9 => style.add_modifier(Modifier::CROSSED_OUT),
            22 => style.remove_modifier(Modifier::BOLD | Modifier::DIM),
            23 => style.remove_modifier(Modifier::ITALIC),
            24 => style.remove_modifier(Modifier::UNDERLINED),
            27 => style.remove_modifier(Modifier::REVERSED),
            29 => style.remove_modifier(Modifier::CROSSED_OUT),
            30..=37 => style.fg(BASIC[(p - 30) as usize]),
            90..=97 => style.fg(BRIGHT[(p - 90) as usize]),
            40..=47 => style.bg(BASIC[(p - 40) as usize]),
            100..=107 => style.bg(BRIGHT[(p - 100) as usize]),
            39 => Style {
                fg: base.fg,
                ..style
            },
            49 => Style {
                bg: base.bg,
                ..style
            },
            38 | 48 => match extended(&mut ps) {
                Some(c) if p == 38 => style.fg(c),
                Some(c) => style.bg(c),
                None => style,
            },
            _ => style,
        };
    }
    style
}

/// The colour after a 38 or 48: `5;N` (256 colours) or `2;R;G;B`.
fn extended(ps: &mut impl Iterator<Item = u32>) -> Option<Color> {
    let byte = |v: Option<u32>| v.and_then(|v| u8::try_from(v).ok());
    match ps.next()? {
        5 => byte(ps.next()).map(Color::Indexed),
        2 => {
            let (r, g, b) = (byte(ps.next()), byte(ps.next()), byte(ps.next()));
            Some(Color::Rgb(r?, g?, b?))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(l: &Line) -> Vec<(String, Style)> {
        l.spans
            .iter()
            .map(|s| (s.content.to_string(), s.style))
            .collect()
    }

    #[test]
    fn sgr_becomes_styles_and_never_text() {
        let base = Style::default();
        let l = line(
            "\x1b[1;31merror\x1b[0m: x \x1b[38;5;208mo\x1b[39m \x1b[48;2;1;2;3mb\x1b[m.",
            true,
            base,
        );
        assert_eq!(
            spans(&l),
            [
                (
                    "error".into(),
                    base.fg(Color::Red).add_modifier(Modifier::BOLD)
                ),
                (": x ".into(), base),
                ("o".into(), base.fg(Color::Indexed(208))),
                (" ".into(), base),
                ("b".into(), base.bg(Color::Rgb(1, 2, 3))),
                (".".into(), base),
            ]
        );
        // Without colour the sequences are dropped; the text is the same.
        let plain = line("\x1b[32mok\x1b[0m done", false, base);
        assert_eq!(spans(&plain), [("ok".into(), base), (" done".into(), base)]);
        // A reset goes back to the line's own style (stderr's yellow).
        let y = Style::default().fg(Color::Yellow);
        let l = line("a\x1b[34mb\x1b[0mc", true, y);
        assert_eq!(
            spans(&l),
            [
                ("a".into(), y),
                ("b".into(), Style::default().fg(Color::Blue)),
                ("c".into(), y)
            ]
        );
        // An ESC that begins no SGR is text, never written.
        let l = line("x\x1b[2Jy", true, base);
        assert_eq!(
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>(),
            "x^[[2Jy"
        );
    }
}
