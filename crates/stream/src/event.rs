//! One record as sinks see it: where and when it was recorded, the common
//! header, its event, its bytes, and typed field access through the
//! event's parsed format.
//!
//! Mirrors `struct trace_entry` (include/linux/trace_events.h) followed by
//! the event's own fields as its `format` file lays them out. Values are
//! read from the bytes on access ([`ktrace_event::EventFormat::value`]):
//! nothing is decoded that no sink asks for, and scalars and strings are
//! read without allocating. It does not format.

use ktrace_event::{Common, Endian, EventFormat, Field, Int, StrValue, Value};

use crate::{Comms, EventInfo};

/// A decoded record handed to [`crate::Sink::event`].
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    /// The CPU it was recorded on.
    pub cpu: usize,
    /// Its time stamp (trace clock units: ns for the usual clocks).
    pub ts: u64,
    /// The common header: type id, flags, preempt count, pid.
    pub common: Common,
    /// Its event.
    pub info: &'a EventInfo,
    /// The record bytes, starting at `common_type`.
    pub data: &'a [u8],
    /// Task names of the run (the one name service; see [`Event::comm`]).
    pub names: &'a Comms,
    /// Byte order of the traced kernel.
    pub endian: Endian,
}

impl<'a> Event<'a> {
    /// The task (thread id) that recorded it.
    #[inline]
    pub fn pid(&self) -> i32 {
        self.common.pid
    }

    /// The task's name as the kernel prints it (`<idle>`, `<...>`).
    pub fn comm(&self) -> &'a str {
        self.names.get(self.common.pid)
    }

    /// True for a stack record (shown with the event before it).
    #[inline]
    pub fn is_stack(&self) -> bool {
        self.info.is_stack()
    }

    /// The frames of a stack record (`kernel_stack`, `user_stack`), with
    /// the kernel's stop rule ([`ktrace_event::Stack`]); `None` for other
    /// records. Reads the bytes only as the frames are asked for.
    pub fn stack(&self) -> Option<ktrace_event::Stack<'a>> {
        ktrace_event::Stack::read(self.format(), self.data, self.endian)
    }

    /// The event's parsed format.
    #[inline]
    pub fn format(&self) -> &'a EventFormat {
        &self.info.event.format
    }

    /// The event's own fields (not the common ones), with their indexes.
    pub fn fields(&self) -> impl Iterator<Item = (usize, &'a Field)> + 'a {
        self.format()
            .fields
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.common)
    }

    /// Index of the field called `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.format().field_index(name)
    }

    /// Field `index` decoded (arrays become a vector).
    pub fn value(&self, index: usize) -> Value<'a> {
        self.format().value(self.data, index, self.endian)
    }

    /// The field called `name`, decoded.
    pub fn value_of(&self, name: &str) -> Option<Value<'a>> {
        Some(self.value(self.field_index(name)?))
    }

    /// Element `elem` of integer field `index`; `None` when it is not an
    /// integer or the record is too short.
    #[inline]
    pub fn int(&self, index: usize, elem: usize) -> Option<Int> {
        self.format().read_int(self.data, index, elem, self.endian)
    }

    /// Element `elem` of string field `index`.
    #[inline]
    pub fn str(&self, index: usize, elem: usize) -> StrValue<'a> {
        self.format().read_str(self.data, index, elem, self.endian)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventTable, Role};
    use ktrace_event::ProbeKind;

    const KERNEL_STACK: &str = "name: kernel_stack\nID: 4\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n\n\
print fmt: \"\\t=> %ps\\n\", (void *)REC->caller[0]\n";

    #[test]
    fn a_kernel_stack_deeper_than_its_format_says_is_whole() {
        // regression: `ktrace export` read caller[] through the format
        // (8 entries) and cut deeper kernel stacks at 8 frames; the record
        // holds as many as the kernel saved (`size`)
        let mut t = EventTable::new(8, None);
        t.add(
            "ftrace",
            KERNEL_STACK,
            ProbeKind::Other,
            None,
            Role::Stack { user: false },
        )
        .unwrap();
        let mut data = vec![0u8; 16];
        data[..2].copy_from_slice(&4u16.to_le_bytes());
        data[8..12].copy_from_slice(&12i32.to_le_bytes());
        for a in 1..=12u64 {
            data.extend_from_slice(&(0xffff_ffff_8100_0000 + a).to_le_bytes());
        }
        let names = Comms::new();
        let ev = Event {
            cpu: 0,
            ts: 0,
            common: Common::read(&data, Endian::Little).unwrap(),
            info: t.get(4).unwrap(),
            data: &data,
            names: &names,
            endian: Endian::Little,
        };
        let stack = ev.stack().expect("a stack record");
        assert!(!stack.user);
        assert_eq!(stack.frames().count(), 12);
        assert_eq!(stack.frames().last(), Some(0xffff_ffff_8100_000c));
    }
}
