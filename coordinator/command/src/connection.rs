//! The flags every client command shares to reach a coordinator (address, token, CA), turned into the
//! wire crate's [`Connection`].

use std::path::PathBuf;

use clap::Args;
use nqueens_proto::{Client, Connection, DEFAULT_COORDINATOR};

/// How to reach a coordinator (command-line flags shared by every client).
#[derive(Debug, Clone, Args)]
pub struct ConnectionArgs {
    /// The coordinator's address, e.g. http://10.0.0.1:7447 (https://... with TLS); by default the
    /// address `nqueens serve` listens on by default.
    #[arg(
        long,
        env = "NQUEENS_COORDINATOR",
        hide_env_values = true,
        default_value = DEFAULT_COORDINATOR
    )]
    pub coordinator: String,
    /// The shared bearer token, when the coordinator requires one.
    #[arg(long, env = "NQUEENS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// PEM file of the CA certificate that the coordinator's TLS certificate must chain to (as written
    /// by `nqueens tls init`); implies TLS.
    #[arg(
        long,
        env = "NQUEENS_TLS_CA",
        hide_env_values = true,
        value_name = "PEM"
    )]
    pub tls_ca: Option<PathBuf>,
}

impl ConnectionArgs {
    /// The connection these flags describe.
    pub fn connection(&self) -> Connection {
        Connection {
            coordinator: self.coordinator.clone(),
            token: self.token.clone(),
            tls_ca: self.tls_ca.clone(),
        }
    }

    /// A lazily connecting client of the coordinator.
    pub fn connect(&self) -> Result<Client, nqueens_proto::Error> {
        nqueens_proto::connect(&self.connection())
    }
}
