//! `nqueens tls init`: a private CA and a server certificate signed by it, for `serve --tls-cert` and the clients' `--tls-ca`;
//! `nqueens tls worker`: a client certificate signed by that CA, naming a worker identity (`worker
//! --client-cert`, for a coordinator started with `--tls-client-ca`).
//!
//! The CA is a certificate of its own (rustls refuses a CA certificate presented as the server's,
//! `CaUsedAsEndEntity`): clients trust `ca.pem`; the coordinator presents `server.pem`, whose subject
//! alternative names are the host names and addresses clients dial. The keys are written mode 0600, and
//! nothing is overwritten unless asked.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Arguments of `nqueens tls`.
#[derive(Debug, Args)]
pub struct TlsArgs {
    #[command(subcommand)]
    pub command: TlsCommand,
}

/// The subcommands of `nqueens tls`.
#[derive(Debug, Subcommand)]
pub enum TlsCommand {
    /// Write a new CA (ca.pem, ca-key.pem) and a server certificate signed by it (server.pem,
    /// server-key.pem) into DIR, and print which file goes where.
    Init(InitArgs),
    /// Write a client certificate for the worker identity NAME, signed by DIR's CA (DIR/ca.pem,
    /// DIR/ca-key.pem), into DIR/workers/NAME.pem and NAME-key.pem: the worker presents it with
    /// --client-cert and --client-key to a coordinator started with --tls-client-ca DIR/ca.pem. The
    /// identity must also be issued there (`nqueens credential issue NAME`), which decides whether it
    /// works (revocation included).
    Worker(WorkerArgs),
}

/// Arguments of `nqueens tls worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The directory of `nqueens tls init` (its CA signs the certificate).
    pub dir: PathBuf,
    /// The worker identity the certificate names (1 to 32 letters, digits, - or _).
    pub name: String,
    /// Replace a certificate of this name already written.
    #[arg(long)]
    pub force: bool,
}

/// Arguments of `nqueens tls init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Directory to write the four files into (created if missing).
    pub dir: PathBuf,
    /// A host name or IP address clients use to reach the coordinator; repeatable. Default:
    /// localhost, 127.0.0.1 and this machine's host name.
    #[arg(long = "host", value_name = "NAME")]
    pub hosts: Vec<String>,
    /// Replace files of these names already in DIR.
    #[arg(long)]
    pub force: bool,
}

/// Why `tls init` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA of DIR cannot be read or used.
    #[error("cannot use the CA of {0}: {1}")]
    Ca(PathBuf, String),
    /// A name that is no worker identity.
    #[error("{0:?} is not a worker identity: 1 to 32 letters, digits, - or _")]
    Identity(String),
    /// Files of the names it writes are there already.
    #[error("{} already exist{}: nothing was written (--force replaces them)", list(.0), if .0.len() == 1 { "s" } else { "" })]
    Exists(Vec<PathBuf>),
    /// A host name that cannot be put in a certificate.
    #[error("--host {0:?} is not a host name or IP address")]
    Host(String),
    /// The key or certificate could not be made.
    #[error("cannot make the certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// A file or the directory could not be written.
    #[error("cannot write {0}: {1}")]
    Write(PathBuf, std::io::Error),
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The files `tls init` writes, by name in DIR.
pub const CA_CERT: &str = "ca.pem";
pub const CA_KEY: &str = "ca-key.pem";
pub const SERVER_CERT: &str = "server.pem";
pub const SERVER_KEY: &str = "server-key.pem";

/// Years the CA and the server certificate are valid from today.
const VALID_YEARS: i32 = 10;

/// Runs `nqueens tls ...`.
pub fn run(args: &TlsArgs) -> anyhow::Result<()> {
    match &args.command {
        TlsCommand::Init(init_args) => {
            let hosts = if init_args.hosts.is_empty() {
                default_hosts()
            } else {
                init_args.hosts.clone()
            };
            let written = init(&init_args.dir, &hosts, init_args.force)?;
            print!("{}", written.instructions());
            Ok(())
        }
        TlsCommand::Worker(w) => {
            let (cert, key) = worker(&w.dir, &w.name, w.force)?;
            print!(
                "wrote {cert}, {key}
                 
                 coordinator:  nqueens serve ... --tls-client-ca {ca}   (and once: nqueens credential issue {name})
                 worker:       nqueens worker --coordinator https://HOST:7447 --tls-ca {ca} --client-cert {cert} --client-key {key}
                 
                 Copy both files to that worker only; keep {key} private (mode 0600).
",
                cert = cert.display(),
                key = key.display(),
                ca = w.dir.join(CA_CERT).display(),
                name = w.name,
            );
            Ok(())
        }
    }
}

