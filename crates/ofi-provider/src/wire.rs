//! How libfabric tags and message kinds are carried in the cxi transport's 48 user match
//! bits ([`transport::MatchBits`]; the transport keeps bits 48..64 for itself).
//!
//! | bits | use |
//! |---|---|
//! | 0..46 | the libfabric tag (`mem_tag_format` [`TAG_MASK`]) |
//! | 46 | the payload starts with 8 bytes of remote CQ data (`fi_senddata`, `fi_tsenddata`) |
//! | 47 | an untagged (`FI_MSG`) message: tag bits zero |
//!
//! The real CXI provider also spends match bits on its protocol beside a 48-bit tag
//! (cassini.md §4); here the transport's bits come first, so the tag gets 46.

#![forbid(unsafe_code)]

/// The tag bits a user may set.
pub const TAG_MASK: u64 = (1 << 46) - 1;
/// The message carries 8 bytes of remote CQ data in front of its payload.
pub const DATA: u64 = 1 << 46;
/// An untagged message.
pub const UNTAGGED: u64 = 1 << 47;
/// Size of the remote CQ data prefix.
pub const DATA_LEN: usize = 8;

/// Match bits of a message.
pub fn bits(tag: Option<u64>, data: bool) -> u64 {
    let kind = match tag {
        Some(t) => t & TAG_MASK,
        None => UNTAGGED,
    };
    if data { kind | DATA } else { kind }
}

/// `(bits, ignore)` of a receive: a tagged one compares the tag outside `ignore`, an untagged
/// one matches only untagged messages; both accept messages with or without CQ data.
pub fn recv_match(tag: Option<(u64, u64)>) -> (u64, u64) {
    match tag {
        Some((t, ignore)) => (t & TAG_MASK & !ignore, (ignore & TAG_MASK) | DATA),
        None => (UNTAGGED, DATA),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(recv: (u64, u64), sent: u64) -> bool {
        (recv.0 ^ sent) & !recv.1 == 0
    }

    #[test]
    fn tagged_and_untagged_messages_never_match_each_other() {
        let t = recv_match(Some((5, 0)));
        assert!(matches(t, bits(Some(5), false)));
        assert!(matches(t, bits(Some(5), true)));
        assert!(!matches(t, bits(Some(4), false)));
        assert!(!matches(t, bits(None, false)));
        let u = recv_match(None);
        assert!(matches(u, bits(None, true)));
        assert!(!matches(u, bits(Some(0), false)));
        let any = recv_match(Some((0, u64::MAX)));
        assert!(matches(any, bits(Some(TAG_MASK), false)));
        assert!(!matches(any, bits(None, false)));
    }
}
