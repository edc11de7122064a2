//! Evaluation budgets: how much work one review may cost.
//!
//! Two bounds, both checked by the evaluation itself (cooperatively):
//!
//! * a **deadline**: once past it, every CEL evaluation and every object of
//!   a ConversionReview stops with an error, so work whose request has timed
//!   out ends soon after instead of running on;
//! * a **cost limit per CEL evaluation**: before an expression runs, its cost
//!   is estimated from its size, how deeply its comprehensions nest and the
//!   largest list or map it is given (`nodes × largest^nesting`,
//!   [`crate::cel::CelProgram::cost`]); over the limit it is not run at all.
//!
//! The server sets both per review with [`scoped`]; outside a scope the
//! limit is [`DEFAULT_CEL_COST_LIMIT`] and there is no deadline.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Cost units one CEL evaluation may be estimated at, by default: the
/// per-call limit of Kubernetes CEL (`PerCallLimit`, 1,000,000).
pub const DEFAULT_CEL_COST_LIMIT: u64 = 1_000_000;

/// The list size the compile-time estimate assumes: an expression whose
/// estimate is over [`DEFAULT_CEL_COST_LIMIT`] with lists of this many
/// items cannot fit any real object and is rejected by `check`.
pub const STATIC_LIST_ITEMS: u64 = 10;

/// The budget of the evaluation running on this thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Stop once this instant has passed.
    pub deadline: Option<Instant>,
    /// Largest estimated cost of one CEL evaluation.
    pub cel_cost_limit: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            deadline: None,
            cel_cost_limit: DEFAULT_CEL_COST_LIMIT,
        }
    }
}

impl Budget {
    /// A budget ending `timeout` from now.
    pub fn until(timeout: Duration, cel_cost_limit: u64) -> Budget {
        Budget {
            deadline: Instant::now().checked_add(timeout),
            cel_cost_limit,
        }
    }
}

thread_local! {
    static CURRENT: Cell<Budget> = Cell::new(Budget::default());
}

/// Run `work` under `budget` on this thread (the previous budget is back
/// afterwards, also when `work` panics).
pub fn scoped<T>(budget: Budget, work: impl FnOnce() -> T) -> T {
    struct Restore(Budget);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(budget)));
    work()
}

/// The budget of this thread.
pub fn current() -> Budget {
    CURRENT.with(Cell::get)
}

/// This thread's deadline has passed: the review ran out of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("evaluation stopped: the review ran out of time (--request-timeout)")]
pub struct DeadlineExceeded;

/// An error when this thread's deadline has passed.
pub fn check_deadline() -> Result<(), DeadlineExceeded> {
    match current().deadline {
        Some(deadline) if Instant::now() >= deadline => Err(DeadlineExceeded),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_sets_and_restores_the_budget() {
        assert_eq!(current(), Budget::default());
        assert_eq!(check_deadline(), Ok(()));
        let past = Budget {
            deadline: Some(Instant::now()),
            cel_cost_limit: 7,
        };
        scoped(past, || {
            assert_eq!(current().cel_cost_limit, 7);
            assert_eq!(check_deadline(), Err(DeadlineExceeded));
            assert_eq!(
                DeadlineExceeded.to_string(),
                "evaluation stopped: the review ran out of time (--request-timeout)"
            );
        });
        assert_eq!(current(), Budget::default());
        let later = Budget::until(Duration::from_secs(60), 1);
        scoped(later, || assert_eq!(check_deadline(), Ok(())));
    }
}