/// Writes a client certificate for the worker identity `name`, signed by the CA in `dir`, into
/// `dir/workers/NAME.pem` and `NAME-key.pem` (0600); returns their paths. Refuses, writing nothing,
/// when either exists and `force` is false.
pub fn worker(dir: &Path, name: &str, force: bool) -> Result<(PathBuf, PathBuf), TlsError> {
    if !nqueens_coordinator::durable::credentials::valid_identity(name) {
        return Err(TlsError::Identity(name.to_string()));
    }
    let ca_error = |why: String| TlsError::Ca(dir.to_path_buf(), why);
    let read = |file: &str| {
        std::fs::read_to_string(dir.join(file))
            .map_err(|e| ca_error(format!("{}: {e}", dir.join(file).display())))
    };
    let ca_key = KeyPair::from_pem(&read(CA_KEY)?).map_err(|e| ca_error(e.to_string()))?;
    let issuer =
        Issuer::from_ca_cert_pem(&read(CA_CERT)?, ca_key).map_err(|e| ca_error(e.to_string()))?;
    let out = dir.join("workers");
    let paths = (
        out.join(format!("{name}.pem")),
        out.join(format!("{name}-key.pem")),
    );
    if !force {
        let existing: Vec<PathBuf> = [&paths.0, &paths.1]
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .cloned()
            .collect();
        if !existing.is_empty() {
            return Err(TlsError::Exists(existing));
        }
    }
    let (today, until) = today_and_until();
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = rcgen::date_time_ymd(today.0, today.1, today.2);
    params.not_after = rcgen::date_time_ymd(until.0, until.1, until.2);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    std::fs::create_dir_all(&out).map_err(|e| TlsError::Write(out.clone(), e))?;
    for (path, text, mode) in [
        (&paths.0, cert.pem(), 0o644),
        (&paths.1, key.serialize_pem(), 0o600),
    ] {
        let temporary = out.join(format!(".{}.tmp", name));
        write_new(&temporary, text.as_bytes(), mode)
            .map_err(|e| TlsError::Write(temporary.clone(), e))?;
        std::fs::rename(&temporary, path).map_err(|e| TlsError::Write(path.clone(), e))?;
    }
    Ok(paths)
}

/// localhost, 127.0.0.1 and this machine's host name (when it has a usable one).
pub fn default_hosts() -> Vec<String> {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if let Ok(name) = gethostname::gethostname().into_string() {
        if is_host(&name) && !hosts.contains(&name) {
            hosts.push(name);
        }
    }
    hosts
}

