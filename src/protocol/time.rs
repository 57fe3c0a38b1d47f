//! Timestamps of the protocol and the command line: microseconds since the Unix epoch (what
//! events carry as `timestamp_us`) to and from RFC 3339 text in UTC.
//!
//! Formatting always gives `YYYY-MM-DDTHH:MM:SS.ffffffZ` (six fraction digits, UTC), so
//! lines sort as text in time order. Parsing accepts what a person or a script types for
//! `--since` and `--until`: an RFC 3339 date-time with an optional fraction of up to nine
//! digits (cut to microseconds) and `Z` or a `±HH:MM` offset, a bare `YYYY-MM-DD` meaning
//! midnight UTC, or a plain integer of microseconds. Times before 1970 are refused: no event
//! can carry one.
//!
//! The calendar arithmetic is Howard Hinnant's `civil_from_days` / `days_from_civil` over the
//! proleptic Gregorian calendar, exact for every date this range can hold.

use std::fmt::Write as _;

/// Microseconds per second.
const MICROS_PER_SECOND: u64 = 1_000_000;
/// Seconds per day (UTC has no leap seconds in RFC 3339 arithmetic).
const SECONDS_PER_DAY: u64 = 86_400;
/// Days in a 400-year Gregorian era.
const DAYS_PER_ERA: i64 = 146_097;

/// Formats microseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
#[must_use]
pub fn format_rfc3339(timestamp_us: u64) -> String {
    let seconds = timestamp_us / MICROS_PER_SECOND;
    let micros = timestamp_us % MICROS_PER_SECOND;
    let days = seconds / SECONDS_PER_DAY;
    let second_of_day = seconds % SECONDS_PER_DAY;
    // u64::MAX microseconds is about 213 million days: it fits an i64.
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(i64::MAX));
    let mut out = String::with_capacity(27);
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    );
    out
}

/// Parses `--since`/`--until` text into microseconds since the Unix epoch: an RFC 3339
/// date-time (`2026-12-03T14:42:26.5Z`, `2026-12-03T16:42:26+02:00`), a date
/// (`2026-12-03`, midnight UTC) or an integer of microseconds. The error says what is wrong in
/// one sentence.
pub fn parse_time(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map_err(|_| format!("{text:?} is too large for microseconds since 1970"));
    }
    parse_rfc3339(text).map_err(|why| {
        format!(
            "{text:?} is not a time: {why} (use RFC 3339 like 2026-12-03T14:42:26Z or \
             2026-12-03, or microseconds since 1970)"
        )
    })
}

