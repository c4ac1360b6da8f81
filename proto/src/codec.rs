//! The gRPC codec of the generated stubs: prost's, except that a message that cannot be decoded is
//! INVALID_ARGUMENT (the sender's fault, never worth retrying) instead of prost's INTERNAL, which workers
//! rightly treat as transient and would retry forever, and that a message of more fields or bytes than
//! its kind may have ([`Bounds`]) is refused before it is decoded.

use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::{Code, Status};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

use crate::bounds::Bounds;

/// The number of top-level fields in `bytes`, counting stops just past `most`; `None` if its fields
/// cannot be framed (groups included: this protocol has none), which is refused.
pub fn top_level_fields(mut bytes: &[u8], most: usize) -> Option<usize> {
    use prost::encoding::decode_varint;
    let mut n = 0;
    while !bytes.is_empty() && n <= most {
        let key = decode_varint(&mut bytes).ok()?;
        let skip = match key & 7 {
            0 => {
                decode_varint(&mut bytes).ok()?;
                0
            }
            1 => 8,
            2 => usize::try_from(decode_varint(&mut bytes).ok()?).ok()?,
            5 => 4,
            _ => return None,
        };
        bytes = bytes.get(skip..)?;
        n += 1;
    }
    Some(n)
}

/// Whether `message`, a message of kind `U` not yet decoded, is within its kind's [`Bounds`] and its
/// fields can be framed; measured before anything is decoded, since an entry of a repeated message
/// field can take 2 bytes on the wire and a hundred or more once decoded.
pub fn within_bounds<U: Bounds>(message: &[u8]) -> Result<(), Status> {
    let (name, most) = (U::NAME, U::FIELDS);
    if message.len() > U::BYTES {
        return Err(Status::invalid_argument(format!(
            "a {name} of {} bytes, more than its {} at most; nothing decoded",
            message.len(),
            U::BYTES
        )));
    }
    match top_level_fields(message, most) {
        Some(n) if n > most => Err(Status::invalid_argument(format!(
            "a {name} of more than {most} fields ({n} or more counted); nothing decoded"
        ))),
        Some(_) => Ok(()),
        // Prost would skip what the count cannot (groups, which this protocol never sends): refused
        // here, so that nothing escapes the count.
        None => Err(Status::invalid_argument(
            "undecodable message: its fields cannot be framed (a length past its end, a group, an unknown wire type); the sender speaks another protocol or the message was damaged",
        )),
    }
}

/// [`ProstCodec`] with decode errors answered as INVALID_ARGUMENT, and messages past their kind's
/// [`Bounds`] refused before they are decoded.
#[derive(Debug)]
pub struct StrictCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for StrictCodec<T, U> {
    fn default() -> Self {
        StrictCodec(ProstCodec::default())
    }
}

impl<T, U> Codec for StrictCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Bounds + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(self.0.decoder())
    }
}

