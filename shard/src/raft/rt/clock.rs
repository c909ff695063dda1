//! Time and randomness of the raft runtime, real or simulated.
//!
//! openraft reads time only through its runtime (`Instant::now`, sleeps,
//! timeouts) and draws randomness (election timeouts) only from its
//! runtime's generator. Both come from here. Normally they are the
//! monotonic clock, glommio timers and the thread's random generator. A
//! simulation installs a [`SimClock`] on its thread: then time is virtual
//! and moves only when the simulation advances it to the next timer, and
//! randomness comes from the clock's seed, so a run is a pure function of
//! its seed (glommio runs ready tasks in FIFO order on the one thread).
//! Invariants: virtual time never goes backwards; a virtual timer fires
//! exactly when time reaches its deadline, timers of equal deadline in the
//! order they were set; a real timer fires at its deadline rounded up to
//! the next 4 ms grid line, never before.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::rc::Rc;
use std::sync::OnceLock;
use std::task::Waker;
use std::time::Duration;

thread_local! {
    static SIM: RefCell<Option<Rc<SimClock>>> = const { RefCell::new(None) };
}

fn sim() -> Option<Rc<SimClock>> {
    SIM.with(|sim| sim.borrow().clone())
}

/// A point in the runtime's time: since the process's first reading, or
/// since the start of the simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RtInstant(Duration);

fn real_base() -> std::time::Instant {
    static BASE: OnceLock<std::time::Instant> = OnceLock::new();
    *BASE.get_or_init(std::time::Instant::now)
}

impl RtInstant {
    /// Now, on the thread's clock.
    pub fn now() -> RtInstant {
        match sim() {
            Some(clock) => RtInstant(clock.now.get()),
            None => RtInstant(real_base().elapsed()),
        }
    }

    /// The time since the clock's origin.
    pub fn since_origin(self) -> Duration {
        self.0
    }
}

impl Add<Duration> for RtInstant {
    type Output = RtInstant;
    fn add(self, d: Duration) -> RtInstant {
        RtInstant(self.0.saturating_add(d))
    }
}

impl AddAssign<Duration> for RtInstant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for RtInstant {
    type Output = RtInstant;
    fn sub(self, d: Duration) -> RtInstant {
        RtInstant(self.0.saturating_sub(d))
    }
}

