//! The text, JSON and raw outputs as [`ktrace_stream::Sink`]s.
//!
//! Each formats the records ktrace-stream hands it (already decoded and
//! filtered) into its [`Dest`]'s buffer, which is written out when it
//! grows past 64 KiB and at the end of every reading round, so output
//! appears within a round of the event and a full disk or a closed pipe is
//! seen at once: the write error is returned and ends the run. Lost-events
//! notices are the kernel's (`CPU:N [LOST M EVENTS]`) in text, objects in
//! JSON, `lost CPU N` lines in raw. Mirrors nothing in the kernel beyond
//! what the printers mirror.

use std::io::{self, Write};

use ktrace_ring::Missed;
use ktrace_stream::{Event, EventTable, Flow, Sink};

use crate::{FlagStyle, JsonPrinter, Symbolizer, TextPrinter};

/// Bytes buffered before a write.
const CHUNK: usize = 1 << 16;

/// Where a sink's lines go: a buffer the printers format straight into,
/// written out when it is full enough and at every flush. A destination
/// with a buffer of its own (ktrace's output thread) implements it to take
/// the formatted bytes without copying them; any `Write` gets one through
/// [`Buffered`].
pub trait Dest {
    /// The buffer to append formatted lines to.
    fn buf(&mut self) -> &mut Vec<u8>;
    /// An event of type `id` (not a stack, which belongs to the event
    /// before it) starts at the buffer's end: a destination that counts
    /// the events it writes whole marks it. Nothing by default.
    #[inline]
    fn starts(&mut self, id: u16) {
        let _ = id;
    }
    /// Called after each record: writes out when the buffer is full
    /// enough. An error ends the run.
    fn filled(&mut self) -> io::Result<()>;
    /// Writes out everything buffered.
    fn flush(&mut self) -> io::Result<()>;
}

/// A 64 KiB buffer in front of a `Write`.
pub struct Buffered<W: Write> {
    w: W,
    buf: Vec<u8>,
}

impl<W: Write> Buffered<W> {
    /// A buffer in front of `w`.
    pub fn new(w: W) -> Buffered<W> {
        Buffered {
            w,
            buf: Vec::with_capacity(CHUNK + 4096),
        }
    }

    fn write(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let r = self.w.write_all(&self.buf);
            self.buf.clear();
            r?;
        }
        Ok(())
    }
}

impl<W: Write> Dest for Buffered<W> {
    #[inline]
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    #[inline]
    fn filled(&mut self) -> io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.write()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write()?;
        self.w.flush()
    }
}

/// The `Sink` methods the text and JSON sinks share: both printers write a
/// record with `write_line` and a loss notice with `write_lost`.
macro_rules! line_sink_methods {
    () => {
        #[inline]
        fn event(&mut self, ev: &Event<'_>) -> io::Result<Flow> {
            let p = printer(&mut self.printer)?;
            if !ev.is_stack() {
                self.out.starts(ev.info.id);
            }
            p.write_line(
                self.out.buf(),
                ev.cpu,
                ev.ts,
                ev.data,
                ev.common,
                Some(&ev.info.event),
                ev.names,
            );
            self.out.filled()?;
            Ok(Flow::Continue)
        }

        fn lost(&mut self, cpu: usize, missed: Missed) -> io::Result<()> {
            printer(&mut self.printer)?.write_lost(self.out.buf(), cpu, missed);
            self.out.filled()
        }

        fn flush(&mut self) -> io::Result<()> {
            self.out.flush()
        }

        fn finish(&mut self, _end: &ktrace_stream::EndOfRun) -> io::Result<()> {
            self.out.flush()
        }
    };
}

/// The kernel's `trace` text.
pub struct TextSink<'a, D: Dest> {
    out: D,
    symbols: &'a dyn Symbolizer,
    style: FlagStyle,
    time_in_ns: bool,
    syscall_style: crate::SyscallStyle,
    hide_probe_frames: bool,
    printer: Option<TextPrinter<'a>>,
}

impl<'a, W: Write> TextSink<'a, Buffered<W>> {
    /// Text to `w`, with the flag column in `style`, kernel addresses
    /// resolved by `symbols`, and time stamps printed as `secs.usecs` when
    /// `time_in_ns` (see [`crate::clock_in_ns`]), raw otherwise.
    pub fn new(
        w: W,
        style: FlagStyle,
        symbols: &'a dyn Symbolizer,
        time_in_ns: bool,
    ) -> TextSink<'a, Buffered<W>> {
        TextSink::with_dest(Buffered::new(w), style, symbols, time_in_ns)
    }
}

