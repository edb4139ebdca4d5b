//! NWS-style forecasting (Wolski, Spring & Hayes 1999, cited by DRUM 2005 §5 and used by
//! Sinha–Parashar §6.1.2): several simple predictors run side by side on a measurement series;
//! each is charged the error of its prediction when the next value arrives, and the forecast is
//! the prediction of the one with the lowest accumulated error so far.

use std::collections::VecDeque;

/// The predictors a [`Forecaster`] runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Predictor {
    /// The last value seen.
    LastValue,
    /// The mean of every value seen.
    RunningMean,
    /// The median of the last `window` values.
    SlidingMedian {
        /// Window length (≥ 1).
        window: usize,
    },
    /// Exponential smoothing x̂ ← x̂ + α (x − x̂).
    Exponential {
        /// Gain α in (0, 1].
        alpha: f64,
    },
}

/// Which predictors to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ForecastConfig {
    /// The predictors, in tie-breaking order (the first of equally good ones wins).
    pub predictors: Vec<Predictor>,
}

impl Default for ForecastConfig {
    fn default() -> Self {
        ForecastConfig {
            predictors: vec![
                Predictor::LastValue,
                Predictor::RunningMean,
                Predictor::SlidingMedian { window: 5 },
                Predictor::SlidingMedian { window: 21 },
                Predictor::Exponential { alpha: 0.1 },
                Predictor::Exponential { alpha: 0.5 },
            ],
        }
    }
}

#[derive(Debug, Clone)]
struct State {
    predictor: Predictor,
    /// The current prediction (None before the first value).
    prediction: Option<f64>,
    sum: f64,
    count: usize,
    window: VecDeque<f64>,
    /// Accumulated squared error of past predictions.
    error: f64,
}

impl State {
    fn observe(&mut self, x: f64) {
        if let Some(p) = self.prediction {
            self.error += (p - x) * (p - x);
        }
        self.sum += x;
        self.count += 1;
        self.prediction = Some(match self.predictor {
            Predictor::LastValue => x,
            Predictor::RunningMean => self.sum / self.count as f64,
            Predictor::SlidingMedian { window } => {
                self.window.push_back(x);
                while self.window.len() > window.max(1) {
                    self.window.pop_front();
                }
                part_api::median(&mut self.window.iter().copied().collect::<Vec<_>>())
            }
            Predictor::Exponential { alpha } => match self.prediction {
                None => x,
                Some(p) => p + alpha * (x - p),
            },
        });
    }
}

/// An NWS-style forecaster for one measurement series.
///
/// ```
/// use drum_model::forecast::Forecaster;
/// let mut f = Forecaster::default();
/// for x in [1.0, 1.0, 1.0, 9.0, 1.0, 1.0] { f.observe(x); }
/// // The spike at 9 is ignored by the sliding median, which has the lowest error here.
/// assert_eq!(f.forecast(), Some(1.0));
/// ```
#[derive(Debug, Clone)]
pub struct Forecaster {
    states: Vec<State>,
}

impl Default for Forecaster {
    fn default() -> Self {
        Forecaster::new(&ForecastConfig::default())
    }
}

impl Forecaster {
    /// A forecaster running `config`'s predictors. Panics if there are none (a programmer error).
    pub fn new(config: &ForecastConfig) -> Forecaster {
        assert!(
            !config.predictors.is_empty(),
            "a forecaster needs at least one predictor"
        );
        let states = config
            .predictors
            .iter()
            .map(|&predictor| State {
                predictor,
                prediction: None,
                sum: 0.0,
                count: 0,
                window: VecDeque::new(),
                error: 0.0,
            })
            .collect();
        Forecaster { states }
    }

    /// Feeds the next measurement; non-finite values are ignored.
    pub fn observe(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        for s in &mut self.states {
            s.observe(x);
        }
    }

    /// The winning predictor's forecast of the next value (`None` before any value).
    pub fn forecast(&self) -> Option<f64> {
        self.best().and_then(|(_, i)| self.states[i].prediction)
    }

    /// The predictor with the lowest accumulated squared error, and its index.
    pub fn best(&self) -> Option<(Predictor, usize)> {
        let mut best: Option<usize> = None;
        for (i, s) in self.states.iter().enumerate() {
            if s.prediction.is_none() {
                continue;
            }
            if best.is_none_or(|b| s.error < self.states[b].error) {
                best = Some(i);
            }
        }
        best.map(|i| (self.states[i].predictor, i))
    }

    /// Accumulated squared error of each predictor, in configuration order.
    pub fn errors(&self) -> Vec<(Predictor, f64)> {
        self.states.iter().map(|s| (s.predictor, s.error)).collect()
    }
}

/// Forecast of a whole series with the default predictors (`None` if it has no finite value).
pub fn forecast_series(series: &[f64]) -> Option<f64> {
    let mut f = Forecaster::default();
    for &x in series {
        f.observe(x);
    }
    f.forecast()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_series_forecasts_the_constant() {
        assert_eq!(forecast_series(&[0.7; 10]), Some(0.7));
        assert_eq!(forecast_series(&[]), None);
        assert_eq!(forecast_series(&[f64::NAN]), None);
    }

    #[test]
    fn errors_are_hand_computed() {
        let cfg = ForecastConfig {
            predictors: vec![Predictor::LastValue, Predictor::RunningMean],
        };
        let mut f = Forecaster::new(&cfg);
        for x in [1.0, 3.0, 2.0] {
            f.observe(x);
        }
        // Last value predicted 1 then 3: errors (1-3)^2 + (3-2)^2 = 5.
        // Running mean predicted 1 then 2: errors (1-3)^2 + (2-2)^2 = 4.
        let e = f.errors();
        assert_eq!(e[0].1, 5.0);
        assert_eq!(e[1].1, 4.0);
        assert_eq!(f.best().unwrap().0, Predictor::RunningMean);
        assert_eq!(f.forecast(), Some(2.0));
    }

    #[test]
    fn a_trend_is_followed_by_last_value() {
        let series: Vec<f64> = (0..20).map(|i| i as f64).collect();
        let mut f = Forecaster::default();
        for &x in &series {
            f.observe(x);
        }
        assert_eq!(f.best().unwrap().0, Predictor::LastValue);
        assert_eq!(f.forecast(), Some(19.0));
    }

    #[test]
    fn exponential_smoothing_by_hand() {
        let cfg = ForecastConfig {
            predictors: vec![Predictor::Exponential { alpha: 0.5 }],
        };
        let mut f = Forecaster::new(&cfg);
        for x in [4.0, 0.0, 2.0] {
            f.observe(x);
        }
        // 4 → 4 + 0.5(0 − 4) = 2 → 2 + 0.5(2 − 2) = 2.
        assert_eq!(f.forecast(), Some(2.0));
    }
}
