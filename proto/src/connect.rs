//! Connecting to a coordinator: the address (`http://` or, with TLS, `https://`), the shared bearer token
//! sent with every call, and the CA certificate that TLS connections trust. Shared by workers and by the
//! `nqueens` client commands.

use std::path::PathBuf;
use std::time::Duration;

use crate::coordinator_client::CoordinatorClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Request, Status};

use crate::error::{Error, Result};

/// A client of the coordinator service that sends the token with every call.
pub type Client = CoordinatorClient<InterceptedService<Channel, Bearer>>;

/// The address `nqueens serve` listens on by default, and so where clients look by default.
pub const DEFAULT_COORDINATOR: &str = "http://127.0.0.1:7447";

/// How to reach a coordinator.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// The coordinator's address, e.g. http://10.0.0.1:7447 (https://... with TLS).
    pub coordinator: String,
    /// The shared bearer token, when the coordinator requires one.
    pub token: Option<String>,
    /// PEM file of the CA certificate that the coordinator's TLS certificate must chain to; implies TLS.
    pub tls_ca: Option<PathBuf>,
    /// PEM files of a client certificate and its key, presented to a coordinator that asks for them
    /// (`nqueens tls worker`): the certificate names the worker's identity.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

impl Connection {
    /// A plain connection to `address` (no token, no TLS).
    pub fn new(address: impl Into<String>) -> Connection {
        Connection {
            coordinator: address.into(),
            ..Connection::default()
        }
    }
}

/// Adds `authorization: Bearer TOKEN` to every request.
#[derive(Debug, Clone)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> std::result::Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            req.metadata_mut().insert("authorization", value.clone());
        }
        Ok(req)
    }
}

/// A client that connects lazily and reconnects by itself on every call.
pub fn connect(c: &Connection) -> Result<Client> {
    let address = &c.coordinator;
    let bad = |why: String| Error::Address(address.clone(), why);
    let url = if address.contains("://") {
        address.clone()
    } else if c.tls_ca.is_some() {
        format!("https://{address}")
    } else {
        format!("http://{address}")
    };
    // Only the two schemes a coordinator speaks: `htp://` or `ftp://` would otherwise dial and fail late.
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        let scheme = url.split("://").next().unwrap_or_default();
        return Err(bad(format!(
            "the scheme {scheme:?} is not one a coordinator speaks: use http:// or https:// (with --tls-ca)"
        )));
    }
    let mut endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| bad(e.to_string()))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(60))
        .tcp_nodelay(true);
    if c.tls_ca.is_none() && url.starts_with("https://") {
        // No system roots are compiled in: TLS needs the CA to trust.
        return Err(bad(
            "an https:// address needs --tls-ca PEM, the CA certificate the coordinator's chains to \
             (DIR/ca.pem of `nqueens tls init DIR`)"
                .into(),
        ));
    }
    if let Some(ca) = &c.tls_ca {
        if !url.starts_with("https://") {
            return Err(bad("--tls-ca needs an https:// address".into()));
        }
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| bad(format!("{}: {e}", path.display())))
        };
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)?));
        if let Some((cert, key)) = &c.client_cert {
            tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| bad(e.to_string()))?;
    } else if c.client_cert.is_some() {
        return Err(bad(
            "a client certificate needs TLS: an https:// address and --tls-ca".into(),
        ));
    }
    let token = c
        .token
        .as_deref()
        .map(|t| {
            format!("Bearer {t}")
                .parse::<MetadataValue<Ascii>>()
                .map_err(|_| bad("the token must be printable ASCII".into()))
        })
        .transpose()?;
    Ok(CoordinatorClient::with_interceptor(
        endpoint.connect_lazy(),
        Bearer(token),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scheme other than `http` or `https` is refused before anything dials, naming the two that work.
    #[test]
    fn only_http_and_https_addresses_are_taken() {
        for address in [
            "htp://127.0.0.1:7447",
            "ftp://host:21",
            "grpc://h:1",
            "://h:1",
        ] {
            match connect(&Connection::new(address)) {
                Err(Error::Address(a, why)) => {
                    assert_eq!(a, address);
                    assert!(why.contains("use http:// or https://"), "{why}");
                }
                Ok(_) => panic!("{address} was taken"),
            }
        }
    }
}
