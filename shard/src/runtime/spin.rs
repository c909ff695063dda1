//! The dispatcher's adaptive idle spin: when to keep the executor awake
//! instead of parking it on an empty mailbox.
//!
//! Parking costs a round of sleeping-thread wakes: the next sender writes
//! the executor's eventfd, and the kernel wakes a halted vCPU (tens of
//! microseconds on a VM). When more mail is likely soon, the dispatcher
//! wakes itself instead (`wake_by_ref` and `Pending`): glommio then keeps
//! polling its ring and runs the dispatcher again, and senders see no
//! parked flag and pay no wake. Mail is "likely soon" when some came within
//! [`SpinPolicy::idle_spin`] and the core has caught up: no reply waits for
//! the log. While replies wait for a flush, the core parks: spinning
//! across a write or sync at saturation took the callers' CPU and cost a
//! third of durable many-stream throughput in a same-run A/B on two vCPUs
//! (BENCHMARKS.md, "S1"), so the spin is for the caller that sends its
//! next request right after its reply (a lone round trip).
//!
//! Spinning takes CPU that other threads (the callers, on a machine with
//! few cores) may need, so it is gated three ways per accounting period:
//! * **utilisation**: no spin while the previous period was busy for at
//!   least [`BUSY_CUTOFF_PERCENT`] of its time (at saturation mail arrives
//!   anyway and a spin only steals CPU);
//! * **contention**: no spin while, in the previous period, the thread got
//!   less than [`CONTENDED_PERCENT`] of the time it was runnable (not
//!   parked) as CPU time: another thread wanted this CPU, and a spin would
//!   take it from that thread (this is what saturation looks like on a
//!   machine whose callers share the cores' CPUs);
//! * **budget**: spinning in one period stops at
//!   [`SpinPolicy::budget_percent`] of the period.
//!
//! Invariants: the policy only decides between parking and waking itself;
//! either way the dispatcher is polled again (by a sender's wake or by its
//! own), so no mail is ever left unseen. Time is read from the monotonic
//! clock; a period's busy share counts only time the dispatcher was neither
//! parked nor spinning.

use std::cell::Cell;
use std::time::{Duration, Instant};

pub use crate::limits::SpinPolicy;

/// A period whose busy share reaches this disables spinning in the next.
pub const BUSY_CUTOFF_PERCENT: u64 = 50;

/// How long an accounting period lasts.
pub const PERIOD: Duration = Duration::from_millis(2);

/// A period in which the thread's CPU time fell below this share of its
/// runnable time was contended.
pub const CONTENDED_PERCENT: u128 = 90;

/// Runnable time below which a period says nothing about contention.
const MIN_RUNNABLE: Duration = Duration::from_micros(200);

/// The calling thread's CPU time (a syscall; read once per period).
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// What the dispatcher was doing since its last poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Since {
    Busy,
    Parked(Instant),
    Spinning(Instant),
}

/// The policy's state: one per mailbox receiver, single-threaded.
#[derive(Debug)]
pub struct IdleSpin {
    policy: SpinPolicy,
    cpu_time: fn() -> Duration,
    last_mail: Cell<Option<Instant>>,
    since: Cell<Since>,
    period_start: Cell<Instant>,
    cpu_at_start: Cell<Duration>,
    idle_in_period: Cell<Duration>,
    parked_in_period: Cell<Duration>,
    spun_in_period: Cell<Duration>,
    busy_percent_before: Cell<u64>,
    contended_before: Cell<bool>,
}

/// What [`IdleSpin::idle`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Park until a sender wakes the dispatcher.
    Park,
    /// Wake itself and look again.
    Spin,
}

impl IdleSpin {
    /// A fresh state for `policy`, reading the thread's CPU time with
    /// [`thread_cpu_time`].
    pub fn new(policy: SpinPolicy) -> Self {
        IdleSpin::with_cpu_time(policy, thread_cpu_time)
    }

