//! The terminal while `top` runs: raw mode and the alternate screen, given back on every way
//! out (a return, an error, a panic: `Drop` and a panic hook; Ctrl-C, SIGTERM and SIGHUP end
//! the loop, see `mod.rs`), and for the time of an attach.

use std::io::{Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};

/// The terminal in `top`'s hands.
pub struct Screen {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

/// Whether `top` holds the terminal now (raw mode, alternate screen).
static TAKEN: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back as it was: cooked mode, the main screen, the cursor shown. Once:
/// leaving the alternate screen twice would move the cursor back over what was written
/// since (a panic's message).
pub fn restore() {
    if !TAKEN.swap(false, Ordering::SeqCst) {
        return;
    }
    let _ = terminal::disable_raw_mode();
    let mut out = std::io::stdout();
    let _ = execute!(out, terminal::LeaveAlternateScreen, cursor::Show);
    let _ = out.flush();
}

impl Screen {
    /// Takes the terminal (raw mode, alternate screen). A panic from now on gives it back
    /// before its message is printed.
    pub fn enter() -> std::io::Result<Self> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        let mut s = Self {
            terminal: Terminal::new(CrosstermBackend::new(std::io::stdout()))?,
        };
        s.resume()?;
        Ok(s)
    }

    /// Gives the terminal back for a while (an attach).
    pub fn leave(&mut self) {
        restore();
    }

    /// Takes the terminal again, and draws everything anew on the next draw.
    pub fn resume(&mut self) -> std::io::Result<()> {
        terminal::enable_raw_mode()?;
        TAKEN.store(true, Ordering::SeqCst);
        execute!(
            self.terminal.backend_mut(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        self.terminal.clear()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}