impl SubAssign<Duration> for RtInstant {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

impl Sub<RtInstant> for RtInstant {
    type Output = Duration;
    fn sub(self, earlier: RtInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl openraft::Instant for RtInstant {
    fn now() -> Self {
        RtInstant::now()
    }
}

/// The virtual clock and seeded generator of a simulation thread.
#[derive(Debug)]
pub struct SimClock {
    now: Cell<Duration>,
    timers: RefCell<BTreeMap<(Duration, u64), Waker>>,
    next_timer: Cell<u64>,
    rng: Cell<u64>,
}

impl SimClock {
    /// Installs a clock at time zero, seeded with `seed`, on this thread;
    /// every raft runtime call on the thread uses it until
    /// [`SimClock::uninstall`].
    pub fn install(seed: u64) -> Rc<SimClock> {
        let clock = Rc::new(SimClock {
            now: Cell::new(Duration::ZERO),
            timers: RefCell::new(BTreeMap::new()),
            next_timer: Cell::new(0),
            rng: Cell::new(seed ^ 0x5DEE_CE66_D1CE_4E5B),
        });
        SIM.with(|sim| *sim.borrow_mut() = Some(clock.clone()));
        clock
    }

    /// Removes this thread's clock.
    pub fn uninstall() {
        SIM.with(|sim| *sim.borrow_mut() = None);
    }

    /// Virtual time now.
    pub fn now(&self) -> Duration {
        self.now.get()
    }

    /// Moves time to the earliest pending timer and fires every timer due
    /// then; false when no timer is pending.
    pub fn advance(&self) -> bool {
        let Some((&(deadline, _), _)) = self.timers.borrow().iter().next() else { return false };
        self.advance_to(deadline);
        true
    }

    /// Moves time to `to` (never backwards) and fires every timer due.
    pub fn advance_to(&self, to: Duration) {
        if to > self.now.get() {
            self.now.set(to);
        }
        let now = self.now.get();
        let due: Vec<Waker> = {
            let mut timers = self.timers.borrow_mut();
            let later = timers.split_off(&(now, u64::MAX));
            std::mem::replace(&mut *timers, later).into_values().collect()
        };
        for waker in due {
            waker.wake();
        }
    }

    /// Registers (or re-registers) a timer; returns its key.
    fn set_timer(&self, deadline: Duration, key: Option<(Duration, u64)>, waker: &Waker) -> (Duration, u64) {
        let mut timers = self.timers.borrow_mut();
        let key = key.unwrap_or_else(|| {
            let n = self.next_timer.get();
            self.next_timer.set(n + 1);
            (deadline, n)
        });
        timers.insert(key, waker.clone());
        key
    }

    fn cancel_timer(&self, key: (Duration, u64)) {
        self.timers.borrow_mut().remove(&key);
    }

    fn next_u64(&self) -> u64 {
        // SplitMix64.
        let state = self.rng.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.rng.set(state);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Real timers fire on a grid of this step, counted from the clock's
/// origin: a core's many replicas (each with its own tick loop, election
/// and request timers) then share one executor wake-up per step instead of
/// waking it once per timer.
const TIMER_GRID: Duration = Duration::from_millis(4);

/// `duration` stretched (by less than [`TIMER_GRID`]) so the timer is due
/// on a grid line; a zero duration stays zero.
fn on_grid(duration: Duration) -> Duration {
    grid_wait(real_base().elapsed(), duration)
}

/// From `now` (since the clock's origin), the wait at least `duration`
/// long that ends on a grid line; a zero duration stays zero.
fn grid_wait(now: Duration, duration: Duration) -> Duration {
    if duration.is_zero() {
        return duration;
    }
    let step = TIMER_GRID.as_nanos();
    let due = now.saturating_add(duration).as_nanos().div_ceil(step) * step;
    Duration::from_nanos(u64::try_from(due).unwrap_or(u64::MAX)).saturating_sub(now)
}

/// A timer on the thread's clock: a glommio timer, or a virtual one.
#[derive(Debug)]
pub enum Sleep {
    Real(glommio::timer::Timer),
    Sim { clock: Rc<SimClock>, deadline: Duration, key: Option<(Duration, u64)> },
}

impl Sleep {
    /// A timer that fires after `duration`.
    pub fn new(duration: Duration) -> Sleep {
        match sim() {
            Some(clock) => {
                let deadline = clock.now.get().saturating_add(duration);
                Sleep::Sim { clock, deadline, key: None }
            }
            None => Sleep::Real(glommio::timer::Timer::new(on_grid(duration))),
        }
    }

    /// A timer that fires at `deadline`.
    pub fn until(deadline: RtInstant) -> Sleep {
        Sleep::new(deadline - RtInstant::now())
    }
}

impl std::future::Future for Sleep {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match &mut *self {
            Sleep::Real(timer) => std::pin::Pin::new(timer).poll(cx).map(|_| ()),
            Sleep::Sim { clock, deadline, key } => {
                if clock.now.get() >= *deadline {
                    if let Some(k) = key.take() {
                        clock.cancel_timer(k);
                    }
                    return std::task::Poll::Ready(());
                }
                *key = Some(clock.set_timer(*deadline, *key, cx.waker()));
                std::task::Poll::Pending
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Sleep::Sim { clock, key: Some(k), .. } = self {
            clock.cancel_timer(*k);
        }
    }
}

/// The runtime's random generator: the thread's, or the simulation's.
#[derive(Debug)]
pub enum RtRng {
    Thread(rand::rngs::ThreadRng),
    Sim(Rc<SimClock>),
}

impl RtRng {
    /// The generator of this thread.
    pub fn current() -> RtRng {
        match sim() {
            Some(clock) => RtRng::Sim(clock),
            None => RtRng::Thread(rand::rng()),
        }
    }
}

impl rand::TryRng for RtRng {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(match self {
            RtRng::Thread(rng) => rand::Rng::next_u32(rng),
            RtRng::Sim(clock) => (clock.next_u64() >> 32) as u32,
        })
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(match self {
            RtRng::Thread(rng) => rand::Rng::next_u64(rng),
            RtRng::Sim(clock) => clock.next_u64(),
        })
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        match self {
            RtRng::Thread(rng) => rand::Rng::fill_bytes(rng, dst),
            RtRng::Sim(clock) => {
                for chunk in dst.chunks_mut(8) {
                    let bytes = clock.next_u64().to_le_bytes();
                    chunk.copy_from_slice(&bytes[..chunk.len()]);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_timers_are_stretched_to_the_grid_never_shortened() {
        assert_eq!(grid_wait(Duration::from_micros(1234), Duration::ZERO), Duration::ZERO);
        let step = TIMER_GRID.as_nanos();
        for now_us in [0u64, 1, 3_999, 4_000, 4_001, 123_456_789] {
            let now = Duration::from_micros(now_us);
            for ms in [1u64, 3, 4, 5, 59, 60, 300, 601] {
                let asked = Duration::from_millis(ms);
                let given = grid_wait(now, asked);
                assert!(given >= asked, "{ms} ms at {now:?} shortened to {given:?}");
                assert!(given < asked + TIMER_GRID, "{ms} ms at {now:?} stretched to {given:?}");
                assert_eq!((now + given).as_nanos() % step, 0, "{ms} ms at {now:?} ends off the grid");
            }
        }
        assert!(on_grid(Duration::from_millis(5)) >= Duration::from_millis(5));
    }
}
