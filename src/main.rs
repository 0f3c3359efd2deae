//! `subpane`: thin entry point. Parses, dispatches, maps errors to documented exit codes.

fn main() {
    // The worker starts once per attempt, hundreds at a time under `fanout`: it skips clap,
    // whose command tree costs about a millisecond to build.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let [_, verb, dir] = args.as_slice()
        && verb == subpane::procs::WORKER_ARG
    {
        std::process::exit(subpane::worker::main(std::path::Path::new(dir)));
    }
    subpane::cli::complete_if_asked();
    let cli = subpane::cli::parse(args);
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
