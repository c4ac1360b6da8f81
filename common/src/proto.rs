//! The wire contract (`proto/nqueens.proto`), generated at build time, and the conversions between its
//! messages and this crate's own types. Nothing outside the gRPC layers should touch these types.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("nqueens.v1");

/// The encoded descriptor set of the proto, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/nqueens_descriptor.bin"));

/// Most jobs one lease request may ask for (the coordinator refuses more).
pub const MAX_LEASE_CAPACITY: u32 = 4096;

impl From<crate::Strategy> for Strategy {
    fn from(s: crate::Strategy) -> Strategy {
        match s {
            crate::Strategy::D4 => Strategy::D4,
            crate::Strategy::Mirror => Strategy::Mirror,
        }
    }
}

/// The strategy a wire value names; unknown numbers (a newer client) are an error, never a guess.
pub fn strategy_from_wire(value: i32) -> crate::Result<crate::Strategy> {
    match Strategy::try_from(value) {
        Ok(Strategy::Unspecified | Strategy::D4) => Ok(crate::Strategy::D4),
        Ok(Strategy::Mirror) => Ok(crate::Strategy::Mirror),
        Err(_) => Err(crate::Error::UnknownStrategy(format!("wire value {value}"))),
    }
}
