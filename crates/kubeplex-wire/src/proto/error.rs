//! Why protobuf bytes could not be read.

/// Why protobuf bytes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("body does not start with the kubernetes protobuf prefix k8s\\0")]
    MissingMagic,
    #[error("message is truncated")]
    Truncated,
    #[error("varint is longer than 64 bits")]
    VarintOverflow,
    #[error("invalid field number 0")]
    InvalidFieldNumber,
    #[error("unsupported protobuf wire type {0}")]
    UnsupportedWireType(u8),
    #[error("field {0} has the wrong wire type")]
    WrongWireType(&'static str),
    #[error("field {0} is not valid utf-8")]
    InvalidUtf8(&'static str),
    #[error("message has no {0}")]
    MissingField(&'static str),
    #[error("watch frame of {len} bytes is over the limit of {max} bytes")]
    FrameTooLarge { len: usize, max: usize },
}
