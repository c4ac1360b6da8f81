//! Calls to a coordinator and their errors, for every client command: what a refusal says, and where
//! the coordinator was looked for.

use nqueens_proto as proto;

/// A call the coordinator refused or could not answer.
#[derive(Debug)]
pub struct RpcError {
    pub code: tonic::Code,
    pub message: String,
    /// The coordinator's address, once known.
    pub at: Option<String>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.at {
            Some(at) => write!(f, "coordinator at {at}: {} ({:?})", self.message, self.code)?,
            None => write!(f, "coordinator: {} ({:?})", self.message, self.code)?,
        }
        if let Some(hint) = self.hint() {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RpcError {}

impl RpcError {
    /// What to do about it, where the error says enough to tell.
    fn hint(&self) -> Option<&'static str> {
        let m = self.message.to_lowercase();
        let tls = self
            .at
            .as_deref()
            .is_some_and(|a| a.starts_with("https://"));
        if m.contains("https without tls") {
            Some("an https:// address needs --tls-ca PEM (the certificate the coordinator's chains to)")
        } else if m.contains("h2 protocol error")
            || m.contains("frame with invalid size")
            || m.contains("operation was canceled")
            || m.contains("http/1")
            // An HTTP/1 server (the coordinator's own HTTP port) hangs up on gRPC's opening bytes.
            || (!tls && (m.contains("broken pipe") || m.contains("stream closed") || m.contains("connection reset")))
        {
            Some("this address answers, but not as a coordinator's gRPC port: it may be the HTTP port (--metrics-listen; gRPC is --listen, 7447 by default), or a coordinator serving TLS (then use https:// and --tls-ca PEM)")
        } else if m.contains("connect error") || m.contains("connection refused") {
            Some(if tls {
                "is it running, and does its certificate match the host name and --tls-ca?"
            } else {
                "is `nqueens serve` running there? (it listens on 127.0.0.1:7447 by default; --coordinator URL picks another)"
            })
        } else if self.code == tonic::Code::Unauthenticated
            && !m.contains("revoked")
            && !m.contains("client certificate")
            && !m.contains("one identity")
        {
            // A refusal of the credential itself needs no hint about passing one.
            Some("pass the coordinator's token with --token or NQUEENS_TOKEN")
        } else {
            None
        }
    }
}

/// The error for a call the coordinator refused or could not answer.
pub fn rpc(s: tonic::Status) -> RpcError {
    // A transport error says little alone ("transport error"): its causes say what the other end was.
    let mut message = s.message().to_string();
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(&s);
    while let Some(e) = cause {
        let more = e.to_string();
        if !message.contains(&more) {
            message.push_str(": ");
            message.push_str(&more);
        }
        cause = e.source();
    }
    RpcError {
        code: s.code(),
        message,
        at: None,
    }
}

/// `e`, naming the coordinator's address if it is a call that failed.
pub fn locate(e: anyhow::Error, address: &str) -> anyhow::Error {
    match e.downcast::<RpcError>() {
        Ok(mut rpc) => {
            rpc.at = Some(address.to_string());
            rpc.into()
        }
        Err(e) => e,
    }
}

/// Every worker the coordinator shows, in (name, id) order, a page of ListWorkers at a time.
pub async fn all_workers(
    client: &mut nqueens_proto::Client,
) -> anyhow::Result<Vec<proto::WorkerStatus>> {
    let page = async |(after_name, after_id): (String, String)| {
        let asked = proto::ListWorkersRequest {
            after_name,
            after_id,
            limit: 0,
        };
        let page = client.list_workers(asked).await.map_err(rpc)?.into_inner();
        Ok((page.workers, page.more))
    };
    every_page("workers", page, |w: &proto::WorkerStatus| {
        Some((w.name.clone(), w.worker_id.clone()))
    })
    .await
}

/// Every run of the coordinator, in id order, a page of ListRuns at a time.
pub async fn all_runs(client: &mut nqueens_proto::Client) -> anyhow::Result<Vec<proto::RunStatus>> {
    let page = async |after: u64| {
        let asked = proto::ListRunsRequest { after, limit: 0 };
        let page = client.list_runs(asked).await.map_err(rpc)?.into_inner();
        Ok((page.runs, page.more))
    };
    every_page("runs", page, |r: &proto::RunStatus| r.run.parse().ok()).await
}

/// Every entry of a paged listing: `page(after)` answers the entries after the cursor `after` (the
/// default cursor: from the start) and whether more follow; `cursor` names an entry's place. A listing
/// that announces more but does not move past its cursor is refused, not asked again for ever.
async fn every_page<T, C: Default + Clone + PartialOrd + std::fmt::Debug>(
    what: &str,
    mut page: impl AsyncFnMut(C) -> anyhow::Result<(Vec<T>, bool)>,
    cursor: impl Fn(&T) -> Option<C>,
) -> anyhow::Result<Vec<T>> {
    let mut all = Vec::new();
    let mut after = C::default();
    loop {
        let (entries, more) = page(after.clone()).await?;
        let next = entries.last().map(&cursor);
        all.extend(entries);
        match (more, next) {
            (false, _) => return Ok(all),
            (true, Some(Some(next))) if next > after => after = next,
            _ => anyhow::bail!(
                "the coordinator's list of {what} does not go on: a page after {after:?} announces more but ends where it began"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::every_page;

    /// A listing of `entries` served `size` at a time; `stuck` makes every page after the first
    /// answer the first page again.
    async fn list(entries: u64, size: usize, stuck: bool) -> anyhow::Result<Vec<u64>> {
        let all: Vec<u64> = (1..=entries).collect();
        let mut asked = 0;
        let page = async |after: u64| {
            asked += 1;
            let from = if stuck { 0 } else { after as usize };
            let page: Vec<u64> = all.iter().skip(from).take(size).copied().collect();
            let more = from + page.len() < all.len();
            Ok((page, more))
        };
        every_page("numbers", page, |n: &u64| Some(*n)).await
    }

    #[tokio::test]
    async fn every_page_is_joined_in_order() {
        assert_eq!(
            list(10, 3, false).await.unwrap(),
            (1..=10).collect::<Vec<_>>()
        );
        assert_eq!(list(0, 3, false).await.unwrap(), Vec::<u64>::new());
        assert_eq!(
            list(6, 3, false).await.unwrap(),
            (1..=6).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn a_listing_that_does_not_move_on_is_refused() {
        let refused = list(10, 3, true).await.unwrap_err().to_string();
        assert!(refused.contains("does not go on"), "{refused}");
        // A page that is empty yet announces more.
        let empty = every_page(
            "numbers",
            async |_: u64| Ok((Vec::<u64>::new(), true)),
            |n| Some(*n),
        );
        assert!(empty.await.is_err());
        // An entry whose place cannot be read.
        let unreadable = every_page(
            "numbers",
            async |_: u64| Ok((vec![7u64], true)),
            |_| None::<u64>,
        );
        assert!(unreadable.await.is_err());
    }
}
