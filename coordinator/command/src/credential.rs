//! `nqueens credential issue|revoke|list`: worker credentials on a running coordinator (operator's
//! token), and `nqueens retry`: a run's failed jobs put back while it serves.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use nqueens_proto as proto;
use serde::Serialize;

use crate::connection::ConnectionArgs;
use crate::control::RunArgs;
use crate::remote::print;
use crate::rpc::{locate, rpc};

/// Arguments of `nqueens credential`.
#[derive(Debug, Args)]
pub struct CredentialArgs {
    #[command(subcommand)]
    pub action: CredentialAction,
}

/// What `nqueens credential` does.
#[derive(Debug, Subcommand)]
pub enum CredentialAction {
    /// Issue a worker credential: a token of its own, by which the coordinator knows that worker for
    /// every check, dispute and quarantine. Example: `nqueens credential issue node-17 --out
    /// node-17.token`, then on node-17 `nqueens worker --token-file node-17.token`.
    Issue {
        /// 1 to 32 letters, digits, - or _ (one per worker or per machine).
        identity: String,
        /// Write the token to this file (created owner-only, 0600) instead of printing it.
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// Revoke a worker credential: every call made with it is refused from now on, mid-run included.
    Revoke {
        identity: String,
        #[command(flatten)]
        connection: ConnectionArgs,
    },
    /// List the identities issued, and which are revoked.
    List {
        #[command(flatten)]
        connection: ConnectionArgs,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// One identity as `credential list --json` prints it.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    identity: &'a str,
    issued_unix: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked_unix: Option<u64>,
}

/// Runs `nqueens credential`.
pub fn run(args: &CredentialArgs) -> anyhow::Result<()> {
    let connection = match &args.action {
        CredentialAction::Issue { connection, .. }
        | CredentialAction::Revoke { connection, .. }
        | CredentialAction::List { connection, .. } => connection,
    };
    super::runtime()?
        .block_on(async {
            let mut client = connection.connect()?;
            match &args.action {
                CredentialAction::Issue { identity, out, .. } => {
                    let req = proto::IssueCredentialRequest {
                        identity: identity.clone(),
                    };
                    let token = client.issue_credential(req).await.map_err(rpc)?;
                    let token = token.into_inner().token;
                    match out {
                        Some(path) => {
                            write_private(path, &format!("{token}\n"))?;
                            eprintln!("credential of {identity} written to {}", path.display());
                        }
                        None => println!("{token}"),
                    }
                }
                CredentialAction::Revoke { identity, .. } => {
                    let req = proto::RevokeCredentialRequest {
                        identity: identity.clone(),
                    };
                    let reply = client.revoke_credential(req).await.map_err(rpc)?;
                    match reply.into_inner().revoked {
                        true => println!("revoked {identity}: its calls are refused from now on"),
                        false => println!("{identity} was revoked already"),
                    }
                }
                CredentialAction::List { json, .. } => {
                    let req = proto::ListCredentialsRequest {};
                    let list = client.list_credentials(req).await.map_err(rpc)?;
                    for c in list.into_inner().credentials {
                        if *json {
                            let line = Listed {
                                identity: &c.identity,
                                issued_unix: c.issued_unix,
                                revoked_unix: c.revoked_unix,
                            };
                            println!("{}", serde_json::to_string(&line)?);
                        } else {
                            let state = if c.revoked_unix.is_some() {
                                "revoked"
                            } else {
                                "valid"
                            };
                            println!("{:<32}  {state}", c.identity);
                        }
                    }
                }
            }
            anyhow::Ok(())
        })
        .map_err(|e| locate(e, &connection.coordinator))
}

/// Writes `text` to a new file at `path`, readable by its owner alone.
fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    Ok(())
}

/// Runs `nqueens retry`: puts a run's failed jobs back to pending, then prints the run.
pub fn retry(args: &RunArgs) -> anyhow::Result<()> {
    let reply = super::runtime()?
        .block_on(async {
            let mut client = args.connection.connect()?;
            let req = proto::RunControlRequest {
                run: args.run.clone(),
            };
            anyhow::Ok(client.retry_failed(req).await.map_err(rpc)?.into_inner())
        })
        .map_err(|e| locate(e, &args.connection.coordinator))?;
    eprintln!("{} failed jobs put back to pending", reply.retried);
    match reply.run {
        Some(run) => print(&run.into(), args.json),
        None => Ok(()),
    }
}
