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
