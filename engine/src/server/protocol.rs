//! The protocol's value formats: offsets, strict integers, TTLs, RFC 3339
//! timestamps and the long-poll cursor.
//!
//! Offsets on the wire are `%016d_%016d`: the first field is reserved and
//! always zero in this version (a later version may number records there,
//! keeping the text order equal to the stream order), the second is rill's
//! byte offset. Text order is therefore stream order, as the protocol
//! requires. `-1` means the stream's start and `now` its tail; anything
//! else, including a right-shaped offset with a non-zero first field, is
//! refused. Integers in headers are strict: ASCII digits only, no sign, no
//! leading zero (except `0` itself), no exponent, and they must fit `u64`.
//! Every parser here is pure and returns a message a client can act on.

use std::time::{SystemTime, UNIX_EPOCH};

/// Where a read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// `-1` (or no offset): the first retained byte.
    Start,
    /// `now`: the tail at the time of the request.
    Now,
    /// A byte offset.
    At(u64),
}

/// Formats a byte offset in the protocol's form (16 digits cover 10 PB
/// per stream, far beyond what a stream holds).
pub fn format_offset(offset: u64) -> String {
    format!("{:016}_{:016}", 0, offset)
}

/// Parses an offset parameter or header value.
pub(crate) fn parse_offset(text: &str) -> Result<OffsetSpec, String> {
    match text {
        "-1" => return Ok(OffsetSpec::Start),
        "now" => return Ok(OffsetSpec::Now),
        _ => {}
    }
    let bytes = text.as_bytes();
    let shaped = bytes.len() == 33
        && bytes[16] == b'_'
        && bytes[..16].iter().all(u8::is_ascii_digit)
        && bytes[17..].iter().all(u8::is_ascii_digit);
    if !shaped {
        return Err(format!(
            "offset {text:?} is malformed: expected -1, now, or two 16-digit fields joined by '_'"
        ));
    }
    if bytes[..16].iter().any(|b| *b != b'0') {
        return Err(format!("offset {text:?} is not one this server issued (its first field must be zero)"));
    }
    let offset: u64 = text[17..].parse().map_err(|_| format!("offset {text:?} is out of range"))?;
    Ok(OffsetSpec::At(offset))
}

/// Parses a strict non-negative integer (see the module docs).
pub(crate) fn parse_strict_u64(what: &str, text: &str) -> Result<u64, String> {
    let bytes = text.as_bytes();
    let digits = !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit);
    if !digits {
        return Err(format!("{what} must be a non-negative integer in decimal digits, got {text:?}"));
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return Err(format!("{what} must not have leading zeros, got {text:?}"));
    }
    text.parse().map_err(|_| format!("{what} {text:?} is too large"))
}

/// Parses `Stream-TTL`: a strict positive number of seconds.
pub(crate) fn parse_ttl(text: &str) -> Result<u64, String> {
    let ttl = parse_strict_u64("Stream-TTL", text)?;
    if ttl == 0 {
        return Err("Stream-TTL must be at least 1 second".into());
    }
    if ttl > u64::MAX / 1000 {
        return Err(format!("Stream-TTL {ttl} is too large"));
    }
    Ok(ttl)
}

/// Parses an RFC 3339 timestamp (`2026-12-03T10:00:00Z`,
/// `...T10:00:00.123+01:00`) into Unix milliseconds.
pub(crate) fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not an RFC 3339 timestamp (e.g. 2026-12-03T10:00:00Z)");
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |range: std::ops::Range<usize>| -> Result<u64, String> {
        let s = &b[range];
        if s.iter().all(u8::is_ascii_digit) {
            Ok(s.iter().fold(0u64, |acc, d| acc * 10 + u64::from(d - b'0')))
        } else {
            Err(bad())
        }
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let mut i = 19;
    let mut millis = 0u64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        for (k, d) in b[start..i].iter().take(3).enumerate() {
            millis += u64::from(d - b'0') * [100, 10, 1][k];
        }
    }
    let offset_s: i64 = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hh = num(i + 1..i + 3)? as i64;
            let mm = num(i + 4..i + 6)? as i64;
            let _ = (h1, h2, m1, m2);
            if hh > 23 || mm > 59 {
                return Err(bad());
            }
            let s = hh * 3600 + mm * 60;
            if *sign == b'+' {
                s
            } else {
                -s
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(year as i64, month as i64, day as i64);
    let secs = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset_s;
    if secs < 0 {
        return Err(format!("{text:?} is before 1970"));
    }
    Ok(secs as u64 * 1000 + millis)
}

