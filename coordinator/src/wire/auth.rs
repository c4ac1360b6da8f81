//! Authentication of RPCs: when the coordinator has a token, every call of the coordinator service and of
//! server reflection must carry `authorization: Bearer TOKEN` (health checks stay open, for load balancers
//! and orchestrators). A missing or wrong token gets UNAUTHENTICATED. The comparison takes the same time
//! whatever the token's content. Three kinds of token make two roles: the operator's token does
//! everything; a worker credential (issued per worker, [`crate::durable::credentials`]) or the shared workers'
//! token leases, reports and reads its own runs' status, but cannot create or steer runs, list workers or
//! jobs. A worker's identity is its credential: every call with the shared token is one identity.
//!
//! Where TLS asks for client certificates (`serve --tls-client-ca`), a certificate that chains to that
//! CA (checked by the TLS layer) names a worker identity by its subject's common name. The identity
//! must be issued in the credentials book and not revoked ([`Credentials::admits`]). It is the call's
//! identity with no token, with the shared workers' token, or with a credential token of the same
//! identity; a credential token of another identity is refused; the operator's token stays the
//! operator's.

use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::durable::credentials::{Credentials, Verdict, SHARED_IDENTITY};

/// What the token of a call lets it do; the check puts it in every request's extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Every call: the operator's token, or a coordinator without tokens. A worker under it is known by
    /// the name it states (the operator is trusted).
    Operator,
    /// Leasing, reporting and reading a run's status, as this identity: an issued credential's, or
    /// [`SHARED_IDENTITY`] for the shared workers' token.
    Worker(Arc<str>),
}

/// The server-side check; with no token at all, every call passes as the operator's.
#[derive(Clone, Default)]
pub struct RequireToken {
    operator: Option<Arc<[u8]>>,
    worker: Option<Arc<[u8]>>,
    credentials: Option<Credentials>,
}

impl RequireToken {
    /// Requires `operator` or `worker` (when either is set). A worker token alone leaves no call able to
    /// create or steer runs.
    pub fn new(operator: Option<&str>, worker: Option<&str>) -> RequireToken {
        let bearer = |t: &str| Arc::from(format!("Bearer {t}").as_bytes());
        RequireToken {
            operator: operator.map(bearer),
            worker: worker.map(bearer),
            credentials: None,
        }
    }

    /// Accepts the worker credentials `credentials` issues too (where a token is required at all).
    pub fn with_credentials(mut self, credentials: Credentials) -> RequireToken {
        self.credentials = Some(credentials);
        self
    }

    /// The role `given` (an `authorization` value) proves, or why it proves none. Both shared tokens are
    /// always compared.
    fn role(&self, given: &[u8]) -> Result<Role, Status> {
        let matches = |t: &Option<Arc<[u8]>>| t.as_deref().is_some_and(|t| same(given, t));
        let (operator, worker) = (matches(&self.operator), matches(&self.worker));
        if operator {
            return Ok(Role::Operator);
        }
        if worker {
            return Ok(Role::Worker(Arc::from(SHARED_IDENTITY)));
        }
        let issued = given
            .strip_prefix(b"Bearer ")
            .zip(self.credentials.as_ref())
            .map_or(Verdict::Unknown, |(token, c)| c.verify(token));
        match issued {
            Verdict::Valid(identity) => Ok(Role::Worker(identity)),
            Verdict::Revoked(identity) => Err(Status::unauthenticated(format!(
                "the credential of {identity:?} was revoked by the operator"
            ))),
            Verdict::Unknown => Err(Status::unauthenticated("wrong token")),
        }
    }
}

impl std::fmt::Debug for RequireToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequireToken")
            .field("operator", &self.operator.is_some())
            .field("worker", &self.worker.is_some())
            .field("credentials", &self.credentials.is_some())
            .finish()
    }
}

