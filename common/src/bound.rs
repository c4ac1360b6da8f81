//! The bound a run states on undetected wrong results, and the spot-check rate that holds it: the
//! arithmetic both the coordinator's policy and its store check (see docs/security.md, "The bound a run
//! states").

/// The expected number of wrong results a lying credential gets counted and never caught, where at
/// least `rate` of its leases are spot checks: at most `1 / (e * -ln(1 - rate))`, about
/// `1 / (e * rate)`. Spot checks look like any job, so each lie is one with odds `rate` at least, and
/// one caught takes back everything the liar had counted; `n` lies stand only if none met a check,
/// odds `(1 - rate)^n`, and `n (1 - rate)^n` is at most that bound whatever `n`. It needs confirmed
/// jobs to check with (see the coordinator's docs/security.md) and assumes the confirming identities honest.
pub fn max_error_at(rate: f64) -> f64 {
    -1.0 / (std::f64::consts::E * (-rate).ln_1p())
}

/// The least spot-check rate that holds a run's stated bound `max_error` ([`max_error_at`]'s inverse):
/// `1 - exp(-1 / (e * max_error))`, about `1 / (e * max_error)`.
pub fn spot_rate_for(max_error: f64) -> f64 {
    -(-1.0 / (std::f64::consts::E * max_error)).exp_m1()
}

/// The least share of a credential's leases that are spot checks, however many it passed.
pub const MIN_SPOT_RATE: f64 = 0.01;

/// The bound of a run that states none: that of [`MIN_SPOT_RATE`], about 36.6 wrong results per
/// lying credential.
pub fn default_max_error() -> f64 {
    max_error_at(MIN_SPOT_RATE)
}

/// The smallest bound a run may state: 1 (spot checks at 31 % of the leases).
pub const LEAST_MAX_ERROR: f64 = 1.0;

/// Whether `max_error` may be a run's bound: from [`LEAST_MAX_ERROR`] to the default bound (a larger
/// one would not lower the least rate).
pub fn check_max_error(max_error: f64) -> Result<(), String> {
    if max_error.is_finite() && (LEAST_MAX_ERROR..=default_max_error()).contains(&max_error) {
        return Ok(());
    }
    Err(format!(
        "max error {max_error} is out of range: from {LEAST_MAX_ERROR} (spot checks at {:.0}% of the leases) to {:.1} (the default, at {:.0}%)",
        spot_rate_for(LEAST_MAX_ERROR) * 100.0,
        default_max_error(),
        MIN_SPOT_RATE * 100.0
    ))
}