/// Whether `name` is an IP address or a DNS name a client can dial (labels of letters, digits, `-` and
/// `_`; a leading `*` label for a wildcard).
fn is_host(name: &str) -> bool {
    if name.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    let labels: Vec<&str> = name.strip_suffix('.').unwrap_or(name).split('.').collect();
    !name.is_empty()
        && name.len() <= 253
        && labels.iter().enumerate().all(|(i, label)| {
            (i == 0 && *label == "*" && labels.len() > 1)
                || (!label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        })
}

/// What `init` wrote.
#[derive(Debug)]
pub struct Written {
    pub dir: PathBuf,
    pub hosts: Vec<String>,
    /// The last day of validity, `YYYY-MM-DD`.
    pub until: String,
}

impl Written {
    /// Which file goes where, for the operator.
    pub fn instructions(&self) -> String {
        let path = |name: &str| self.dir.join(name).display().to_string();
        // The name a client on another machine would dial: the first that is not loopback.
        let host = self
            .hosts
            .iter()
            .find(|h| {
                *h != "localhost"
                    && h.parse::<std::net::IpAddr>()
                        .map_or(true, |ip| !ip.is_loopback())
            })
            .or(self.hosts.first())
            .map_or("HOST", String::as_str);
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        format!(
            "wrote {ca}, {ca_key}, {cert}, {key}\n\
             the server certificate is valid for {hosts} until {until}\n\
             \n\
             coordinator:        nqueens serve --listen 0.0.0.0:7447 --tls-cert {cert} --tls-key {key} --token T\n\
             clients, workers:   --coordinator https://{host}:7447 --tls-ca {ca} --token T\n\
             \n\
             Copy {ca} to every client and worker; keep {ca_key} and {key} private (mode 0600).\n\
             To add a host name later, run `nqueens tls init` again with every --host and --force.\n",
            ca = path(CA_CERT),
            ca_key = path(CA_KEY),
            cert = path(SERVER_CERT),
            key = path(SERVER_KEY),
            hosts = self.hosts.join(", "),
            until = self.until,
        )
    }
}

/// Writes a new CA and a server certificate for `hosts` into `dir`. Refuses, writing nothing, when any of
/// the four files exists and `force` is false.
pub fn init(dir: &Path, hosts: &[String], force: bool) -> Result<Written, TlsError> {
    let names = [CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY];
    if !force {
        let existing: Vec<PathBuf> = names
            .iter()
            .map(|n| dir.join(n))
            .filter(|p| p.symlink_metadata().is_ok())
            .collect();
        if !existing.is_empty() {
            return Err(TlsError::Exists(existing));
        }
    }
    let (today, until) = today_and_until();

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "nqueens-cluster CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = rcgen::date_time_ymd(today.0, today.1, today.2);
    ca.not_after = rcgen::date_time_ymd(until.0, until.1, until.2);
    let ca_cert = ca.self_signed(&ca_key)?;

    let mut server = CertificateParams::new(Vec::<String>::new())?;
    for host in hosts {
        let one = CertificateParams::new(vec![host.clone()])
            .ok()
            .filter(|_| is_host(host))
            .ok_or_else(|| TlsError::Host(host.clone()))?;
        server.subject_alt_names.extend(one.subject_alt_names);
    }
    server.distinguished_name.push(
        DnType::CommonName,
        hosts.first().map_or("nqueens coordinator", String::as_str),
    );
    server.is_ca = IsCa::ExplicitNoCa;
    server.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.use_authority_key_identifier_extension = true;
    server.not_before = ca.not_before;
    server.not_after = ca.not_after;
    let server_key = KeyPair::generate()?;
    let issuer = Issuer::new(ca, &ca_key);
    let server_cert = server.signed_by(&server_key, &issuer)?;

    std::fs::create_dir_all(dir).map_err(|e| TlsError::Write(dir.to_path_buf(), e))?;
    // Each file is written under a temporary name first, then all are renamed in place: a failure
    // midway leaves no half-written certificate under a real name.
    let files = [
        (CA_CERT, ca_cert.pem(), 0o644),
        (CA_KEY, ca_key.serialize_pem(), 0o600),
        (SERVER_CERT, server_cert.pem(), 0o644),
        (SERVER_KEY, server_key.serialize_pem(), 0o600),
    ];
    let mut staged = Vec::new();
    for (name, text, mode) in &files {
        let temporary = dir.join(format!(".{name}.tmp"));
        let result = write_new(&temporary, text.as_bytes(), *mode);
        staged.push(temporary.clone());
        if let Err(e) = result {
            for t in &staged {
                let _ = std::fs::remove_file(t);
            }
            return Err(TlsError::Write(temporary, e));
        }
    }
    for ((name, _, _), temporary) in files.iter().zip(&staged) {
        let path = dir.join(name);
        std::fs::rename(temporary, &path).map_err(|e| TlsError::Write(path, e))?;
    }
    Ok(Written {
        dir: dir.to_path_buf(),
        hosts: hosts.to_vec(),
        until: format!("{:04}-{:02}-{:02}", until.0, until.1, until.2),
    })
}

/// Writes `bytes` to a new file of permissions `mode` (a leftover of the same name is replaced).
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

type Ymd = (i32, u8, u8);

/// Today (UTC) and the same day `VALID_YEARS` later (the 28th at most, so that the day exists).
fn today_and_until() -> (Ymd, Ymd) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let today = civil_from_days((secs / 86_400) as i64);
    (today, (today.0 + VALID_YEARS, today.1, today.2.min(28)))
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> Ymd {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y as i32, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_from_days_names_known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(20_453), (2025, 12, 31));
    }

    #[test]
    fn a_bad_host_name_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["bad host", "h\u{e9}", "", "a..b", "-"] {
            let e = init(dir.path(), &[bad.to_string()], false).unwrap_err();
            assert!(matches!(e, TlsError::Host(..)), "{bad:?}: {e}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn host_names_and_addresses_are_accepted() {
        for good in [
            "localhost",
            "node-01.cluster.local",
            "10.0.0.1",
            "::1",
            "*.example.org",
            "n_1",
        ] {
            assert!(is_host(good), "{good}");
        }
    }
}

