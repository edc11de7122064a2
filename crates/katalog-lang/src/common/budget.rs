//! Evaluation budgets: how much work one review may cost.
//!
//! Two bounds, both checked by the evaluation itself (cooperatively):
//!
//! * a **deadline**: once past it, every CEL evaluation and every object of
//!   a ConversionReview stops with an error, so work whose request has timed
//!   out ends soon after instead of running on;
//! * a **cost limit per CEL evaluation**: before an expression runs, its cost
//!   is estimated from its size, how deeply its comprehensions nest and the
//!   largest list or map it iterates (`nodes × largest^nesting`,
//!   [`crate::cel::CelProgram::cost`]); over the limit it is not run at all.
//!
//! The server sets both per review with [`scoped`]; outside a scope the
//! limit is [`DEFAULT_CEL_COST_LIMIT`] and there is no deadline.
//!
//! A *trial* ([`scoped_stopped`]) is a first attempt under a short budget
//! whose result is only kept if the budget held: running out of its
//! deadline, or a CEL evaluation estimated over its cost cap, does not fail
//! the work but marks it *stopped* (and fails every later check, so the rest
//! ends quickly); the caller throws the result away and runs the work again
//! under the regular budget. The server's inline evaluation is one (see
//! `katalog-runtime`'s server). The regular `cel_cost_limit` is not a trial's
//! to stop on: over it an expression fails as it would anywhere.

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

/// The trial running on this thread: its cost cap and whether it stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Trial {
    cel_cost_cap: u64,
    stopped: bool,
    /// Its deadline is on this thread's CPU time: when the (wall-clock)
    /// deadline passes, a thread that was preempted meanwhile is given the
    /// rest of its `limit` again, up to `wall_cap` (see [`check_deadline`]).
    cpu: Option<CpuClock>,
}

/// A trial's CPU-time limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CpuClock {
    /// This thread's CPU time when the trial began.
    start: Duration,
    /// How much CPU time the trial may use.
    limit: Duration,
    /// However little CPU it used, the trial stops here.
    wall_cap: Instant,
}

/// How far past its limit a preempted trial may run on the wall clock
/// (in multiples of the limit): on a busy machine a connection thread is
/// preempted for a few milliseconds at a time, which is not the trial's
/// work.
pub const TRIAL_WALL_FACTOR: u32 = 10;

/// The CPU time this thread has used.
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

thread_local! {
    static CURRENT: Cell<Budget> = Cell::new(Budget::default());
    static TRIAL: Cell<Option<Trial>> = const { Cell::new(None) };
    /// Units [`charge`]d by the CEL evaluation running on this thread.
    static SPENT: Cell<u64> = const { Cell::new(0) };
}

/// Puts the previous budget and trial back when dropped (also on a panic).
struct Restore(Budget, Option<Trial>);

impl Restore {
    fn enter(budget: Budget, trial: Option<Trial>) -> Restore {
        Restore(CURRENT.replace(budget), TRIAL.replace(trial))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.set(self.0);
        TRIAL.set(self.1);
    }
}

/// Run `work` under `budget` on this thread (the previous budget is back
/// afterwards, also when `work` panics). Not a trial, even inside one: its
/// deadline fails the work.
pub fn scoped<T>(budget: Budget, work: impl FnOnce() -> T) -> T {
    let _restore = Restore::enter(budget, None);
    work()
}

/// Run `work` as a trial under `budget`, a CEL evaluation estimated over
/// `cel_cost_cap` stopping it too: the result, and whether the trial
/// *stopped* (ran out of its deadline or over its cap). A stopped result is
/// not an answer: it holds whatever the checks made of the stop (a failed
/// rule, a failed object) and is to be thrown away. The flag starts clear
/// in every trial.
///
/// The deadline counts this thread's CPU time: when it passes on the wall
/// clock while the thread has used less CPU than the budget gave (it was
/// preempted), the trial goes on for the rest, up to
/// [`TRIAL_WALL_FACTOR`] times the budget on the wall clock.
pub fn scoped_stopped<T>(budget: Budget, cel_cost_cap: u64, work: impl FnOnce() -> T) -> (T, bool) {
    let cpu = budget.deadline.map(|deadline| {
        let now = Instant::now();
        let limit = deadline.saturating_duration_since(now);
        CpuClock {
            start: thread_cpu_time(),
            limit,
            wall_cap: now
                .checked_add(limit.saturating_mul(TRIAL_WALL_FACTOR))
                .unwrap_or(deadline),
        }
    });
    let _restore = Restore::enter(
        budget,
        Some(Trial {
            cel_cost_cap,
            stopped: false,
            cpu,
        }),
    );
    let value = work();
    (value, TRIAL.get().is_some_and(|t| t.stopped))
}

/// Marks this thread's trial stopped; false outside a trial.
fn stop() -> bool {
    match TRIAL.get() {
        Some(trial) => {
            TRIAL.set(Some(Trial {
                stopped: true,
                ..trial
            }));
            true
        }
        None => false,
    }
}