/// Compares without an early exit on the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Interceptor for RequireToken {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let certified = match req.peer_certs() {
            Some(chain) => self.certified(chain.first().map(|c| c.as_ref()))?,
            None => None,
        };
        let given = req.metadata().get("authorization").map(|v| v.as_bytes());
        let role = self.decide(given, certified)?;
        req.extensions_mut().insert(role);
        Ok(req)
    }
}

impl RequireToken {
    /// The role of a call that gave the `authorization` value `given` and presented a client
    /// certificate naming the admitted identity `certified`.
    fn decide(&self, given: Option<&[u8]>, certified: Option<Arc<str>>) -> Result<Role, Status> {
        let open = self.operator.is_none() && self.worker.is_none();
        Ok(match (given, certified) {
            (_, Some(identity)) if open => Role::Worker(identity),
            _ if open => Role::Operator,
            (Some(given), certified) => match (self.role(given)?, certified) {
                (role, None) | (role @ Role::Operator, Some(_)) => role,
                (Role::Worker(token), Some(identity))
                    if &*token == SHARED_IDENTITY || token == identity =>
                {
                    Role::Worker(identity)
                }
                (Role::Worker(token), Some(identity)) => {
                    return Err(Status::unauthenticated(format!(
                        "the token is {token:?}'s credential, the client certificate {identity:?}'s: one call, one identity"
                    )))
                }
            },
            (None, Some(identity)) => Role::Worker(identity),
            (None, None) => {
                return Err(Status::unauthenticated(
                    "this coordinator requires a token (--token or NQUEENS_TOKEN) or a client certificate",
                ))
            }
        })
    }
}

impl RequireToken {
    /// The identity a verified client certificate (its DER, `leaf`) names, if it may work; a
    /// certificate whose common name is no identity issued here, or one revoked, is refused.
    fn certified(&self, leaf: Option<&[u8]>) -> Result<Option<Arc<str>>, Status> {
        let Some(der) = leaf else {
            return Ok(None);
        };
        let name = certificate_identity(der).ok_or_else(|| {
            Status::unauthenticated(
                "the client certificate names no worker identity (its subject's common name)",
            )
        })?;
        let verdict = match &self.credentials {
            Some(c) => c.admits(&name),
            None => Verdict::Unknown,
        };
        match verdict {
            Verdict::Valid(identity) => Ok(Some(identity)),
            Verdict::Revoked(identity) => Err(Status::unauthenticated(format!(
                "the credential of {identity:?} was revoked by the operator"
            ))),
            Verdict::Unknown => Err(Status::unauthenticated(format!(
                "the client certificate names {:?}, an identity not issued here (`nqueens credential issue NAME` first)",
                crate::service::truncate(&name)
            ))),
        }
    }
}

/// The common name of the subject of a certificate (DER), if it has exactly one, as text.
pub fn certificate_identity(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let mut names = cert.subject().iter_common_name();
    let name = names.next()?.as_str().ok()?.to_string();
    names.next().is_none().then_some(name)
}

/// [`RequireToken`], then the operator's role: for a service no worker needs, server reflection,
/// whose streams last as long as their client asks and are not bounded by the calls' byte budget
/// ([`crate::wire::request_bytes`] counts no operator call).
#[derive(Clone, Debug)]
pub struct OperatorOnly(pub RequireToken);

impl Interceptor for OperatorOnly {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let req = self.0.call(req)?;
        match req.extensions().get::<Role>() {
            Some(Role::Operator) => Ok(req),
            _ => Err(Status::permission_denied(
                "server reflection needs the operator's token (serve --token); a worker's credential \
                 or certificate does not give it",
            )),
        }
    }
}

/// Refuses, with PERMISSION_DENIED, a call that was not made with the operator's token (a request that
/// did not pass the check has no role, and is refused too).
pub fn require_operator<T>(req: &Request<T>) -> Result<(), Status> {
    match req.extensions().get::<Role>() {
        Some(Role::Operator) => Ok(()),
        _ => Err(Status::permission_denied(
            "this call creates or steers runs, or lists workers, jobs or credentials, and needs the \
             operator's token (serve --token); the token given is a worker's",
        )),
    }
}

