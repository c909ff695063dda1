//! Frames on a replica-to-replica connection (FORMAT.md, "Replication
//! frames"): many messages per frame, so a burst of appends and every
//! group's heartbeats share one write.
//!
//! ```text
//! frame    = u32 length L of the payload, u32 CRC32C of the payload, payload
//! payload  = u16 message count, then each message:
//!            u32 group, u64 request id, u8 kind (1 request, 2 reply),
//!            u32 body length B, B bytes of postcard body
//! ```
//!
//! The decoder takes arbitrary bytes, never panics, and never allocates
//! from a length it has not checked against [`MAX_FRAME`] and the input.

use crate::error::{Error, Result};

/// Largest payload a frame may carry (a whole snapshot travels in one
/// message for now).
pub const MAX_FRAME: usize = 256 << 20;
/// Bytes before a frame's payload.
pub const FRAME_HEADER_LEN: usize = 8;
const MESSAGE_HEADER_LEN: usize = 17;

/// Whether a message asks or answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request = 1,
    Reply = 2,
}

/// One message of a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub group: u32,
    pub id: u64,
    pub kind: Kind,
    pub body: Vec<u8>,
}

fn corrupt(why: impl Into<String>) -> Error {
    Error::corrupted(format!("replication frame: {}", why.into()))
}

/// Appends the frame holding `messages` (at most `u16::MAX`) to `out`.
pub fn encode(messages: &[Message], out: &mut Vec<u8>) -> Result<()> {
    let count = u16::try_from(messages.len()).map_err(|_| corrupt("more than 65535 messages"))?;
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    out.extend_from_slice(&count.to_le_bytes());
    for m in messages {
        out.extend_from_slice(&m.group.to_le_bytes());
        out.extend_from_slice(&m.id.to_le_bytes());
        out.push(m.kind as u8);
        out.extend_from_slice(&(m.body.len() as u32).to_le_bytes());
        out.extend_from_slice(&m.body);
    }
    let len = out.len() - start - FRAME_HEADER_LEN;
    if len > MAX_FRAME {
        out.truncate(start);
        return Err(corrupt(format!("payload of {len} bytes is above {MAX_FRAME}")));
    }
    let crc = crc32c::crc32c(&out[start + FRAME_HEADER_LEN..]);
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// The payload length a frame header announces, once checked.
pub fn payload_len(header: &[u8; FRAME_HEADER_LEN]) -> Result<usize> {
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    if !(2..=MAX_FRAME).contains(&len) {
        return Err(corrupt(format!("payload length {len}")));
    }
    Ok(len)
}

/// The messages of one frame's payload, given its header.
pub fn decode(header: &[u8; FRAME_HEADER_LEN], payload: &[u8]) -> Result<Vec<Message>> {
    let len = payload_len(header)?;
    if payload.len() != len {
        return Err(corrupt(format!("payload of {} bytes, header says {len}", payload.len())));
    }
    let crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if crc32c::crc32c(payload) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let count = u16::from_le_bytes([payload[0], payload[1]]) as usize;
    let mut rest = &payload[2..];
    let mut messages = Vec::with_capacity(count.min(rest.len() / MESSAGE_HEADER_LEN));
    for i in 0..count {
        if rest.len() < MESSAGE_HEADER_LEN {
            return Err(corrupt(format!("message {i} of {count} is cut short")));
        }
        let group = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes"));
        let id = u64::from_le_bytes(rest[4..12].try_into().expect("8 bytes"));
        let kind = match rest[12] {
            1 => Kind::Request,
            2 => Kind::Reply,
            other => return Err(corrupt(format!("message {i} has kind {other}"))),
        };
        let body_len = u32::from_le_bytes(rest[13..17].try_into().expect("4 bytes")) as usize;
        if body_len > rest.len() - MESSAGE_HEADER_LEN {
            return Err(corrupt(format!("message {i} body of {body_len} bytes overruns the frame")));
        }
        let body = rest[MESSAGE_HEADER_LEN..MESSAGE_HEADER_LEN + body_len].to_vec();
        messages.push(Message { group, id, kind, body });
        rest = &rest[MESSAGE_HEADER_LEN + body_len..];
    }
    if !rest.is_empty() {
        return Err(corrupt(format!("{} bytes after the last message", rest.len())));
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(bytes: &[u8]) -> ([u8; FRAME_HEADER_LEN], &[u8]) {
        (bytes[..FRAME_HEADER_LEN].try_into().unwrap(), &bytes[FRAME_HEADER_LEN..])
    }

    #[test]
    fn frames_round_trip_and_refuse_damage() {
        let messages = vec![
            Message { group: 3, id: 9, kind: Kind::Request, body: vec![1, 2, 3] },
            Message { group: 0, id: u64::MAX, kind: Kind::Reply, body: vec![] },
            Message { group: 7, id: 1, kind: Kind::Request, body: vec![0xAB; 1000] },
        ];
        let mut bytes = Vec::new();
        encode(&messages, &mut bytes).unwrap();
        let (header, payload) = split(&bytes);
        assert_eq!(decode(&header, payload).unwrap(), messages);
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x04;
            let (header, payload) = split(&bad);
            assert!(decode(&header, payload).is_err(), "flip at {at}");
        }
        for cut in FRAME_HEADER_LEN..bytes.len() {
            let (header, payload) = split(&bytes[..cut]);
            assert!(decode(&header, payload).is_err(), "cut at {cut}");
        }
        let mut empty = Vec::new();
        encode(&[], &mut empty).unwrap();
        let (header, payload) = split(&empty);
        assert_eq!(decode(&header, payload).unwrap(), vec![]);
    }
}