/// Parses an RFC 3339 date-time or a bare date; the error is a short reason.
fn parse_rfc3339(text: &str) -> Result<u64, String> {
    let bytes = text.as_bytes();
    let year = digits(bytes, 0, 4, "year")?;
    expect(bytes, 4, b'-')?;
    let month = digits(bytes, 5, 2, "month")?;
    expect(bytes, 7, b'-')?;
    let day = digits(bytes, 8, 2, "day")?;
    if !(1..=12).contains(&month) {
        return Err(format!("month {month} is not 1 to 12"));
    }
    let days_in_month = days_in_month(year, month);
    if day < 1 || day > days_in_month {
        return Err(format!("day {day} is not in {year:04}-{month:02} (1 to {days_in_month})"));
    }
    let days = days_from_civil(year, month, day);
    if bytes.len() == 10 {
        return micros_of(days, 0, 0);
    }
    if !matches!(bytes.get(10), Some(b'T' | b't' | b' ')) {
        return Err("the date must be followed by T and a time, or end".to_owned());
    }
    let hour = digits(bytes, 11, 2, "hour")?;
    expect(bytes, 13, b':')?;
    let minute = digits(bytes, 14, 2, "minute")?;
    expect(bytes, 16, b':')?;
    let second = digits(bytes, 17, 2, "second")?;
    if hour > 23 || minute > 59 || second > 59 {
        return Err(format!("{hour:02}:{minute:02}:{second:02} is not a time of day"));
    }
    let mut at = 19;
    let mut micros = 0;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        let fraction = &text[start..at];
        if fraction.is_empty() || fraction.len() > 9 {
            return Err("a fraction of a second needs 1 to 9 digits".to_owned());
        }
        let padded = format!("{fraction:0<6}");
        micros = padded[..6].parse::<u64>().map_err(|_| "bad fraction".to_owned())?;
    }
    let offset_seconds = match bytes.get(at) {
        Some(b'Z' | b'z') if bytes.len() == at + 1 => 0,
        Some(sign @ (b'+' | b'-')) if bytes.len() == at + 6 => {
            let hours = digits(bytes, at + 1, 2, "offset hours")?;
            expect(bytes, at + 3, b':')?;
            let minutes = digits(bytes, at + 4, 2, "offset minutes")?;
            if hours > 23 || minutes > 59 {
                return Err(format!("offset {hours:02}:{minutes:02} is out of range"));
            }
            let seconds = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'+' { seconds } else { -seconds }
        }
        None => return Err("a time needs Z or an offset like +02:00".to_owned()),
        Some(_) => return Err(format!("unexpected text {:?} after the time", &text[at..])),
    };
    let local = i64::from(hour * 3600 + minute * 60 + second);
    micros_of(days, local - offset_seconds, micros)
}

/// Microseconds of `days` since 1970 plus `seconds` (may be negative through an offset) and
/// `micros`; refuses a time before 1970.
fn micros_of(days: i64, seconds: i64, micros: u64) -> Result<u64, String> {
    let total = days
        .checked_mul(86_400)
        .and_then(|day_seconds| day_seconds.checked_add(seconds))
        .ok_or_else(|| "the time is out of range".to_owned())?;
    let total = u64::try_from(total).map_err(|_| "the time is before 1970".to_owned())?;
    total
        .checked_mul(MICROS_PER_SECOND)
        .and_then(|us| us.checked_add(micros))
        .ok_or_else(|| "the time is out of range".to_owned())
}

/// The number at `bytes[at..at + len]`, all ASCII digits.
fn digits(bytes: &[u8], at: usize, len: usize, what: &str) -> Result<u32, String> {
    let field = bytes.get(at..at + len).filter(|field| field.iter().all(u8::is_ascii_digit));
    let Some(field) = field else {
        return Err(format!("the {what} needs {len} digits"));
    };
    Ok(field.iter().fold(0, |n, digit| n * 10 + u32::from(digit - b'0')))
}

/// Checks the separator at `bytes[at]`.
fn expect(bytes: &[u8], at: usize, separator: u8) -> Result<(), String> {
    if bytes.get(at) == Some(&separator) {
        Ok(())
    } else {
        Err(format!("expected {:?} at position {}", char::from(separator), at + 1))
    }
}

