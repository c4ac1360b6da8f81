//! `nqueens`: parse the command line, run the command, turn errors into one line and an exit code.

use clap::Parser;
use nqueens_cli::{self as cli, Cli};

// The coordinator allocates many small buffers on many threads (gRPC frames, store records); mimalloc
// serves them with less contention than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    if cli.prints_for_a_pipe() {
        // `nqueens status | head`: end quietly when the reader goes away, as other command-line tools
        // do, instead of panicking on the next print. (Sockets are unaffected: Rust sends with
        // MSG_NOSIGNAL.)
        // SAFETY: called before any thread starts; SIG_DFL is a valid disposition for SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    if let Err(e) = cli::run(cli) {
        eprintln!("{}", cli::message(&e));
        std::process::exit(cli::exit_code(&e));
    }
}
