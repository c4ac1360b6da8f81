//! Checksums against corruption: the seal a job result carries from the worker that computed it, and the
//! check of one stored line. Both are CRC-64/XZ (the ECMA-182 polynomial).
//!
//! Why a CRC, and this one: what these checksums guard against is damage (a flipped bit on disk, a
//! changed digit in a file, a torn write), not a liar; lying workers are the job of verification. A CRC
//! of degree 64 detects, with certainty, every error burst of up to 64 bits and every change of up to
//! three bits in messages of these lengths. The seal is taken over a canonical binary form in which each
//! number is 8 bytes, so a change to any one field (a changed digit, a flipped byte) is a burst of at
//! most 64 bits: always detected, never "probably". Anything wider slips through with probability
//! 2^-64. 32 bits (CRC-32, as sled uses) would leave a one-in-four-billion escape per damaged record,
//! which a record run with tens of millions of records should not accept; a cryptographic hash would
//! buy nothing here (the adversary model is damage) at several times the cost.

use crate::job::{JobKey, JobResult};

/// Version of the sealed form: bumped if its layout ever changes, so an old seal is never misread.
pub const SEAL_VERSION: u8 = 1;

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_XZ);

/// The CRC-64 of `bytes`.
pub fn checksum(bytes: &[u8]) -> u64 {
    CRC64.checksum(bytes)
}

/// The seal of a job result: a checksum over the plan's fingerprint, the job's key and everything the
/// result states. The worker computes it as soon as the job is done; every later reader (journal, wire,
/// store, ledger, export, import) recomputes and compares it.
pub fn seal(fingerprint: u64, key: &JobKey, result: &JobResult) -> u64 {
    let mut digest = CRC64.digest();
    digest.update(&[SEAL_VERSION]);
    digest.update(&fingerprint.to_be_bytes());
    digest.update(&[key.0.len() as u8]);
    digest.update(&key.0);
    digest.update(&result.total.to_be_bytes());
    match result.unique8 {
        Some(u) => {
            digest.update(&[1]);
            digest.update(&u.to_be_bytes());
        }
        None => digest.update(&[0]),
    }
    digest.update(&result.nodes.to_be_bytes());
    digest.finalize()
}

/// Checks a result against its seal.
pub fn verify_seal(fingerprint: u64, key: &JobKey, result: &JobResult, sealed: u64) -> bool {
    seal(fingerprint, key, result) == sealed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> JobResult {
        JobResult {
            total: 2_279_184,
            unique8: Some(285_053 * 8),
            nodes: 9_876_543,
        }
    }

    #[test]
    fn the_seal_changes_with_every_field_and_every_single_bit() {
        let key = JobKey(vec![3, 7, 1]);
        let sealed = seal(0xfeed, &key, &result());
        assert!(verify_seal(0xfeed, &key, &result(), sealed));
        // One changed decimal digit, as in the journal attack: 2,279,184 -> 2,289,184.
        let digit = JobResult {
            total: 2_289_184,
            ..result()
        };
        assert!(!verify_seal(0xfeed, &key, &digit, sealed));
        assert!(!verify_seal(0xfeee, &key, &result(), sealed));
        assert!(!verify_seal(
            0xfeed,
            &JobKey(vec![3, 7, 2]),
            &result(),
            sealed
        ));
        assert!(!verify_seal(
            0xfeed,
            &key,
            &JobResult {
                unique8: None,
                ..result()
            },
            sealed
        ));
        for bit in 0..64 {
            for field in 0..3 {
                let mut r = result();
                match field {
                    0 => r.total ^= 1 << bit,
                    1 => r.unique8 = r.unique8.map(|u| u ^ (1 << bit)),
                    _ => r.nodes ^= 1 << bit,
                }
                assert!(
                    !verify_seal(0xfeed, &key, &r, sealed),
                    "bit {bit} of field {field}"
                );
            }
        }
    }
}
