//! The whole machine's CPU time from the first line of `/proc/stat`: how
//! much the hypervisor stole, and how busy every CPU was, between two
//! reads. The figures are in clock ticks (`USER_HZ`, 100 per second here),
//! so over half a second on two CPUs one tick is 1% of the window: fine for
//! flagging a noisy window, too coarse for anything finer.
//!
//! Busy time covers every process on the machine (another build, the
//! kernel's own threads), so it bounds from above what this process and
//! the kernel did for it.

/// The `cpu` line's counters, in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Every tick accounted (guest time is already inside `user`/`nice`).
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }

    /// Ticks some CPU spent running something.
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }

    /// Field-wise `self - earlier` (0 where a counter went back).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }

    /// Stolen share of all ticks, in percent (`None` without ticks).
    pub fn steal_pct(&self) -> Option<f64> {
        let total = self.total();
        (total > 0).then(|| self.steal as f64 * 100.0 / total as f64)
    }
}

/// The aggregate `cpu` line of `/proc/stat` text. Kernels before 2.6.11
/// have no steal field; it is then 0.
pub fn parse(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).map_while(|f| f.parse().ok()).collect();
    if v.len() < 4 {
        return None;
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        user: at(0),
        nice: at(1),
        system: at(2),
        idle: at(3),
        iowait: at(4),
        irq: at(5),
        softirq: at(6),
        steal: at(7),
    })
}

/// Reads `/proc/stat` now.
pub fn read() -> Option<CpuTimes> {
    parse(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Clock ticks per second of the `/proc/stat` counters.
pub fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aggregate_line_parses_and_differences_give_steal() {
        let a = "cpu  100 5 50 800 10 1 2 30 7 0\ncpu0 50 2 25 400 5 0 1 15 3 0\nintr 1 2 3\n";
        let b = "cpu  160 5 70 900 10 1 4 40 9 0\ncpu0 80 2 35 450 5 0 2 20 4 0\n";
        let (a, b) = (parse(a).unwrap(), parse(b).unwrap());
        assert_eq!(a.steal, 30);
        assert_eq!(a.total(), 100 + 5 + 50 + 800 + 10 + 1 + 2 + 30);
        let d = b.since(&a);
        assert_eq!(
            d,
            CpuTimes { user: 60, system: 20, idle: 100, softirq: 2, steal: 10, ..CpuTimes::default() }
        );
        assert_eq!(d.busy(), 82);
        let pct = d.steal_pct().unwrap();
        assert!((pct - 10.0 * 100.0 / 192.0).abs() < 1e-9);
    }

    #[test]
    fn old_or_odd_text() {
        assert_eq!(parse("cpu  1 2 3 4\n").map(|c| (c.idle, c.steal)), Some((4, 0)));
        assert_eq!(parse("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse("cpu 1 2\n"), None);
        assert_eq!(CpuTimes::default().steal_pct(), None);
    }
}
