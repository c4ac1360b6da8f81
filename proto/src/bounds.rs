//! The size of each message kind of the protocol, checked before it is decoded ([`codec`]): the most
//! top-level fields it may have (the entries of its repeated fields included) and the most bytes. A
//! repeated field can take 2 bytes an entry on the wire and a hundred or more decoded, and a packed
//! list of lease ids 1 byte an id and 8 decoded: bounded by kind, a request the coordinator would
//! refuse for its size anyway is refused before it takes that memory.
//!
//! [`codec`]: crate::codec

use crate::{MAX_GPUS, MAX_LEASE_IDS, MAX_REPORT_RESULTS, MAX_WORKER_ID_LEN};

/// Most top-level fields a message of any kind may have (entries of repeated fields included): every
/// message of the protocol has far fewer (a job listing at most 10000 jobs), and the requests a worker
/// sends have bounds of their own ([`Bounds`]); more is refused before decoding, so that a 4 MiB
/// message cannot become hundreds of MB of decoded entries.
pub const MAX_FIELDS: usize = 65_536;

/// The bounds of one message kind. Every message the codec decodes has them; a new one must say.
pub trait Bounds {
    /// Its name, for the refusal.
    const NAME: &'static str;
    /// Most top-level fields, entries of repeated fields included (counted before decoding).
    const FIELDS: usize = MAX_FIELDS;
    /// Most bytes (none of its own: the server's or client's largest message).
    const BYTES: usize = usize::MAX;
}

/// Room for a message's singular fields, besides its repeated ones: each written once by any encoder,
/// and no message has as many.
pub const SINGULAR: usize = 16;

/// The most bytes a lease id takes in a heartbeat or release: a varint of at most 10 bytes, and its
/// tag when a client does not pack the list.
const LEASE_ID_BYTES: usize = 11;

/// A heartbeat's or release's largest size: its lease ids, unpacked, and room for its worker id and
/// the rest.
const LEASE_IDS_MESSAGE: usize = MAX_LEASE_IDS * LEASE_ID_BYTES + 8 * MAX_WORKER_ID_LEN;

impl Bounds for crate::ReportRequest {
    const NAME: &'static str = "ReportRequest";
    const FIELDS: usize = MAX_REPORT_RESULTS + MAX_GPUS as usize + SINGULAR;
}

impl Bounds for crate::LeaseRequest {
    const NAME: &'static str = "LeaseRequest";
    const FIELDS: usize = MAX_GPUS as usize + SINGULAR;
}

impl Bounds for crate::HeartbeatRequest {
    const NAME: &'static str = "HeartbeatRequest";
    const FIELDS: usize = MAX_LEASE_IDS + SINGULAR;
    const BYTES: usize = LEASE_IDS_MESSAGE;
}

impl Bounds for crate::ReleaseRequest {
    const NAME: &'static str = "ReleaseRequest";
    const FIELDS: usize = MAX_LEASE_IDS + SINGULAR;
    const BYTES: usize = LEASE_IDS_MESSAGE;
}

/// Message kinds with the general bounds: requests with no repeated field (a field sent again replaces
/// or merges into the first, taking no more memory), and the answers a client decodes.
macro_rules! general {
    ($($kind:ident),* $(,)?) => {
        $(impl Bounds for crate::$kind {
            const NAME: &'static str = stringify!($kind);
        })*
    };
}

