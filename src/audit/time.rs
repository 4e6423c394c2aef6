//! Times in the audit log and on `mcpwall log`'s command line, as microseconds since the
//! Unix epoch (UTC).

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since 1970-01-01T00:00:00Z.
pub type Micros = i64;

pub fn now() -> Micros {
    to_micros(SystemTime::now())
}

pub fn to_micros(t: SystemTime) -> Micros {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn digits(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// An RFC 3339 time (`2026-12-02T10:55:38Z`, `…38.123456+01:00`, lowercase `t`/`z`
/// too) or a date alone (`2026-12-02`, its midnight UTC).
pub fn parse_rfc3339(s: &str) -> Option<Micros> {
    let s = s.trim();
    let (date, rest) = if s.len() > 10 {
        (s.get(..10)?, s.get(10..)?)
    } else {
        (s, "")
    };
    let mut parts = date.split('-');
    let (y, m, d) = (
        digits(parts.next()?)?,
        digits(parts.next()?)?,
        digits(parts.next()?)?,
    );
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let day = days_from_civil(y, m as u32, d as u32);
    if rest.is_empty() {
        return Some(day * 86_400_000_000);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (clock, offset) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => return None,
    };
    let (hms, frac) = match clock.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (clock, None),
    };
    let mut hms = hms.split(':');
    let (h, mi, sec) = (
        digits(hms.next()?)?,
        digits(hms.next()?)?,
        digits(hms.next()?)?,
    );
    if hms.next().is_some() || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let micros = match frac {
        Some(f) => {
            digits(f)?;
            let mut padded: String = f.chars().take(6).collect();
            while padded.len() < 6 {
                padded.push('0');
            }
            padded.parse::<i64>().ok()?
        }
        None => 0,
    };
    let offset_secs = match offset {
        "Z" | "z" => 0,
        o => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (oh, om) = o.get(1..)?.split_once(':')?;
            let (oh, om) = (digits(oh)?, digits(om)?);
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let secs = day * 86_400 + h * 3600 + mi * 60 + sec - offset_secs;
    Some(secs * 1_000_000 + micros)
}

/// A duration like `30s`, `15m`, `1h`, `2d`, `1w`, in microseconds.
pub fn parse_relative(s: &str) -> Option<Micros> {
    let s = s.trim();
    let unit = s.chars().last()?;
    let n = digits(&s[..s.len() - unit.len_utf8()])?;
    let secs = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => return None,
    };
    n.checked_mul(secs)?.checked_mul(1_000_000)
}

/// `--since`/`--until`: an RFC 3339 time, a date, or a duration back from `now`.
pub fn parse_bound(s: &str, now: Micros) -> Option<Micros> {
    parse_relative(s)
        .map(|d| now - d)
        .or_else(|| parse_rfc3339(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_and_dates_parse_to_utc() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2024-02-29T01:01:01.000005Z"),
            Some((1_709_164_800 + 3661) * 1_000_000 + 5)
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T02:01:01+01:00"),
            parse_rfc3339("2024-02-29T01:01:01Z")
        );
        assert_eq!(parse_rfc3339("2024-02-29"), Some(1_709_164_800 * 1_000_000));
        for bad in [
            "",
            "2024-13-01",
            "2024-02-29T25:00:00Z",
            "yesterday",
            "2024-02-29T01:01",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn relative_bounds_count_back_from_now() {
        assert_eq!(
            parse_bound("1h", 10_000_000_000),
            Some(10_000_000_000 - 3_600_000_000)
        );
        assert_eq!(parse_bound("2d", 0), Some(-2 * 86_400 * 1_000_000));
        assert_eq!(parse_bound("h", 0), None);
        assert_eq!(parse_bound("5y", 0), None);
    }

    #[test]
    fn the_writer_s_timestamps_read_back() {
        let t = UNIX_EPOCH + std::time::Duration::new(1_709_164_800 + 3661, 5_000);
        let mut text = String::new();
        super::super::rfc3339(&mut text, t);
        assert_eq!(parse_rfc3339(&text), Some(to_micros(t)));
    }
}
