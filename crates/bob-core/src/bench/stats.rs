//! Small arithmetic of the figures: medians, rates, ratios, sampling.

use std::time::Duration;

/// At most `n` indices of `0..len`, evenly spaced, starting at 0.
pub(super) fn spaced(len: usize, n: usize) -> Vec<usize> {
    let stride = len.div_ceil(n.max(1)).max(1);
    (0..len).step_by(stride).collect()
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub(super) fn per_s(count: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

pub(super) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
