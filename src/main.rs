//! `subpane`: thin entry point. Parses, dispatches, maps errors to documented exit codes.

use clap::Parser;

fn main() {
    let cli = subpane::cli::Cli::parse();
    let code = match subpane::cli::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "subpane: error: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
