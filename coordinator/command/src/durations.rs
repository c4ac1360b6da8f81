//! Duration flags, parsed with humantime and bounded: a duration past what a clock can add (humantime
//! takes up to 2^64 seconds) panics at its first use, far from the flag that gave it.

use std::time::Duration;

const DAY: Duration = Duration::from_secs(86_400);

/// A duration from `min` to `max`.
fn within(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d < min {
        return Err(format!(
            "must be at least {}",
            humantime::format_duration(min)
        ));
    }
    if d > max {
        return Err(format!(
            "must be at most {}",
            humantime::format_duration(max)
        ));
    }
    Ok(d)
}

/// `serve --lease-timeout`: 100 ms to 7 days.
pub fn lease_timeout(s: &str) -> Result<Duration, String> {
    within(s, Duration::from_millis(100), 7 * DAY)
}

/// `serve --max-lease-hold`: a minute to 365 days.
pub fn max_lease_hold(s: &str) -> Result<Duration, String> {
    within(s, Duration::from_secs(60), 365 * DAY)
}

/// A progress log's interval (`serve`, `worker`): 10 ms to a day.
pub fn progress_interval(s: &str) -> Result<Duration, String> {
    within(s, Duration::from_millis(10), DAY)
}

/// `loadgen --duration` and `--warmup`: up to a day.
pub fn load_time(s: &str) -> Result<Duration, String> {
    within(s, Duration::ZERO, DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_kept_and_said() {
        assert_eq!(lease_timeout("60s"), Ok(Duration::from_secs(60)));
        assert!(lease_timeout("50ms")
            .unwrap_err()
            .contains("at least 100ms"));
        assert!(lease_timeout("300000000000y")
            .unwrap_err()
            .contains("at most 7days"));
        assert_eq!(max_lease_hold("24h"), Ok(DAY));
        assert!(max_lease_hold("59s").unwrap_err().contains("at least 1m"));
        assert!(max_lease_hold("366days").unwrap_err().contains("at most"));
        assert!(progress_interval("0s").is_err());
        assert_eq!(load_time("0s"), Ok(Duration::ZERO));
        assert!(load_time("2days").is_err());
    }
}