    /// A fresh state reading CPU time with `cpu_time` (tests).
    pub fn with_cpu_time(policy: SpinPolicy, cpu_time: fn() -> Duration) -> Self {
        let now = Instant::now();
        IdleSpin {
            policy,
            cpu_time,
            last_mail: Cell::new(None),
            since: Cell::new(Since::Busy),
            period_start: Cell::new(now),
            cpu_at_start: Cell::new(if policy.enabled() { cpu_time() } else { Duration::ZERO }),
            idle_in_period: Cell::new(Duration::ZERO),
            parked_in_period: Cell::new(Duration::ZERO),
            spun_in_period: Cell::new(Duration::ZERO),
            busy_percent_before: Cell::new(0),
            contended_before: Cell::new(false),
        }
    }

    /// Called at the start of every poll: accounts the time since the last
    /// one and rolls the period over. Returns how long the dispatcher spun
    /// since its previous poll (zero unless it was spinning).
    pub fn resume(&self, now: Instant) -> Duration {
        let mut spun = Duration::ZERO;
        match self.since.replace(Since::Busy) {
            Since::Busy => {}
            Since::Parked(at) => {
                let parked = now.saturating_duration_since(at);
                self.add_idle(parked);
                self.parked_in_period.set(self.parked_in_period.get() + parked);
            }
            Since::Spinning(at) => {
                spun = now.saturating_duration_since(at);
                self.add_idle(spun);
                self.spun_in_period.set(self.spun_in_period.get() + spun);
            }
        }
        let elapsed = now.saturating_duration_since(self.period_start.get());
        if elapsed >= PERIOD {
            let idle = self.idle_in_period.get().min(elapsed);
            let busy = elapsed - idle;
            self.busy_percent_before.set((busy.as_nanos() * 100 / elapsed.as_nanos().max(1)) as u64);
            if self.policy.enabled() {
                let cpu = (self.cpu_time)();
                let used = cpu.saturating_sub(self.cpu_at_start.get());
                let runnable = elapsed.saturating_sub(self.parked_in_period.get());
                self.contended_before.set(
                    runnable >= MIN_RUNNABLE && used.as_nanos() * 100 < runnable.as_nanos() * CONTENDED_PERCENT,
                );
                self.cpu_at_start.set(cpu);
            }
            self.period_start.set(now);
            self.idle_in_period.set(Duration::ZERO);
            self.parked_in_period.set(Duration::ZERO);
            self.spun_in_period.set(Duration::ZERO);
        }
        spun
    }

    fn add_idle(&self, d: Duration) {
        self.idle_in_period.set(self.idle_in_period.get() + d);
    }

    /// Records that mail was taken at `now`.
    pub fn mail(&self, now: Instant) {
        self.last_mail.set(Some(now));
    }

    /// The mailbox is empty at `now`: park or spin? `waiting` says whether
    /// replies of the core wait for the log (then it parks).
    pub fn idle(&self, now: Instant, waiting: bool) -> Idle {
        let decision = self.decide(now, waiting);
        self.since.set(match decision {
            Idle::Park => Since::Parked(now),
            Idle::Spin => Since::Spinning(now),
        });
        decision
    }