/// The budget of this thread.
pub fn current() -> Budget {
    CURRENT.with(Cell::get)
}

/// This thread's deadline has passed: the review ran out of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("evaluation stopped: the review ran out of time (--request-timeout)")]
pub struct DeadlineExceeded;

/// An error when this thread's deadline has passed (in a trial: the
/// trial stops), or when this thread's trial has stopped already.
pub fn check_deadline() -> Result<(), DeadlineExceeded> {
    if TRIAL.get().is_some_and(|t| t.stopped) {
        return Err(DeadlineExceeded);
    }
    match current().deadline {
        Some(deadline) if Instant::now() >= deadline => {
            if !preempted() {
                stop();
                return Err(DeadlineExceeded);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// In a trial past its wall-clock deadline: whether it has used less CPU
/// than its limit (and is within its wall cap); if so, its deadline moves
/// to when the rest of the limit is used up.
fn preempted() -> bool {
    let Some(Trial { cpu: Some(cpu), .. }) = TRIAL.get() else {
        return false;
    };
    let now = Instant::now();
    let used = thread_cpu_time().saturating_sub(cpu.start);
    if used >= cpu.limit || now >= cpu.wall_cap {
        return false;
    }
    let rest = now.checked_add(cpu.limit - used).unwrap_or(cpu.wall_cap);
    CURRENT.set(Budget {
        deadline: Some(rest.min(cpu.wall_cap)),
        ..current()
    });
    true
}

/// A CEL evaluation estimated over the cost cap of this thread's trial: the
/// trial stopped, the expression is not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "evaluation stopped: its estimated cost {cost} is over the cap of {cap} of a first \
     evaluation on the connection thread (it is evaluated again off it)"
)]
pub struct Stopped {
    pub cost: u64,
    pub cap: u64,
}

/// In a trial, an error (and the trial stopped) when a CEL evaluation's
/// estimated `cost` is over its cap; outside a trial, never. Checked after
/// the regular `cel_cost_limit`, whose failure is an answer.
pub fn check_trial_cost(cost: u64) -> Result<(), Stopped> {
    match TRIAL.get() {
        Some(trial) if cost > trial.cel_cost_cap => {
            stop();
            Err(Stopped {
                cost,
                cap: trial.cel_cost_cap,
            })
        }
        _ => Ok(()),
    }
}

/// Work a CEL evaluation does at run time that the estimate before it
/// cannot see (regular expressions, charged per search) took it over
/// `--cel-cost-limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "stopped: its regular expressions cost over the budget of {limit} per evaluation \
     (--cel-cost-limit; a search costs the length of its pattern and of its text)"
)]
pub struct OverBudgetAtRunTime {
    pub limit: u64,
}

