//! JSON mode's wire rules: what a JSON body holds and how JSON records are
//! sent back.
//!
//! A body sent to an `application/json` stream must be one JSON value. A
//! top-level array is flattened one level: each element is one message
//! (`[1,[2]]` is two messages, `1` and `[2]`); any other value is one
//! message. An empty array is refused on append (it would append nothing)
//! and allowed on create (an empty stream). Messages keep their bytes
//! exactly as sent (numbers, key order and spacing inside a message are
//! not rewritten). A read answers with one JSON array of the messages it
//! covers, built by [`frame_array`].
//!
//! Each message is stored as its own engine record (a body of many
//! messages is one multi-record append, `Append::records`), and JSON reads
//! are record reads, so a read answers with exactly the messages it covers,
//! whatever requests they came in.

use crate::ReadReply;
use bytes::{Bytes, BytesMut};
use serde_json::value::RawValue;

/// True for the media types served in JSON mode.
pub(crate) fn is_json(media_type: &str) -> bool {
    media_type == "application/json"
}

/// Splits a JSON body into its messages (see the module docs).
pub(crate) fn split_messages(body: &[u8], allow_empty: bool) -> Result<Vec<Bytes>, String> {
    let value: &RawValue =
        serde_json::from_slice(body).map_err(|e| format!("the body is not one JSON value: {e}"))?;
    let text = value.get();
    if !text.starts_with('[') {
        return Ok(vec![Bytes::copy_from_slice(text.as_bytes())]);
    }
    let items: Vec<&RawValue> =
        serde_json::from_str(text).map_err(|e| format!("the body is not one JSON value: {e}"))?;
    if items.is_empty() && !allow_empty {
        return Err("an empty JSON array appends no message".into());
    }
    Ok(items.iter().map(|v| Bytes::copy_from_slice(v.get().as_bytes())).collect())
}

/// A JSON array of records.
pub(crate) fn frame_array(records: &[Bytes]) -> Bytes {
    let mut out = BytesMut::with_capacity(2 + records.iter().map(|r| r.len() + 1).sum::<usize>());
    out.extend_from_slice(b"[");
    for (i, r) in records.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",");
        }
        out.extend_from_slice(r);
    }
    out.extend_from_slice(b"]");
    out.freeze()
}

/// The body of a read: JSON streams (read as records) answer with an
/// array of their messages.
pub(crate) fn read_body(reply: &ReadReply, json_mode: bool) -> Bytes {
    if !json_mode {
        return reply.payload.clone();
    }
    let messages: Vec<Bytes> = reply.record_iter().map(|(_, bytes)| bytes).collect();
    frame_array(&messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RecordMeta;

    fn texts(v: Vec<Bytes>) -> Vec<String> {
        v.into_iter().map(|b| String::from_utf8(b.to_vec()).unwrap()).collect()
    }

    #[test]
    fn flattens_one_level() {
        assert_eq!(texts(split_messages(br#"{"a":1}"#, false).unwrap()), [r#"{"a":1}"#]);
        assert_eq!(
            texts(split_messages(b"[1, [2, 3], {\"b\":4}]", false).unwrap()),
            ["1", "[2, 3]", "{\"b\":4}"]
        );
        assert_eq!(texts(split_messages(b"[[[1]]]", false).unwrap()), ["[[1]]"]);
        assert_eq!(texts(split_messages(b" \"s\" ", false).unwrap()), ["\"s\""]);
    }

    #[test]
    fn keeps_message_bytes() {
        let body = br#"[{"z":1,"a":2.50}]"#;
        assert_eq!(texts(split_messages(body, false).unwrap()), [r#"{"z":1,"a":2.50}"#]);
    }

    #[test]
    fn refuses_bad_json_and_empty_appends() {
        assert!(split_messages(b"{ invalid json }", false).is_err());
        assert!(split_messages(b"", false).is_err());
        assert!(split_messages(b"1 2", false).is_err());
        assert!(split_messages(b"[]", false).is_err());
        assert!(split_messages(b"[]", true).unwrap().is_empty());
    }

    #[test]
    fn frames_arrays() {
        assert_eq!(&frame_array(&[])[..], b"[]");
        assert_eq!(&frame_array(&[Bytes::from_static(b"1"), Bytes::from_static(b"{}")])[..], b"[1,{}]");
    }

    fn reply(payload: &'static [u8], starts: &[u64]) -> ReadReply {
        ReadReply {
            payload: Bytes::from_static(payload),
            offset: starts.first().copied().unwrap_or(0),
            next_offset: starts.first().copied().unwrap_or(0) + payload.len() as u64,
            up_to_date: true,
            closed: false,
            records: starts.iter().map(|&offset| RecordMeta { offset, at_ms: 1 }).collect(),
        }
    }

    #[test]
    fn json_reads_are_arrays_of_their_records() {
        assert_eq!(&read_body(&reply(b"", &[]), true)[..], b"[]");
        assert_eq!(&read_body(&reply(b"{}", &[4]), true)[..], b"[{}]");
        assert_eq!(&read_body(&reply(b"1{\"a\":2}[3]", &[10, 11, 18]), true)[..], b"[1,{\"a\":2},[3]]");
        assert_eq!(&read_body(&reply(b"ab", &[]), false)[..], b"ab");
    }
}