    fn decide(&self, now: Instant, waiting: bool) -> Idle {
        if !self.policy.enabled() {
            return Idle::Park;
        }
        let recent = self.last_mail.get().is_some_and(|at| now.saturating_duration_since(at) < self.policy.idle_spin);
        if !recent || waiting {
            return Idle::Park;
        }
        if self.busy_percent_before.get() >= BUSY_CUTOFF_PERCENT || self.contended_before.get() {
            return Idle::Park;
        }
        let budget = PERIOD * self.policy.budget_percent.min(100) / 100;
        if self.spun_in_period.get() >= budget {
            return Idle::Park;
        }
        Idle::Spin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: SpinPolicy = SpinPolicy { idle_spin: Duration::from_micros(50), budget_percent: 25 };

    thread_local! {
        static CPU: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    fn fake_cpu() -> Duration {
        CPU.with(Cell::get)
    }

    fn spend_cpu(d: Duration) {
        CPU.with(|c| c.set(c.get() + d));
    }

    /// A policy state whose CPU clock the test moves (uncontended when the
    /// test spends as much CPU as runnable time).
    fn state() -> IdleSpin {
        IdleSpin::with_cpu_time(ON, fake_cpu)
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn off_never_spins() {
        let s = IdleSpin::with_cpu_time(SpinPolicy::OFF, fake_cpu);
        let t = Instant::now();
        s.resume(t);
        s.mail(t);
        assert_eq!(s.idle(t, true), Idle::Park);
    }

    #[test]
    fn spins_only_after_recent_mail_with_nothing_waiting_for_the_log() {
        let s = state();
        let t = s.period_start.get();
        s.resume(t);
        assert_eq!(s.idle(t, false), Idle::Park, "no mail yet");
        s.resume(t + us(1));
        s.mail(t + us(1));
        assert_eq!(s.idle(t + us(2), true), Idle::Park, "replies wait for a flush");
        s.resume(t + us(3));
        assert_eq!(s.idle(t + us(3), false), Idle::Spin);
        s.resume(t + us(10));
        assert_eq!(s.idle(t + us(60), false), Idle::Park, "mail is 59 µs old");
    }

    #[test]
    fn the_budget_caps_spinning_in_a_period() {
        let s = state();
        let t = s.period_start.get();
        let mut now = t;
        let mut spun = Duration::ZERO;
        // Spin in 10 µs steps, mail always fresh: 25% of 2 ms is 500 µs.
        loop {
            let step = s.resume(now);
            spend_cpu(step);
            spun += step;
            s.mail(now);
            if s.idle(now, false) == Idle::Park {
                break;
            }
            now += us(10);
            assert!(now < t + PERIOD, "the budget never ran out");
        }
        assert!(spun >= us(500) && spun < us(520), "spun {spun:?}");
        // The next period starts with a fresh budget.
        s.resume(t + PERIOD + us(1));
        s.mail(t + PERIOD + us(1));
        assert_eq!(s.idle(t + PERIOD + us(1), false), Idle::Spin);
    }

    #[test]
    fn a_busy_period_turns_spinning_off_for_the_next() {
        let s = state();
        let t = s.period_start.get();
        // Busy all period long, with mail.
        s.resume(t);
        spend_cpu(PERIOD);
        s.mail(t + PERIOD);
        s.resume(t + PERIOD);
        assert_eq!(s.busy_percent_before.get(), 100);
        assert_eq!(s.idle(t + PERIOD, false), Idle::Park);
        // A parked period brings spinning back.
        s.resume(t + PERIOD * 2 + us(5));
        s.mail(t + PERIOD * 2 + us(5));
        assert_eq!(s.busy_percent_before.get(), 0);
        assert_eq!(s.idle(t + PERIOD * 2 + us(6), false), Idle::Spin);
    }

    #[test]
    fn a_contended_period_turns_spinning_off_for_the_next() {
        let s = state();
        let t = s.period_start.get();
        s.resume(t);
        s.mail(t);
        assert_eq!(s.idle(t, false), Idle::Spin);
        // Spinning 40 µs, but the thread got only 10 µs of CPU for it, and
        // then ran 1.9 ms with 0.5 ms of CPU: another thread ran here.
        spend_cpu(us(10));
        s.resume(t + us(40));
        s.mail(t + us(40));
        assert_eq!(s.idle(t + us(40), false), Idle::Spin, "within the budget; the period is not over");
        spend_cpu(us(500));
        s.resume(t + PERIOD + us(1));
        assert!(s.contended_before.get());
        s.mail(t + PERIOD + us(1));
        assert_eq!(s.idle(t + PERIOD + us(2), false), Idle::Park, "contended: no spin");
        // A period of parking with the CPU to itself clears it.
        s.resume(t + PERIOD * 2 + us(5));
        assert!(!s.contended_before.get());
        s.mail(t + PERIOD * 2 + us(5));
        assert_eq!(s.idle(t + PERIOD * 2 + us(6), false), Idle::Spin);
    }
}
