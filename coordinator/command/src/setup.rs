//! Process setup shared by both binaries: logging (`RUST_LOG`, text or JSON), the default data directory,
//! and the shutdown signal (SIGTERM or Ctrl-C once: stop gracefully; twice: exit at once).

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Logs to stderr at the level `RUST_LOG` gives (default `default_level`, e.g. `info`).
pub fn init_logging(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Where nqueens keeps its state unless told otherwise: `$NQUEENS_DATA`, else `$XDG_DATA_HOME/nqueens`,
/// else `$HOME/.local/share/nqueens`, else `./nqueens-data`.
pub fn default_data_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("NQUEENS_DATA")
        .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("nqueens")))
        .or_else(|| env("HOME").map(|h| h.join(".local/share/nqueens")))
        .unwrap_or_else(|| PathBuf::from("nqueens-data"))
}

/// Makes what this process creates its owner's alone (umask 077): the store, the ledger, the journal
/// and the credentials hold secrets (the lease-tag key, the credential key).
pub fn private_files() {
    #[cfg(unix)]
    // SAFETY: umask only sets the process's file mode creation mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Creates the data directory `dir` if needed, and makes it its owner's alone (0700), whatever an
/// earlier build left it.
/// An error names the directory, and a directory this user may not change (not its owner: the root of
/// a volume mounted for it, say) says to name one it owns or may create.
pub fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let named = |what: &str, e: std::io::Error| {
        let hint = match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                "; give --data a directory this user owns or may create (a subdirectory of a mounted \
                 volume works)"
            }
            _ => "",
        };
        std::io::Error::new(
            e.kind(),
            format!("cannot {what} {}: {e}{hint}", dir.display()),
        )
    };
    std::fs::create_dir_all(dir).map_err(|e| named("create the data directory", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| named("make its owner's alone (mode 0700) the data directory", e))?;
    }
    Ok(())
}

/// This machine's host name (for worker names).
pub fn host_name() -> String {
    let name = gethostname::gethostname().to_string_lossy().into_owned();
    if name.is_empty() {
        "worker".to_string()
    } else {
        name
    }
}

/// A token cancelled by the first SIGTERM or Ctrl-C; a second one exits the process at once.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        for i in 0.. {
            wait_for_signal().await;
            if i == 0 {
                tracing::info!("shutdown requested; again to exit at once");
                t.cancel();
            } else {
                std::process::exit(130);
            }
        }
    });
    token
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("install a SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_that_cannot_be_made_private_is_named_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let under_a_file = file.join("data");
        let e = private_dir(&under_a_file).unwrap_err().to_string();
        assert!(e.contains(&under_a_file.display().to_string()), "{e}");
        // A directory whose mode nobody may change (a process's, in procfs; as a volume's root owned
        // by another user is to the coordinator's user): named, with the way out.
        #[cfg(target_os = "linux")]
        {
            let e = private_dir(std::path::Path::new("/proc/self"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("/proc/self") && e.contains("give --data"), "{e}");
        }
        private_dir(&dir.path().join("fine")).unwrap();
    }
}