/// Formats Unix milliseconds as RFC 3339 in UTC with milliseconds.
pub(crate) fn format_rfc3339_ms(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, ms % 1000)
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, m, d)
}

/// Now in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The protocol's cursor epoch, 2024-10-09T00:00:00Z, in Unix seconds.
pub(crate) const CURSOR_EPOCH_S: u64 = 1_728_432_000;
/// One cursor interval.
pub(crate) const CURSOR_INTERVAL_S: u64 = 20;

/// The `Stream-Cursor` to send: the current 20 s interval since the
/// cursor epoch, or, when the client already holds that interval (or a
/// later one), a value strictly above the client's, so caches keyed on
/// the cursor never serve the same long-poll answer twice.
pub(crate) fn next_cursor(now_ms: u64, client: Option<u64>) -> u64 {
    let current = (now_ms / 1000).saturating_sub(CURSOR_EPOCH_S) / CURSOR_INTERVAL_S;
    match client {
        Some(c) if c >= current => c.saturating_add(1 + now_ms % 3),
        _ => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_and_sort_like_the_stream() {
        for o in [0u64, 1, 9, 10, 12345, 9_999_999_999_999_999] {
            assert_eq!(parse_offset(&format_offset(o)).unwrap(), OffsetSpec::At(o));
        }
        assert!(format_offset(9) < format_offset(10));
        assert_eq!(parse_offset("-1").unwrap(), OffsetSpec::Start);
        assert_eq!(parse_offset("now").unwrap(), OffsetSpec::Now);
    }

    #[test]
    fn malformed_offsets_are_refused() {
        for bad in [
            "",
            "0",
            "0,1",
            "0 1",
            "-2",
            "NOW",
            "../x",
            "0000000000000000_000000000000000",
            "0000000000000000-0000000000000000",
            "0000000000000000_000000000000000a",
            "0000000000000001_0000000000000000",
            "0000000000000000_0000000000000000\n",
            "9999999999999999_9999999999999999",
        ] {
            assert!(parse_offset(bad).is_err(), "{bad:?}");
        }
        assert!(parse_offset("0000000000000000_9999999999999999").is_ok());
    }

    #[test]
    fn strict_integers() {
        assert_eq!(parse_strict_u64("x", "0").unwrap(), 0);
        assert_eq!(parse_strict_u64("x", "42").unwrap(), 42);
        for bad in ["", "-1", "+1", "01", "1e3", "1.5", " 1", "0xyz", "1abc", "99999999999999999999"] {
            assert!(parse_strict_u64("x", bad).is_err(), "{bad:?}");
        }
        assert!(parse_ttl("0").is_err());
        assert_eq!(parse_ttl("3600").unwrap(), 3600);
        assert!(parse_ttl("00060").is_err());
    }

    #[test]
    fn rfc3339_parses_and_formats() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(parse_rfc3339_ms("2024-10-09T00:00:00Z").unwrap(), CURSOR_EPOCH_S * 1000);
        assert_eq!(parse_rfc3339_ms("2024-10-09T01:00:00.250+01:00").unwrap(), CURSOR_EPOCH_S * 1000 + 250);
        assert_eq!(parse_rfc3339_ms("2024-02-29T00:00:00Z").unwrap() / 1000, 1_709_164_800);
        for bad in [
            "not-a-timestamp",
            "2024-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-10-09 00:00:00Z",
            "2024-10-09T00:00:00",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad}");
        }
        let ms = 1_764_756_000_123;
        assert_eq!(parse_rfc3339_ms(&format_rfc3339_ms(ms)).unwrap(), ms);
    }

    #[test]
    fn cursor_moves_past_the_clients() {
        let now = (CURSOR_EPOCH_S + 200) * 1000;
        assert_eq!(next_cursor(now, None), 10);
        assert_eq!(next_cursor(now, Some(3)), 10);
        assert!(next_cursor(now, Some(10)) > 10);
        assert!(next_cursor(now, Some(50)) > 50);
    }
}