fn is_leap_year(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (negative before it).
fn days_from_civil(year: u32, month: u32, day: u32) -> i64 {
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * DAYS_PER_ERA + day_of_era - 719_468
}

/// The date (year, month, day) of a count of days since 1970-01-01 (not negative here).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(DAYS_PER_ERA);
    let day_of_era = days - era * DAYS_PER_ERA;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_US: u64 = SECONDS_PER_DAY * MICROS_PER_SECOND;

    #[test]
    fn the_epoch_and_known_instants_format_exactly() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(format_rfc3339(1), "1970-01-01T00:00:00.000001Z");
        assert_eq!(format_rfc3339(DAY_US - 1), "1970-01-01T23:59:59.999999Z");
        assert_eq!(format_rfc3339(951_782_400 * MICROS_PER_SECOND), "2000-02-29T00:00:00.000000Z");
        assert_eq!(
            format_rfc3339(4_107_542_400 * MICROS_PER_SECOND),
            "2100-03-01T00:00:00.000000Z"
        );
        assert_eq!(format_rfc3339(1_796_308_946_123_456), "2026-12-03T14:42:26.123456Z");
        // The largest value still formats, past year 9999.
        assert!(format_rfc3339(u64::MAX).ends_with(".551615Z"));
    }

    #[test]
    fn leap_years_follow_the_gregorian_rules() {
        assert!(is_leap_year(2000) && is_leap_year(2024) && is_leap_year(1972));
        assert!(!is_leap_year(1900) && !is_leap_year(2100) && !is_leap_year(2026));
        assert!(parse_time("2000-02-29").is_ok());
        assert!(parse_time("2024-02-29T12:00:00Z").is_ok());
        assert!(parse_time("2100-02-29").unwrap_err().contains("day 29 is not in 2100-02"));
        assert!(parse_time("2026-02-29").is_err());
        // The day after 2100-02-28 is 2100-03-01 (no 29th in 2100).
        let feb_28 = parse_time("2100-02-28").unwrap();
        assert_eq!(format_rfc3339(feb_28 + DAY_US), "2100-03-01T00:00:00.000000Z");
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        // 1970 through 2400: every date formats and parses back to the same instant.
        let mut us = 0;
        while us < 13_569_465_600 * MICROS_PER_SECOND {
            let text = format_rfc3339(us);
            assert_eq!(parse_time(&text), Ok(us), "{text}");
            us += DAY_US + 3_723_000_001;
        }
    }

    #[test]
    fn parsing_accepts_dates_fractions_offsets_and_micros() {
        assert_eq!(parse_time("1970-01-01"), Ok(0));
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_time("0"), Ok(0));
        assert_eq!(parse_time("1796308946123456"), Ok(1_796_308_946_123_456));
        assert_eq!(parse_time("2026-12-03T14:42:26.123456Z"), Ok(1_796_308_946_123_456));
        assert_eq!(parse_time("2026-12-03t14:42:26.123456z"), Ok(1_796_308_946_123_456));
        assert_eq!(parse_time("2026-12-03T14:42:26.1234567Z"), Ok(1_796_308_946_123_456));
        assert_eq!(parse_time("2026-12-03T14:42:26.5Z"), Ok(1_796_308_946_500_000));
        assert_eq!(parse_time("2026-12-03T16:42:26.123456+02:00"), Ok(1_796_308_946_123_456));
        assert_eq!(parse_time("2026-12-03T09:12:26.123456-05:30"), Ok(1_796_308_946_123_456));
        assert_eq!(parse_time("1970-01-01T01:00:00+01:00"), Ok(0));
        assert_eq!(parse_time("2000-02-29T00:00:00Z"), Ok(951_782_400 * MICROS_PER_SECOND));
    }

    #[test]
    fn parsing_refuses_with_a_reason() {
        let error = |text: &str| parse_time(text).expect_err(text);
        assert!(error("").contains("is not a time"));
        assert!(error("yesterday").contains("the year needs 4 digits"));
        assert!(error("2026-13-01").contains("month 13"));
        assert!(error("2026-04-31").contains("day 31"));
        assert!(error("2026-12-03T14:42:26").contains("needs Z or an offset"));
        assert!(error("2026-12-03T24:00:00Z").contains("not a time of day"));
        assert!(error("2026-12-03T14:42:26.Z").contains("1 to 9 digits"));
        assert!(error("2026-12-03T14:42:26+2:00").contains("unexpected text"));
        assert!(error("2026-12-03T14:42:26+25:00").contains("out of range"));
        assert!(error("2026-12-03T14:42:26Zjunk").contains("unexpected text"));
        assert!(error("1969-12-31T23:59:59Z").contains("before 1970"));
        assert!(error("1970-01-01T00:00:00+00:01").contains("before 1970"));
        assert!(error("99999999999999999999").contains("too large"));
        assert!(error("2026-12-03x").contains("followed by T"));
    }
}
