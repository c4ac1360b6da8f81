//! The wire contract of nqueens-cluster, as a crate.
//!
//! Design: `nqueens.proto` is compiled at build time by protox (pure Rust, so no system `protoc`) into
//! prost messages and tonic stubs that use [`codec::StrictCodec`]. This crate owns everything that
//! touches those types: the conversions between wire and core values (strategy, job keys, results), the
//! client connection with its bearer token and TLS ([`connect()`]), and the per-method call metrics that
//! both ends keep ([`metrics`]). Dependencies point one way: `nqueens-common` (the pure counting core)
//! below, the coordinator and the worker above; prost types never travel past the gRPC layers.

pub mod bounds;
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

/// Most GPUs a worker may say it computes on (the coordinator refuses more), and most kernel shapes a
/// lease request or report may name.
pub const MAX_GPUS: u32 = 256;

/// Most results one report may hold (the coordinator refuses more).
pub const MAX_REPORT_RESULTS: usize = 4096;

/// Most lease ids one heartbeat or release may name (the coordinator refuses more).
pub const MAX_LEASE_IDS: usize = 16_384;

// Worker and device names are domain rules, kept in `nqueens_common::names`; re-exported for the wire's
// users.
pub use nqueens_common::names::{
    distinct_gpu_kernels, valid_device, valid_gpu_kernel, valid_new_worker_id, valid_worker_id,
    MAX_DEVICE_LEN, MAX_GPU_KERNEL_LEN, MAX_GPU_SHAPES, MAX_WORKER_ID_LEN, MAX_WORKER_NAME_LEN,
};

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

impl From<Option<nqueens_common::Family>> for Family {
    fn from(f: Option<nqueens_common::Family>) -> Family {
        match f {
            None => Family::Unspecified,
            Some(nqueens_common::Family::CpuStack) => Family::CpuStack,
            Some(nqueens_common::Family::CpuLists) => Family::CpuLists,
            Some(nqueens_common::Family::Gpu) => Family::Gpu,
        }
    }
}

impl Family {
    /// The domain's family (none when unspecified).
    pub fn known(self) -> Option<nqueens_common::Family> {
        match self {
            Family::Unspecified => None,
            Family::CpuStack => Some(nqueens_common::Family::CpuStack),
            Family::CpuLists => Some(nqueens_common::Family::CpuLists),
            Family::Gpu => Some(nqueens_common::Family::Gpu),
        }
    }
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
