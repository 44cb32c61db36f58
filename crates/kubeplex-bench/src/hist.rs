//! Latency histogram: log-spaced buckets 1 % apart from 1 µs to over an hour, so percentiles
//! are within 1 % and memory stays fixed however many samples a run takes.

use std::time::Duration;

use serde::Serialize;

const GROWTH: f64 = 1.01;
const BUCKETS: usize = 2300;

#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: Duration,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; BUCKETS], total: 0, max: Duration::ZERO }
    }
}

/// Percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
            self.p50_ms, self.p90_ms, self.p99_ms, self.max_ms, self.count
        )
    }
}

fn bucket(d: Duration) -> usize {
    let us = d.as_secs_f64() * 1e6;
    if us <= 1.0 {
        return 0;
    }
    ((us.ln() / GROWTH.ln()) as usize + 1).min(BUCKETS - 1)
}

/// The upper bound of a bucket, in milliseconds.
fn upper_ms(index: usize) -> f64 {
    GROWTH.powi(index as i32) / 1000.0
}

impl Histogram {
    pub fn record(&mut self, d: Duration) {
        if let Some(c) = self.counts.get_mut(bucket(d)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(d);
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The latency below which `q` of the samples fall (bucket upper bound, capped by max).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((self.total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper_ms(i).min(self.max.as_secs_f64() * 1000.0);
            }
        }
        self.max.as_secs_f64() * 1000.0
    }

    pub fn summary(&self) -> Summary {
        Summary {
            count: self.total,
            p50_ms: self.quantile_ms(0.50),
            p90_ms: self.quantile_ms(0.90),
            p99_ms: self.quantile_ms(0.99),
            max_ms: self.max.as_secs_f64() * 1000.0,
        }
    }
}

#[cfg(test)]
mod tests;