/// The identity a worker credential proves, if the call was made with one (`None`: the operator's
/// token, or a coordinator without tokens). A request that never met the check proves the shared
/// identity, the least trusted there is.
pub fn worker_identity<T>(req: &Request<T>) -> Option<Arc<str>> {
    match req.extensions().get::<Role>() {
        Some(Role::Operator) => None,
        Some(Role::Worker(identity)) => Some(identity.clone()),
        None => Some(Arc::from(SHARED_IDENTITY)),
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
            // Two bytes swapped: their differences cancel in an xor, never in an or.
            Some("Bearer 3scret"),
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
                .map(|r| r.extensions().get::<Role>().unwrap().clone())
                .map_err(|e| e.code())
        };
        let mut both = RequireToken::new(Some("op"), Some("wk"));
        assert_eq!(role(&mut both, "Bearer op"), Ok(Role::Operator));
        let shared = Role::Worker(Arc::from(SHARED_IDENTITY));
        assert_eq!(role(&mut both, "Bearer wk"), Ok(shared.clone()));
        assert_eq!(
            role(&mut both, "Bearer wkx"),
            Err(tonic::Code::Unauthenticated)
        );
        let mut worker_only = RequireToken::new(None, Some("wk"));
        assert_eq!(role(&mut worker_only, "Bearer wk"), Ok(shared));
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
        assert_eq!(worker_identity(&open), None);
        assert_eq!(worker_identity(&worker).as_deref(), Some(SHARED_IDENTITY));
        assert_eq!(
            worker_identity(&Request::new(())).as_deref(),
            Some(SHARED_IDENTITY)
        );
    }

    /// The check's debug form says which tokens are set, never what they are (secrets stay out of logs).
    #[test]
    fn the_debug_form_names_no_token() {
        let check = RequireToken::new(Some("s3cret-op"), Some("s3cret-wk"))
            .with_credentials(Credentials::open(None).unwrap());
        let shown = format!("{check:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("operator: true") && shown.contains("credentials: true"),
            "{shown}"
        );
    }

    /// An issued credential proves its own identity, a worker's role; revoked, it is refused at once;
    /// a coordinator with no token at all ignores credentials (every call is the operator's).
    #[test]
    fn an_issued_credential_proves_its_identity_until_revoked() {
        let credentials = Credentials::open(None).unwrap();
        let token = credentials.issue("node-1").unwrap();
        let mut check = RequireToken::new(Some("op"), None).with_credentials(credentials.clone());
        let req = check.call(with(Some(&format!("Bearer {token}")))).unwrap();
        assert_eq!(worker_identity(&req).as_deref(), Some("node-1"));
        assert_eq!(
            require_operator(&req).unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        // Without the "Bearer " it proves nothing.
        assert!(check.call(with(Some(&token))).is_err());
        credentials.revoke("node-1").unwrap();
        let e = check
            .call(with(Some(&format!("Bearer {token}"))))
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e.message().contains("revoked"), "{}", e.message());
        let mut open = RequireToken::new(None, None).with_credentials(credentials);
        let req = open.call(with(Some(&format!("Bearer {token}")))).unwrap();
        assert!(require_operator(&req).is_ok());
    }
    /// A client certificate (DER) whose subject holds the common names `names`.
    fn cert_of(names: &[&str]) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for name in names {
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, *name);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    /// A certificate's identity is its one common name; none, two, or bytes that are no certificate
    /// name none.
    #[test]
    fn a_certificate_names_its_one_common_name() {
        assert_eq!(
            certificate_identity(&cert_of(&["alice"])).as_deref(),
            Some("alice")
        );
        assert_eq!(certificate_identity(&cert_of(&[])), None);
        // Two common names (the second under the attribute's OID, 2.5.4.3): ambiguous, none.
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "a");
        params
            .distinguished_name
            .push(rcgen::DnType::CustomDnType(vec![2, 5, 4, 3]), "b");
        let key = rcgen::KeyPair::generate().unwrap();
        let two = params.self_signed(&key).unwrap().der().to_vec();
        assert_eq!(certificate_identity(&two), None);
        assert_eq!(certificate_identity(b"not a certificate"), None);
    }

    /// The book decides a certificate: issued and not revoked works; revoked, never issued, no
    /// identity at all, or no book: refused, saying which.
    #[test]
    fn the_book_admits_a_certificates_identity() {
        let credentials = Credentials::open(None).unwrap();
        credentials.issue("alice").unwrap();
        credentials.issue("bob").unwrap();
        credentials.revoke("bob").unwrap();
        let check = RequireToken::new(Some("op"), None).with_credentials(credentials);
        assert_eq!(check.certified(None).unwrap(), None);
        assert_eq!(
            check
                .certified(Some(&cert_of(&["alice"])))
                .unwrap()
                .as_deref(),
            Some("alice")
        );
        for (names, why) in [
            (&["bob"][..], "revoked"),
            (&["mallory"][..], "not issued here"),
            (&[][..], "names no worker identity"),
        ] {
            let e = check.certified(Some(&cert_of(names))).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated);
            assert!(e.message().contains(why), "{names:?}: {e:?}");
        }
        let no_book = RequireToken::new(Some("op"), None);
        let e = no_book.certified(Some(&cert_of(&["alice"]))).unwrap_err();
        assert!(e.message().contains("not issued here"), "{e:?}");
    }

    /// A certificate's identity beside each kind of token: none, the shared token's or the same
    /// identity's credential: the certificate's; another identity's credential: refused; the
    /// operator's: the operator; a wrong token: refused. Without tokens, a certificate makes a worker
    /// of its caller, and no certificate the operator.
    #[test]
    fn a_certificate_and_a_token_make_one_identity() {
        let credentials = Credentials::open(None).unwrap();
        let alice_token = credentials.issue("alice").unwrap();
        let carol_token = credentials.issue("carol").unwrap();
        let check = RequireToken::new(Some("op"), Some("wk")).with_credentials(credentials);
        let alice = || Some(Arc::<str>::from("alice"));
        let bearer = |t: &str| format!("Bearer {t}").into_bytes();
        let worker = |name: &str| Role::Worker(Arc::from(name));
        assert_eq!(check.decide(None, alice()).unwrap(), worker("alice"));
        assert_eq!(
            check.decide(Some(&bearer("wk")), alice()).unwrap(),
            worker("alice")
        );
        assert_eq!(
            check.decide(Some(&bearer(&alice_token)), alice()).unwrap(),
            worker("alice")
        );
        assert_eq!(
            check.decide(Some(&bearer("op")), alice()).unwrap(),
            Role::Operator
        );
        let e = check
            .decide(Some(&bearer(&carol_token)), alice())
            .unwrap_err();
        assert!(e.message().contains("one call, one identity"), "{e:?}");
        let e = check.decide(Some(&bearer("wrong")), alice()).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        let e = check.decide(None, None).unwrap_err();
        assert!(e.message().contains("or a client certificate"), "{e:?}");
        assert_eq!(
            check.decide(Some(&bearer("wk")), None).unwrap(),
            worker(SHARED_IDENTITY)
        );
        let open = RequireToken::default();
        assert_eq!(open.decide(None, alice()).unwrap(), worker("alice"));
        assert_eq!(
            open.decide(Some(&bearer("op")), alice()).unwrap(),
            worker("alice")
        );
        assert_eq!(open.decide(None, None).unwrap(), Role::Operator);
        assert_eq!(
            open.decide(Some(&bearer("x")), None).unwrap(),
            Role::Operator
        );
    }
}