impl<'a, D: Dest> TextSink<'a, D> {
    /// Text formatted straight into `dest`'s buffer (see [`TextSink::new`]).
    pub fn with_dest(
        dest: D,
        style: FlagStyle,
        symbols: &'a dyn Symbolizer,
        time_in_ns: bool,
    ) -> TextSink<'a, D> {
        TextSink {
            out: dest,
            symbols,
            style,
            time_in_ns,
            syscall_style: crate::SyscallStyle::Mixed,
            hide_probe_frames: false,
            printer: None,
        }
    }

    /// Leaves the probe machinery's frames out of kernel stacks (see
    /// [`TextPrinter::hide_probe_frames`]).
    pub fn hide_probe_frames(mut self, on: bool) -> Self {
        self.hide_probe_frames = on;
        self
    }

    /// Prints `syscalls` events in `style` (see [`crate::SyscallStyle`];
    /// the newest by default).
    pub fn syscalls(mut self, style: crate::SyscallStyle) -> Self {
        self.syscall_style = style;
        self
    }
}

impl<D: Dest> Sink for TextSink<'_, D> {
    fn begin(&mut self, table: &EventTable) -> io::Result<()> {
        let mut p = TextPrinter::new(
            table.events(),
            ktrace_ring::Endian::native(),
            self.style,
            self.symbols,
            ktrace_stream::Comms::new(),
        );
        p.time_in_ns = self.time_in_ns;
        p.syscall_style = self.syscall_style;
        p.hide_probe_frames = self.hide_probe_frames;
        self.printer = Some(p);
        Ok(())
    }

    line_sink_methods!();
}

fn printer<T>(p: &mut Option<T>) -> io::Result<&mut T> {
    p.as_mut()
        .ok_or_else(|| io::Error::other("sink used before begin"))
}

/// JSON lines with typed values.
pub struct JsonSink<'a, D: Dest> {
    out: D,
    symbols: &'a dyn Symbolizer,
    printer: Option<JsonPrinter<'a>>,
}

impl<'a, W: Write> JsonSink<'a, Buffered<W>> {
    /// JSON lines to `w`, kernel addresses resolved by `symbols`.
    pub fn new(w: W, symbols: &'a dyn Symbolizer) -> JsonSink<'a, Buffered<W>> {
        JsonSink::with_dest(Buffered::new(w), symbols)
    }
}

impl<'a, D: Dest> JsonSink<'a, D> {
    /// JSON lines formatted straight into `dest`'s buffer.
    pub fn with_dest(dest: D, symbols: &'a dyn Symbolizer) -> JsonSink<'a, D> {
        JsonSink {
            out: dest,
            symbols,
            printer: None,
        }
    }
}

impl<D: Dest> Sink for JsonSink<'_, D> {
    fn begin(&mut self, table: &EventTable) -> io::Result<()> {
        self.printer = Some(JsonPrinter::new(
            table.events(),
            ktrace_ring::Endian::native(),
            self.symbols,
            ktrace_stream::Comms::new(),
        ));
        Ok(())
    }

    line_sink_methods!();
}

/// `ts cpu pid system:event field=value...` lines.
pub struct RawSink<D: Dest> {
    out: D,
}

impl<W: Write> RawSink<Buffered<W>> {
    /// Raw lines to `w`.
    pub fn new(w: W) -> RawSink<Buffered<W>> {
        RawSink::with_dest(Buffered::new(w))
    }
}

impl<D: Dest> RawSink<D> {
    /// Raw lines formatted straight into `dest`'s buffer.
    pub fn with_dest(dest: D) -> RawSink<D> {
        RawSink { out: dest }
    }
}

impl<D: Dest> Sink for RawSink<D> {
    #[inline]
    fn event(&mut self, ev: &Event<'_>) -> io::Result<Flow> {
        if !ev.is_stack() {
            self.out.starts(ev.info.id);
        }
        crate::json::write_raw_line(
            self.out.buf(),
            Some(&ev.info.event),
            ev.common,
            ev.endian,
            ev.cpu,
            ev.ts,
            ev.data,
        );
        self.out.filled()?;
        Ok(Flow::Continue)
    }

    fn lost(&mut self, cpu: usize, missed: Missed) -> io::Result<()> {
        match missed {
            Missed::None => {}
            Missed::Unknown => writeln!(self.out.buf(), "lost {cpu} ?")?,
            Missed::Count(n) => writeln!(self.out.buf(), "lost {cpu} {n}")?,
        }
        self.out.filled()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn finish(&mut self, _end: &ktrace_stream::EndOfRun) -> io::Result<()> {
        self.out.flush()
    }
}
