//! Authentication of RPCs: when the coordinator has a token, every call of the coordinator service and of
//! server reflection must carry `authorization: Bearer TOKEN` (health checks stay open, for load balancers
//! and orchestrators). A missing or wrong token gets UNAUTHENTICATED. The comparison takes the same time
//! whatever the token's content. Two tokens make two roles: the operator's token does everything; a worker
//! token (given to the machines of a cluster) leases, reports and reads, but cannot create or steer runs.

use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

/// What the token of a call lets it do; the check puts it in every request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Every call: the operator's token, or a coordinator without tokens.
    Operator,
    /// Leasing, reporting and reading: a worker token.
    Worker,
}

/// The server-side check; with no token at all, every call passes as the operator's.
#[derive(Clone, Default)]
pub struct RequireToken {
    operator: Option<Arc<[u8]>>,
    worker: Option<Arc<[u8]>>,
}

impl RequireToken {
    /// Requires `operator` or `worker` (when either is set). A worker token alone leaves no call able to
    /// create or steer runs.
    pub fn new(operator: Option<&str>, worker: Option<&str>) -> RequireToken {
        let bearer = |t: &str| Arc::from(format!("Bearer {t}").as_bytes());
        RequireToken {
            operator: operator.map(bearer),
            worker: worker.map(bearer),
        }
    }

    /// The role `given` (an `authorization` value) proves, if any. Both tokens are always compared.
    fn role(&self, given: &[u8]) -> Option<Role> {
        let matches = |t: &Option<Arc<[u8]>>| t.as_deref().is_some_and(|t| same(given, t));
        let (operator, worker) = (matches(&self.operator), matches(&self.worker));
        if operator {
            Some(Role::Operator)
        } else if worker {
            Some(Role::Worker)
        } else {
            None
        }
    }
}

impl std::fmt::Debug for RequireToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequireToken")
            .field("operator", &self.operator.is_some())
            .field("worker", &self.worker.is_some())
            .finish()
    }
}

/// Compares without an early exit on the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Interceptor for RequireToken {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let role = if self.operator.is_none() && self.worker.is_none() {
            Role::Operator
        } else {
            match req.metadata().get("authorization") {
                Some(given) => self
                    .role(given.as_bytes())
                    .ok_or_else(|| Status::unauthenticated("wrong token"))?,
                None => {
                    return Err(Status::unauthenticated(
                        "this coordinator requires a token (--token or NQUEENS_TOKEN)",
                    ))
                }
            }
        };
        req.extensions_mut().insert(role);
        Ok(req)
    }
}

/// Refuses, with PERMISSION_DENIED, a call that was not made with the operator's token (a request that
/// did not pass the check has no role, and is refused too).
pub fn require_operator<T>(req: &Request<T>) -> Result<(), Status> {
    match req.extensions().get::<Role>() {
        Some(Role::Operator) => Ok(()),
        _ => Err(Status::permission_denied(
            "this call creates or steers runs and needs the operator's token (serve --token); \
             the token given is a worker token (serve --worker-token)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(v: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(v) = v {
            r.metadata_mut().insert("authorization", v.parse().unwrap());
        }
        r
    }

    #[test]
    fn only_the_exact_token_passes() {
        let mut check = RequireToken::new(Some("s3cret"), None);
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
        assert!(RequireToken::new(None, None).call(with(None)).is_ok());
    }

    /// Each token proves its own role and nothing more; only the operator's passes `require_operator`,
    /// and a request that never met the check passes nothing.
    #[test]
    fn each_token_proves_its_role() {
        let role = |check: &mut RequireToken, v: &str| {
            check
                .call(with(Some(v)))
                .map(|r| *r.extensions().get::<Role>().unwrap())
                .map_err(|e| e.code())
        };
        let mut both = RequireToken::new(Some("op"), Some("wk"));
        assert_eq!(role(&mut both, "Bearer op"), Ok(Role::Operator));
        assert_eq!(role(&mut both, "Bearer wk"), Ok(Role::Worker));
        assert_eq!(
            role(&mut both, "Bearer wkx"),
            Err(tonic::Code::Unauthenticated)
        );
        let mut worker_only = RequireToken::new(None, Some("wk"));
        assert_eq!(role(&mut worker_only, "Bearer wk"), Ok(Role::Worker));
        assert_eq!(
            role(&mut worker_only, "Bearer op"),
            Err(tonic::Code::Unauthenticated)
        );
        let open = RequireToken::new(None, None).call(with(None)).unwrap();
        assert!(require_operator(&open).is_ok());
        let worker = both.call(with(Some("Bearer wk"))).unwrap();
        let denied = require_operator(&worker).unwrap_err();
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert!(require_operator(&Request::new(())).is_err());
    }
}
