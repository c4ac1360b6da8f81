//! Authentication of RPCs: when the coordinator has a token, every call of the coordinator service and of
//! server reflection must carry `authorization: Bearer TOKEN` (health checks stay open, for load balancers
//! and orchestrators). A missing or wrong token gets UNAUTHENTICATED. The comparison takes the same time
//! whatever the token's content.

use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The server-side check; `None` lets every call through.
#[derive(Clone, Default)]
pub struct RequireToken(Option<Arc<[u8]>>);

impl RequireToken {
    /// Requires `token` (when set).
    pub fn new(token: Option<&str>) -> RequireToken {
        RequireToken(token.map(|t| Arc::from(format!("Bearer {t}").as_bytes())))
    }
}

impl std::fmt::Debug for RequireToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "RequireToken(set)"
        } else {
            "RequireToken(none)"
        })
    }
}

/// Compares without an early exit on the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Interceptor for RequireToken {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.0 else {
            return Ok(req);
        };
        match req.metadata().get("authorization") {
            Some(given) if same(given.as_bytes(), expected) => Ok(req),
            Some(_) => Err(Status::unauthenticated("wrong token")),
            None => Err(Status::unauthenticated(
                "this coordinator requires a token (--token or NQUEENS_TOKEN)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_passes() {
        let mut check = RequireToken::new(Some("s3cret"));
        let with = |v: Option<&str>| {
            let mut r = Request::new(());
            if let Some(v) = v {
                r.metadata_mut().insert("authorization", v.parse().unwrap());
            }
            r
        };
        assert!(check.call(with(Some("Bearer s3cret"))).is_ok());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret!"),
            Some("s3cret"),
        ] {
            let e = check.call(with(bad)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert!(RequireToken::new(None).call(with(None)).is_ok());
    }
}
