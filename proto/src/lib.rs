//! The wire contract of nqueens-cluster, as a crate.
//!
//! Design: `nqueens.proto` is compiled at build time by protox (pure Rust, so no system `protoc`) into
//! prost messages and tonic stubs that use [`codec::StrictCodec`]. This crate owns everything that
//! touches those types: the conversions between wire and core values (strategy, job keys, results), the
//! client connection with its bearer token and TLS ([`connect()`]), and the per-method call metrics that
//! both ends keep ([`metrics`]). Dependencies point one way: `nqueens-common` (the pure counting core)
//! below, the coordinator and the worker above; prost types never travel past the gRPC layers.

pub mod codec;
pub mod connect;
pub mod error;
pub mod metrics;

pub use connect::{connect, Bearer, Client, Connection, DEFAULT_COORDINATOR};
pub use error::{Error, Result};

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    tonic::include_proto!("nqueens.v1");
}
pub use generated::*;

/// The encoded descriptor set of the proto, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/nqueens_descriptor.bin"));

/// The metadata key a refusal of a whole request carries (value [`REFUSED_REQUEST`]): the request
/// itself is malformed or over a limit (a worker name, a batch size, a device name, an undecodable
/// message), not one of the results it reports. A worker stops on it rather than drop its results.
pub const REFUSED: &str = "nqueens-refused";

/// The value of [`REFUSED`] on a refusal of the whole request.
pub const REFUSED_REQUEST: &str = "request";

/// `status` marked as a refusal of the whole request ([`REFUSED`]).
pub fn refusing_the_request(mut status: tonic::Status) -> tonic::Status {
    status.metadata_mut().insert(
        REFUSED,
        tonic::metadata::MetadataValue::from_static(REFUSED_REQUEST),
    );
    status
}

/// Whether `status` refuses the whole request ([`refusing_the_request`]).
pub fn refuses_the_request(status: &tonic::Status) -> bool {
    status
        .metadata()
        .get(REFUSED)
        .is_some_and(|v| v.as_bytes() == REFUSED_REQUEST.as_bytes())
}

/// Most jobs one lease request may ask for (the coordinator refuses more).
pub const MAX_LEASE_CAPACITY: u32 = 4096;

/// Most GPUs a worker may say it computes on (the coordinator refuses more).
pub const MAX_GPUS: u32 = 256;

/// Longest name of the device that computed a result (`JobResult.device`).
pub const MAX_DEVICE_LEN: usize = 64;

/// Longest worker id or name the coordinator takes, in bytes.
pub const MAX_WORKER_ID_LEN: usize = 128;

/// Longest worker name: a worker's id adds its process id and start time (up to 28 characters) and must
/// stay within [`MAX_WORKER_ID_LEN`].
pub const MAX_WORKER_NAME_LEN: usize = MAX_WORKER_ID_LEN - 28;

/// Whether `id` may be a worker's id or name: 1 to [`MAX_WORKER_ID_LEN`] bytes, no control character
/// (the coordinator refuses any request naming another, so a worker checks its own before it starts).
pub fn valid_worker_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_WORKER_ID_LEN && !id.chars().any(char::is_control)
}

/// Whether `device` may name the device of a result: 1 to [`MAX_DEVICE_LEN`] letters, digits or `:._-`
/// (the coordinator refuses a report with any other, so a worker sends only names that pass).
pub fn valid_device(device: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ":._-".contains(c);
    !device.is_empty() && device.len() <= MAX_DEVICE_LEN && device.chars().all(allowed)
}

/// Longest bearer token a coordinator takes, in bytes.
pub const MAX_TOKEN_LEN: usize = 1024;

/// Whether `token` may be a coordinator's bearer token: 1 to [`MAX_TOKEN_LEN`] bytes of printable ASCII
/// (what a gRPC header carries), no space at either end (a token read from a file with its newline, or
/// in any other character set, could never be sent by a client, so `serve` refuses it at start).
pub fn valid_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_TOKEN_LEN
        && token.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && token.trim() == token
}

impl From<nqueens_common::Strategy> for Strategy {
    fn from(s: nqueens_common::Strategy) -> Strategy {
        match s {
            nqueens_common::Strategy::D4 => Strategy::D4,
            nqueens_common::Strategy::Mirror => Strategy::Mirror,
        }
    }
}

/// The strategy a wire value names; unknown numbers (a newer client) are an error, never a guess.
pub fn strategy_from_wire(value: i32) -> nqueens_common::Result<nqueens_common::Strategy> {
    match Strategy::try_from(value) {
        Ok(Strategy::Unspecified | Strategy::D4) => Ok(nqueens_common::Strategy::D4),
        Ok(Strategy::Mirror) => Ok(nqueens_common::Strategy::Mirror),
        Err(_) => Err(nqueens_common::Error::UnknownStrategy(format!(
            "wire value {value}"
        ))),
    }
}
