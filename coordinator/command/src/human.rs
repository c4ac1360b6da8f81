//! Numbers for people: digits grouped by thousands, a few significant digits, no exponent where a
//! plain number reads better (`--json` keeps the exact values).

/// `x` to `digits` significant digits: grouped by thousands from 1,000 up to 1e21 (`24,120,000,000`),
/// plain below (`0.203`, `12.5`), an exponent beyond (`1.234e24`).
pub fn number(x: f64, digits: u32) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let digits = digits.max(1) as i32;
    let magnitude = x.abs().log10().floor() as i32;
    if magnitude >= 21 {
        return format!("{:.*e}", (digits - 1) as usize, x);
    }
    // Rounded to `digits` significant digits.
    let scale = 10f64.powi(magnitude - digits + 1);
    let rounded = (x / scale).round() * scale;
    if rounded.abs() >= 1000.0 {
        group(rounded.round() as i128)
    } else {
        let decimals = (digits - 1 - magnitude).max(0) as usize;
        format!("{rounded:.decimals$}")
    }
}

/// An integer with its digits grouped by thousands: `-1,234,567`.
pub fn group(n: i128) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A span of `hours` for people: `45 s`, `12 min`, `3.4 h`, `2.1 days`, `3.2 years`.
pub fn hours(hours: f64) -> String {
    let s = hours * 3600.0;
    if !s.is_finite() {
        return "unknown".into();
    }
    if s < 90.0 {
        format!("{} s", number(s, 2))
    } else if s < 90.0 * 60.0 {
        format!("{} min", number(s / 60.0, 2))
    } else if s < 48.0 * 3600.0 {
        format!("{} h", number(hours, 2))
    } else if s < 2.0 * 365.25 * 86_400.0 {
        format!("{} days", number(hours / 24.0, 2))
    } else {
        format!("{} years", number(hours / 24.0 / 365.25, 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_without_exponents() {
        assert_eq!(number(0.20281, 3), "0.203");
        assert_eq!(number(2.82e-4, 3), "0.000282");
        assert_eq!(number(12.54, 3), "12.5");
        assert_eq!(number(999.4, 3), "999");
        assert_eq!(number(24_123_456_789_012.0, 4), "24,120,000,000,000");
        assert_eq!(number(1234.0, 4), "1,234");
        assert_eq!(number(-1234.0, 4), "-1,234");
        assert_eq!(number(0.0, 3), "0");
        assert_eq!(number(1.2344e24, 4), "1.234e24");
        assert_eq!(group(1_000_000), "1,000,000");
        assert_eq!(group(999), "999");
        assert_eq!(group(-1000), "-1,000");
    }

    #[test]
    fn spans_take_their_natural_unit() {
        assert_eq!(hours(0.2028), "12 min");
        assert_eq!(hours(0.005), "18 s");
        assert_eq!(hours(3.4), "3.4 h");
        assert_eq!(hours(24.0 * 50.0), "50 days");
        assert_eq!(hours(24.0 * 365.25 * 3.2), "3.2 years");
    }
}