/// The decoder of [`StrictCodec`].
#[derive(Debug)]
pub struct StrictDecoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default + Bounds> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        use prost::bytes::Buf;
        // A message is whole in one chunk when it is decoded (tonic buffers it so).
        within_bounds::<U>(buf.chunk()).map_err(crate::refusing_the_request)?;
        self.0.decode(buf).map_err(|status| match status.code() {
            Code::Internal => crate::refusing_the_request(Status::invalid_argument(format!(
                "undecodable message: {}; the sender speaks another protocol or the message was damaged",
                status.message()
            ))),
            _ => status,
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::MAX_FIELDS;

    /// A message kind of 3 fields and 10 bytes at most.
    struct Small;

    impl Bounds for Small {
        const NAME: &'static str = "Small";
        const FIELDS: usize = 3;
        const BYTES: usize = 10;
    }

    #[test]
    fn a_message_is_measured_against_its_kinds_bounds() {
        // Three varints of 3 bytes each: 9 bytes, 3 fields.
        let three = [0x08, 0x96, 0x01, 0x08, 0x96, 0x01, 0x08, 0x96, 0x01];
        assert!(within_bounds::<Small>(&three).is_ok());
        let mut four = three.to_vec();
        four.push(0x08);
        four.push(0x01);
        let refused = within_bounds::<Small>(&four).unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(
            refused
                .message()
                .contains("Small of 11 bytes, more than its 10"),
            "{refused:?}"
        );
        let refused = within_bounds::<Small>(&four[..8]).unwrap_err();
        assert!(refused.message().contains("undecodable"), "{refused:?}");
        // Four fields in 8 bytes: within the bytes, past the fields.
        let four = [0x08, 0x01, 0x08, 0x01, 0x08, 0x01, 0x08, 0x01];
        let refused = within_bounds::<Small>(&four).unwrap_err();
        assert!(
            refused
                .message()
                .contains("Small of more than 3 fields (4 or more counted)"),
            "{refused:?}"
        );
        // Ten bytes in three fields: at both bounds, within them.
        let ten = [0x08, 0x01, 0x1a, 4, 0, 0, 0, 0, 0x08, 0x01];
        assert!(within_bounds::<Small>(&ten).is_ok());
    }

    /// What the server's decoder makes of `body`, one framed message of `ReportRequest`.
    async fn decoded(message: &[u8]) -> Result<Option<crate::ReportRequest>, Status> {
        let mut body = vec![0u8];
        body.extend_from_slice(&(message.len() as u32).to_be_bytes());
        body.extend_from_slice(message);
        let body = http_body_util::Full::new(bytes::Bytes::from(body));
        let decoder =
            StrictCodec::<crate::ReportResponse, crate::ReportRequest>::default().decoder();
        tonic::codec::Streaming::new_request(decoder, body, None, None)
            .message()
            .await
    }

    #[tokio::test]
    async fn the_decoder_decodes_what_is_within_bounds_and_refuses_the_rest() {
        use prost::Message;
        let report = crate::ReportRequest {
            worker_id: "w".into(),
            results: vec![crate::JobResult::default(); 3],
            ..Default::default()
        };
        assert_eq!(
            decoded(&report.encode_to_vec()).await.unwrap(),
            Some(report)
        );
        // Past the kind's fields, before decoding.
        let entries = crate::ReportRequest::FIELDS + 1;
        let empties: Vec<u8> = std::iter::repeat_n([0x12u8, 0x00], entries)
            .flatten()
            .collect();
        let refused = decoded(&empties).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(crate::refuses_the_request(&refused), "{refused:?}");
        assert!(
            refused.message().contains("ReportRequest of more than"),
            "{refused:?}"
        );
        // Framed, but not a report: prost's INTERNAL becomes INVALID_ARGUMENT, a refusal.
        let refused = decoded(&[0x12, 0x02, 0xff, 0xff]).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(crate::refuses_the_request(&refused), "{refused:?}");
        assert!(
            refused.message().contains("undecodable message"),
            "{refused:?}"
        );
    }

    #[test]
    fn fields_are_counted_without_decoding_and_bad_framing_is_refused() {
        assert_eq!(top_level_fields(&[], MAX_FIELDS), Some(0));
        // A varint, a fixed64, a length-delimited field of 2 bytes, a fixed32.
        let message = [
            0x08, 0x96, 0x01, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 2, 7, 7, 0x25, 0, 0, 0, 0,
        ];
        assert_eq!(top_level_fields(&message, MAX_FIELDS), Some(4));
        assert_eq!(top_level_fields(&message, 2), Some(3), "stops just past 2");
        assert_eq!(
            top_level_fields(&[0x1a, 5, 1], MAX_FIELDS),
            None,
            "a length past the end"
        );
        assert_eq!(top_level_fields(&[0x0b], MAX_FIELDS), None, "a group");
        let empties: Vec<u8> = std::iter::repeat_n([0x12u8, 0x00], MAX_FIELDS + 10)
            .flatten()
            .collect();
        assert_eq!(
            top_level_fields(&empties, MAX_FIELDS),
            Some(MAX_FIELDS + 1),
            "stops early"
        );
    }
}
