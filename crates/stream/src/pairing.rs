//! Which stack records belong to an event that was shown.
//!
//! The kernel writes a `kernel_stack` record (from a `stacktrace` trigger)
//! and a `user_stack` record (from `options/userstacktrace`) right after
//! the event they belong to, on the same CPU, from the same task. It also
//! writes stacks for events it then throws away: a conditional trigger
//! (ktrace's are all conditional) is evaluated before the event's discard
//! checks, and a post trigger such as `stacktrace` runs even when the event
//! is discarded — because it is soft-disabled (adding a trigger to an event
//! not yet enabled registers it soft-disabled; disabling it with the trigger
//! still there does the same), or because the event's filter rejects what
//! the trigger's condition accepts. See `trace_event_buffer_commit()` and
//! `__event_trigger_test_discard()` in kernel/trace/trace.c and trace.h;
//! measured in the 6.1, 7.2 guests (tests/kernel/guest/62-stack-order.sh).
//! (Events left out by the pid lists are dropped before the triggers run.)
//! Such a stack has no event before it, or follows another task's event,
//! or is a second stack of one kind after one event.
//!
//! [`StackPairing`] keeps, per CPU, the event last shown there: a stack is
//! shown only if it comes from that event's task and is the first of its
//! kind after it. An event that is not shown (left out by the pid filter or
//! after the count) and lost events on the CPU end the pairing. It decides
//! only; it reads and prints nothing.

/// Per CPU: the event the next stack records may belong to.
#[derive(Debug, Clone, Copy, Default)]
struct Owner {
    /// The task of the event last shown on this CPU (`None`: no event, or
    /// the last one was not shown).
    pid: Option<i32>,
    /// A kernel stack was already shown for it.
    kernel: bool,
    /// A user stack was already shown for it.
    user: bool,
}

/// Decides, record by record in each CPU's order, whether a stack record
/// belongs to an event that was shown.
#[derive(Debug, Clone, Default)]
pub struct StackPairing {
    cpus: Vec<Owner>,
    orphans: u64,
}

impl StackPairing {
    /// No event seen on any CPU.
    pub fn new() -> StackPairing {
        StackPairing::default()
    }

    #[inline]
    fn owner(&mut self, cpu: usize) -> &mut Owner {
        if self.cpus.len() <= cpu {
            self.cpus.resize(cpu + 1, Owner::default());
        }
        &mut self.cpus[cpu]
    }

    /// An event (not a stack) of task `pid` on `cpu`, `shown` or not.
    #[inline]
    pub fn event(&mut self, cpu: usize, pid: i32, shown: bool) {
        let o = Owner {
            pid: shown.then_some(pid),
            kernel: false,
            user: false,
        };
        // owner() (which may grow the table) only for a CPU not seen yet
        match self.cpus.get_mut(cpu) {
            Some(slot) => *slot = o,
            None => *self.owner(cpu) = o,
        }
    }

    /// A stack record of task `pid` on `cpu` (`user`: a user stack):
    /// true if it belongs to the event last shown on that CPU.
    pub fn stack(&mut self, cpu: usize, pid: i32, user: bool) -> bool {
        let o = self.owner(cpu);
        let seen = if user { &mut o.user } else { &mut o.kernel };
        let ok = o.pid == Some(pid) && !*seen;
        if ok {
            *seen = true;
        } else {
            self.orphans += 1;
        }
        ok
    }

    /// The kernel lost records on `cpu`: what follows belongs to no event
    /// seen.
    pub fn lost(&mut self, cpu: usize) {
        *self.owner(cpu) = Owner::default();
    }

    /// Stack records left out so far because no shown event owned them.
    pub fn orphans(&self) -> u64 {
        self.orphans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_before_any_event_is_an_orphan() {
        // the soft-disabled window: the trigger fired before the event was
        // enabled (issue 14 #17: a stack on CPU 0 before the first event)
        let mut p = StackPairing::new();
        assert!(!p.stack(0, 42, false));
        p.event(0, 42, true);
        assert!(p.stack(0, 42, false));
        assert_eq!(p.orphans(), 1);
    }

    #[test]
    fn one_stack_of_each_kind_per_event() {
        let mut p = StackPairing::new();
        p.event(1, 7, true);
        assert!(p.stack(1, 7, true));
        assert!(p.stack(1, 7, false));
        // the same task again, its event discarded (soft-disabled at the end)
        assert!(!p.stack(1, 7, false));
        assert!(!p.stack(1, 7, true));
        assert_eq!(p.orphans(), 2);
    }

    #[test]
    fn stack_of_another_task_is_an_orphan() {
        // another task's event discarded on this CPU, its stack written
        let mut p = StackPairing::new();
        p.event(0, 7, true);
        assert!(!p.stack(0, 9, false));
        assert!(p.stack(0, 7, false));
    }

    #[test]
    fn cpus_are_paired_separately() {
        let mut p = StackPairing::new();
        p.event(0, 7, true);
        p.event(3, 8, true);
        assert!(p.stack(3, 8, false));
        assert!(p.stack(0, 7, false));
        assert!(!p.stack(2, 7, false));
    }

    #[test]
    fn an_event_not_shown_takes_its_stack_along() {
        let mut p = StackPairing::new();
        p.event(0, 7, true);
        p.event(0, 7, false);
        assert!(!p.stack(0, 7, false));
    }

    #[test]
    fn loss_ends_the_pairing() {
        let mut p = StackPairing::new();
        p.event(0, 7, true);
        p.lost(0);
        assert!(!p.stack(0, 7, false));
    }
}
