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
    /// The bearer token, when the coordinator requires one: the operator's, a worker credential
    /// (`nqueens credential issue`) or the shared workers' token. Prefer NQUEENS_TOKEN or --token-file:
    /// a token on the command line shows in `ps`.
    #[arg(long, env = "NQUEENS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the token (one line; a final newline is dropped), e.g. as `nqueens credential
    /// issue --out` writes it.
    #[arg(
        long,
        env = "NQUEENS_TOKEN_FILE",
        hide_env_values = true,
        value_name = "PATH",
        conflicts_with = "token",
        value_parser = token_file
    )]
    pub token_file: Option<String>,
    /// PEM file of the CA certificate that the coordinator's TLS certificate must chain to (as written
    /// by `nqueens tls init`); implies TLS.
    #[arg(
        long,
        env = "NQUEENS_TLS_CA",
        hide_env_values = true,
        value_name = "PEM"
    )]
    pub tls_ca: Option<PathBuf>,
    /// PEM file of this worker's client certificate (`nqueens tls worker DIR NAME` writes one), for a
    /// coordinator that asks for them (`serve --tls-client-ca`): it names the worker's identity, in place
    /// of a credential token. Needs --client-key and --tls-ca.
    #[arg(
        long,
        env = "NQUEENS_CLIENT_CERT",
        hide_env_values = true,
        value_name = "PEM",
        requires_all = ["client_key", "tls_ca"]
    )]
    pub client_cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    #[arg(
        long,
        env = "NQUEENS_CLIENT_KEY",
        hide_env_values = true,
        value_name = "PEM",
        requires = "client_cert"
    )]
    pub client_key: Option<PathBuf>,
}

impl ConnectionArgs {
    /// The connection these flags describe.
    pub fn connection(&self) -> Connection {
        Connection {
            coordinator: self.coordinator.clone(),
            token: self.token.clone().or_else(|| self.token_file.clone()),
            tls_ca: self.tls_ca.clone(),
            client_cert: self.client_cert.clone().zip(self.client_key.clone()),
        }
    }

    /// A lazily connecting client of the coordinator.
    pub fn connect(&self) -> Result<Client, nqueens_proto::Error> {
        nqueens_proto::connect(&self.connection())
    }
}

/// Reads a token from the file at `path` (a `--token-file` flag): its one line, without the final
/// newline, checked as a token ([`nqueens_proto::valid_token`]).
pub fn token_file(path: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let token = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if !nqueens_proto::valid_token(token) {
        return Err(format!(
            "{path} must hold one token: 1 to {} characters of printable ASCII on one line",
            nqueens_proto::MAX_TOKEN_LEN
        ));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_gives_its_line_without_the_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        for (text, token) in [
            ("abc\n", Some("abc")),
            ("abc\r\n", Some("abc")),
            ("abc", Some("abc")),
        ] {
            std::fs::write(&path, text).unwrap();
            assert_eq!(token_file(path.to_str().unwrap()).ok().as_deref(), token);
        }
        for bad in ["", "\n", "a\nb\n", "abc\n\n", " abc\n"] {
            std::fs::write(&path, bad).unwrap();
            assert!(token_file(path.to_str().unwrap()).is_err(), "{bad:?}");
        }
        assert!(token_file(dir.path().join("none").to_str().unwrap()).is_err());
    }
}