general!(
    CreateRunRequest,
    GetRunRequest,
    ListRunsRequest,
    WatchRunRequest,
    ListWorkersRequest,
    RunControlRequest,
    SetPriorityRequest,
    ListJobsRequest,
    IssueCredentialRequest,
    RevokeCredentialRequest,
    ListCredentialsRequest,
    RunStatus,
    ListRunsResponse,
    LeaseResponse,
    ReportResponse,
    HeartbeatResponse,
    ReleaseResponse,
    ListWorkersResponse,
    ListJobsResponse,
    IssueCredentialResponse,
    RevokeCredentialResponse,
    ListCredentialsResponse,
    RetryFailedResponse,
);

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// The largest request of each bounded kind that the coordinator takes is within its bounds, with
    /// every field written (and lease ids unpacked, as a client may send them).
    #[test]
    fn the_largest_requests_the_coordinator_takes_are_within_their_bounds() {
        let name = "n".repeat(MAX_WORKER_ID_LEN);
        let kernels = vec!["k".repeat(crate::MAX_GPU_KERNEL_LEN); MAX_GPUS as usize];
        let report = crate::ReportRequest {
            worker_id: name.clone(),
            results: vec![crate::JobResult::default(); MAX_REPORT_RESULTS],
            worker_name: name.clone(),
            lease_capacity: 1,
            threads: 1,
            lease_run: Some("r".into()),
            gpus: 1,
            gpu_kernels: kernels.clone(),
        };
        let fields = MAX_REPORT_RESULTS + MAX_GPUS as usize + 6;
        assert_eq!(fields_of(&report), fields);
        assert!(fields <= crate::ReportRequest::FIELDS);
        let lease = crate::LeaseRequest {
            worker_id: name.clone(),
            worker_name: name.clone(),
            threads: 1,
            capacity: 1,
            run: Some("r".into()),
            wait_ms: 1,
            gpus: 1,
            gpu_kernels: kernels,
        };
        assert_eq!(fields_of(&lease), MAX_GPUS as usize + 7);
        assert!(fields_of(&lease) <= crate::LeaseRequest::FIELDS);
        let ids = vec![u64::MAX; MAX_LEASE_IDS];
        let heartbeat = crate::HeartbeatRequest {
            worker_id: name.clone(),
            lease_ids: ids.clone(),
        };
        let release = crate::ReleaseRequest {
            worker_id: name,
            lease_ids: ids,
            leaving: true,
        };
        for (bytes, singular, (most_fields, most_bytes)) in [
            (
                unpacked(&heartbeat.encode_to_vec(), 2),
                1,
                bounds::<crate::HeartbeatRequest>(),
            ),
            (
                unpacked(&release.encode_to_vec(), 2),
                2,
                bounds::<crate::ReleaseRequest>(),
            ),
        ] {
            assert_eq!(
                crate::codec::top_level_fields(&bytes, usize::MAX),
                Some(MAX_LEASE_IDS + singular)
            );
            assert!(MAX_LEASE_IDS + singular <= most_fields);
            assert!(bytes.len() <= most_bytes);
            // And not far from it.
            assert!(bytes.len() + 8 * MAX_WORKER_ID_LEN >= most_bytes);
            // Decoded as prost decodes either form: the same ids.
            assert_eq!(
                crate::ReleaseRequest::decode(&bytes[..]).unwrap().lease_ids,
                release.lease_ids
            );
        }
        // A report's bound is not far past its largest.
        assert!(crate::ReportRequest::FIELDS - fields <= SINGULAR);
    }

    /// The bounds as docs/security.md and docs/cluster.md state them.
    #[test]
    fn the_bounds_are_those_the_docs_state() {
        assert_eq!(bounds::<crate::ReportRequest>(), (4368, usize::MAX));
        assert_eq!(bounds::<crate::LeaseRequest>(), (272, usize::MAX));
        assert_eq!(bounds::<crate::HeartbeatRequest>(), (16_400, 181_248));
        assert_eq!(bounds::<crate::ReleaseRequest>(), (16_400, 181_248));
        assert_eq!(
            bounds::<crate::ListJobsResponse>(),
            (MAX_FIELDS, usize::MAX)
        );
    }

    fn bounds<M: Bounds>() -> (usize, usize) {
        (M::FIELDS, M::BYTES)
    }

    fn fields_of(m: &impl Message) -> usize {
        crate::codec::top_level_fields(&m.encode_to_vec(), usize::MAX).unwrap()
    }

    /// `bytes` with its packed field `tag` (of varints) written unpacked, one field per value.
    fn unpacked(mut bytes: &[u8], tag: u32) -> Vec<u8> {
        use prost::encoding::{decode_key, decode_varint, encode_key, encode_varint, WireType};
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (t, wire) = decode_key(&mut bytes).unwrap();
            let start = out.len();
            encode_key(t, wire, &mut out);
            let value = match wire {
                WireType::Varint => {
                    encode_varint(decode_varint(&mut bytes).unwrap(), &mut out);
                    continue;
                }
                WireType::LengthDelimited => {
                    let len = decode_varint(&mut bytes).unwrap() as usize;
                    let (value, rest) = bytes.split_at(len);
                    bytes = rest;
                    value
                }
                other => panic!("{other:?}"),
            };
            if t == tag {
                out.truncate(start);
                let mut packed = value;
                while !packed.is_empty() {
                    encode_key(tag, WireType::Varint, &mut out);
                    encode_varint(decode_varint(&mut packed).unwrap(), &mut out);
                }
            } else {
                encode_varint(value.len() as u64, &mut out);
                out.extend_from_slice(value);
            }
        }
        out
    }
}