/// Why [`charge`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    #[error(transparent)]
    Deadline(#[from] DeadlineExceeded),
    #[error(transparent)]
    OverBudget(#[from] OverBudgetAtRunTime),
    #[error(transparent)]
    Stopped(#[from] Stopped),
}

/// A CEL evaluation begins on this thread: nothing [`charge`]d yet.
pub fn begin_evaluation() {
    SPENT.set(0);
}

/// Charge `units` of run-time work to the CEL evaluation running on this
/// thread, before doing it: refused once the deadline has passed (so an
/// evaluation whose review was answered stops at its next charge), when
/// the evaluation's charges go over `cel_cost_limit`, and in a trial over
/// its cost cap (the trial stops).
pub fn charge(units: u64) -> Result<(), Refused> {
    check_deadline()?;
    let spent = SPENT.get().saturating_add(units);
    SPENT.set(spent);
    let limit = current().cel_cost_limit;
    if spent > limit {
        return Err(OverBudgetAtRunTime { limit }.into());
    }
    check_trial_cost(spent)?;
    Ok(())
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

    /// A quadratic check over `n` items: its estimated cost grows as n².
    fn quadratic(n: usize) -> (crate::cel::CelProgram, serde_json::Value) {
        let p =
            crate::cel::CelProgram::compile("self.all(a, self.all(b, a != b || a == b))").unwrap();
        (
            p,
            serde_json::Value::Array((0..n).map(Into::into).collect()),
        )
    }

    #[test]
    fn a_trial_is_stopped_by_its_deadline_or_its_cap_not_by_the_cost_limit() {
        let later = Budget::until(Duration::from_secs(60), DEFAULT_CEL_COST_LIMIT);
        let (p, list) = quadratic(50);
        let cost = p.cost(50);
        // Within both: an answer.
        let (answer, stopped) = scoped_stopped(later, cost, || p.eval_bool(&[("self", &list)]));
        assert_eq!((answer, stopped), (Ok(true), false));
        // Past its deadline: stopped, and every later check fails.
        let past = Budget {
            deadline: Some(Instant::now()),
            ..later
        };
        let ((), stopped) = scoped_stopped(past, u64::MAX, || {
            assert_eq!(check_deadline(), Err(DeadlineExceeded));
            assert_eq!(check_deadline(), Err(DeadlineExceeded));
        });
        assert!(stopped);
        // Over its cap: stopped, not run; the rest stops at the next check.
        let (answer, stopped) = scoped_stopped(later, cost - 1, || {
            let answer = p.eval_bool(&[("self", &list)]);
            assert_eq!(check_deadline(), Err(DeadlineExceeded));
            answer
        });
        assert!(stopped);
        let err = answer.unwrap_err().to_string();
        assert!(
            err.ends_with(&format!(
                "evaluation stopped: its estimated cost {cost} is over the cap of {} of a first \
                 evaluation on the connection thread (it is evaluated again off it)",
                cost - 1
            )),
            "{err}"
        );
        // The next trial starts clear.
        let (_, stopped) = scoped_stopped(later, cost, check_deadline);
        assert!(!stopped);
        // Over the regular cost limit, under the cap: the rule's own
        // failure, an answer, not a stop.
        let limited = Budget {
            cel_cost_limit: cost - 1,
            ..later
        };
        let (answer, stopped) =
            scoped_stopped(limited, u64::MAX, || p.eval_bool(&[("self", &list)]));
        assert!(!stopped);
        assert!(
            answer
                .unwrap_err()
                .to_string()
                .contains("(--cel-cost-limit)"),
            "not the cost limit's failure"
        );
        // Outside a trial, and in a regular scope within one, nothing stops.
        assert_eq!(check_trial_cost(u64::MAX), Ok(()));
        let ((), stopped) = scoped_stopped(later, 0, || {
            scoped(past, || assert_eq!(check_deadline(), Err(DeadlineExceeded)));
            assert_eq!(check_deadline(), Ok(()));
        });
        assert!(!stopped);
        assert_eq!(current(), Budget::default());
    }

    #[test]
    fn a_trial_counts_its_threads_cpu_time_up_to_a_wall_cap() {
        let budget = |ms| Budget::until(Duration::from_millis(ms), DEFAULT_CEL_COST_LIMIT);
        // Off the CPU past the wall-clock deadline (as when preempted), and
        // within the wall cap: the trial goes on.
        let (checked, stopped) = scoped_stopped(budget(20), u64::MAX, || {
            std::thread::sleep(Duration::from_millis(40));
            check_deadline()
        });
        assert_eq!((checked, stopped), (Ok(()), false));
        // Past the wall cap, however little CPU it used: stopped.
        let (checked, stopped) = scoped_stopped(budget(2), u64::MAX, || {
            std::thread::sleep(Duration::from_millis(2 * u64::from(TRIAL_WALL_FACTOR) + 5));
            check_deadline()
        });
        assert_eq!((checked, stopped), (Err(DeadlineExceeded), true));
        // On the CPU past its limit: stopped (the loop ends by itself).
        let (checked, stopped) = scoped_stopped(budget(5), u64::MAX, || {
            let start = thread_cpu_time();
            let give_up = Instant::now() + Duration::from_secs(10);
            while thread_cpu_time().saturating_sub(start) < Duration::from_millis(10)
                && Instant::now() < give_up
            {
                std::hint::black_box(start);
            }
            check_deadline()
        });
        assert_eq!((checked, stopped), (Err(DeadlineExceeded), true));
    }

    #[test]
    fn charges_count_per_evaluation_against_the_limit_the_cap_and_the_deadline() {
        let later = Budget::until(Duration::from_secs(60), 1_000);
        scoped(later, || {
            begin_evaluation();
            assert_eq!(charge(600), Ok(()));
            assert_eq!(
                charge(600),
                Err(Refused::OverBudget(OverBudgetAtRunTime { limit: 1_000 }))
            );
            begin_evaluation();
            assert_eq!(charge(1_000), Ok(()));
        });
        // In a trial, over its cap: stopped (not an answer).
        let (charged, stopped) = scoped_stopped(later, 500, || {
            begin_evaluation();
            charge(600)
        });
        assert!(matches!(charged, Err(Refused::Stopped(_))), "{charged:?}");
        assert!(stopped);
        // Past the deadline: refused, however little it costs.
        let past = Budget {
            deadline: Some(Instant::now()),
            ..later
        };
        scoped(past, || {
            begin_evaluation();
            assert_eq!(charge(0), Err(Refused::Deadline(DeadlineExceeded)));
        });
    }

    #[test]
    fn a_panicking_trial_leaves_no_trial_behind() {
        let past = Budget {
            deadline: Some(Instant::now()),
            cel_cost_limit: 7,
        };
        let panicked = std::panic::catch_unwind(|| {
            scoped_stopped(past, 0, || {
                let _ = check_deadline();
                panic!("boom")
            })
        });
        assert!(panicked.is_err());
        assert_eq!(current(), Budget::default());
        assert_eq!(check_deadline(), Ok(()));
        assert_eq!(check_trial_cost(u64::MAX), Ok(()));
    }
}