/// A week: `serve` warns when its certificate ends sooner.
const EXPIRY_WARNING: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// A date for people: RFC 3339 in UTC, to the second.
fn utc(unix: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Checks the validity dates of the first certificate in `pem` (read from `path`) at `now`: refused when
/// it has expired or is not valid yet, a warning when it ends within a week, else `None`.
pub fn check_validity(
    path: &Path,
    pem: &[u8],
    now: std::time::SystemTime,
) -> anyhow::Result<Option<String>> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| anyhow::anyhow!("{}: not a PEM certificate: {e}", path.display()))?;
    let cert = block
        .parse_x509()
        .map_err(|e| anyhow::anyhow!("{}: not an X.509 certificate: {e}", path.display()))?;
    let validity = cert.validity();
    let (from, until) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let now = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let renew = "make a new one with `nqueens tls init DIR --force` (or from your CA) and copy the new ca.pem to the workers if it changed";
    if now > until {
        anyhow::bail!(
            "the certificate {} expired on {} (now {}): workers would refuse it; {renew}",
            path.display(),
            utc(until),
            utc(now)
        );
    }
    if now < from {
        anyhow::bail!(
            "the certificate {} is not valid until {} (now {}): check this machine's clock, or {renew}",
            path.display(),
            utc(from),
            utc(now)
        );
    }
    Ok((until - now < EXPIRY_WARNING.as_secs() as i64).then(|| {
        format!(
            "the certificate {} expires on {}: {renew}",
            path.display(),
            utc(until)
        )
    }))
}

#[cfg(test)]
mod validity_tests {
    use super::*;

    fn cert(from: (i32, u8, u8), until: (i32, u8, u8)) -> Vec<u8> {
        let mut p = CertificateParams::new(vec!["localhost".into()]).unwrap();
        p.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        p.not_after = rcgen::date_time_ymd(until.0, until.1, until.2);
        let key = KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().pem().into_bytes()
    }

    fn at(y: i32, m: u8, d: u8) -> std::time::SystemTime {
        let t = rcgen::date_time_ymd(y, m, d).unix_timestamp();
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64)
    }

    #[test]
    fn an_expired_or_early_certificate_is_refused_and_one_ending_soon_warned_of() {
        let path = Path::new("server.pem");
        let pem = cert((2026, 1, 1), (2026, 12, 1));
        assert_eq!(check_validity(path, &pem, at(2026, 6, 1)).unwrap(), None);
        let soon = check_validity(path, &pem, at(2026, 11, 27))
            .unwrap()
            .unwrap();
        assert!(soon.contains("expires on 2026-12-01T00:00:00Z"), "{soon}");
        let expired = check_validity(path, &pem, at(2026, 12, 2))
            .unwrap_err()
            .to_string();
        assert!(
            expired.contains("expired on 2026-12-01T00:00:00Z") && expired.contains("tls init"),
            "{expired}"
        );
        let early = check_validity(path, &pem, at(2025, 12, 31))
            .unwrap_err()
            .to_string();
        assert!(
            early.contains("not valid until 2026-01-01T00:00:00Z"),
            "{early}"
        );
        assert!(check_validity(path, b"not a certificate", at(2026, 6, 1)).is_err());
    }
}
