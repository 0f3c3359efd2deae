//! `subpane`: thin entry point. Parses, dispatches, maps errors to documented exit codes.

use clap::Parser;

fn main() {
    let cli = subpane::cli::Cli::parse();
    let code = match subpane::cli::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            e.report();
            e.code
        }
    };
    std::process::exit(code);
}
