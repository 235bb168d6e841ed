//! Event text identical to the kernel's `trace` / `trace_pipe` lines.
//!
//! Mirrors `print_trace_line()` / `print_trace_fmt()` in
//! kernel/trace/trace.c (context columns, then the event), `print_kprobe_event`
//! / `print_kretprobe_event` in kernel/trace/trace_kprobe.c (`(sym+off/size)`,
//! `(caller+off/size <- func)`), `print_uprobe_event` in
//! kernel/trace/trace_uprobe.c (`(0x...)`, `(0x... <- 0x...)`), and the
//! per-type print functions of kernel/trace/trace_probe.c, which the event's
//! `print fmt` spells out (`%u`, `%d`, `%Lu`, `0x%x`, `'%c'`, `"%s"`, `%pS`,
//! `{...}` arrays); a string whose fetch faulted prints `(fault)` without
//! quotes. Lost events print as the kernel's `CPU:N [LOST M EVENTS]`. It does
//! not read pages or files.

use crate::Symbolizer;
use crate::context::{FlagStyle, write_task_cpu};
use crate::line::{Line, Padded, Region};
use crate::num;
use crate::syscalls::SyscallStyle;
use ktrace_event::append::append;
use ktrace_event::printfmt::{Arg, Conv, Dims, Op, Render, Spec, length_bits, pad_str};
use ktrace_event::{
    Common, Endian, Event, EventFormat, Events, FieldKind, ProbeKind, StrValue, read_loc_str,
};
use ktrace_ring::Missed;
use ktrace_stream::Comms;
use std::cell::RefCell;
use std::io::Write;
use std::sync::Arc;

/// Whether the kernel prints time stamps of trace clock `clock` as
/// nanoseconds (`secs.usecs`): every clock but the counting ones,
/// `counter`, `uptime` (jiffies) and `x86-tsc` (`trace_clocks[].in_ns` in
/// kernel/trace/trace.c).
pub fn clock_in_ns(clock: &str) -> bool {
    !matches!(clock, "counter" | "uptime" | "x86-tsc")
}

/// What the context columns show: the task, the CPU, the generation of the
/// task names, the flags, the preempt count, and whether the flag columns
/// are printed.
type CtxKey = (i32, usize, u64, u8, u8, bool);

/// Renders records as kernel `trace` lines.
pub struct TextPrinter<'a> {
    events: Events,
    endian: Endian,
    long_size: usize,
    style: FlagStyle,
    symbols: &'a dyn Symbolizer,
    /// Task names used for the TASK column.
    pub comms: Comms,
    /// Whether to print the irq-info column (the kernel's `irq-info` option,
    /// on by default).
    pub irq_info: bool,
    /// Whether time stamps are nanoseconds, printed ` %5lu.%06lu` (the
    /// default); false for the kernel's counting clocks (`counter`,
    /// `uptime`, `x86-tsc`), whose stamps it prints raw as ` %12llu`. See
    /// [`clock_in_ns`].
    pub time_in_ns: bool,
    /// How the kernel prints `syscalls` events (by release; the newest by
    /// default).
    pub syscall_style: SyscallStyle,
    /// Whether kernel stacks leave out the probe machinery's frames at
    /// their top ([`ktrace_event::probe_machinery`]; off by default: the
    /// kernel prints them).
    pub hide_probe_frames: bool,
    /// Per event id: what `write_event` would otherwise work out per record.
    plans: Vec<Option<Plan>>,
    /// The context columns last written, and what they were made from
    /// (pid, cpu, comms generation, flags, preempt count, irq_info).
    ctx: Padded,
    ctx_key: Option<CtxKey>,
    /// The whole seconds `ctx` ends with (` %5lu.` is appended to it).
    ctx_secs: u64,
    /// [`TextPrinter::write_ip_sym`]'s texts by address.
    sym_cache: RefCell<Vec<SymSlot>>,
    /// Where [`TextPrinter::write_fast_line`] formats a line (zeroed once,
    /// not for every line as a region of the output would be).
    scratch: RefCell<Box<Region>>,
}

/// Entries of [`TextPrinter`]'s symbol text cache.
const SYM_SLOTS: usize = 256;

/// An address's text as [`TextPrinter::write_ip_sym`] printed it (`addr`
/// 0: empty; 0 is never looked up).
#[derive(Default)]
struct SymSlot {
    addr: u64,
    offset: bool,
    found: bool,
    text: Vec<u8>,
}

/// What [`TextPrinter::write_event`] needs to know about one event before
/// it sees a record: the probe header's fields and the print fmt body as
/// steps, worked out once per event rather than per record.
struct Plan {
    event: Arc<Event>,
    /// `name: `, followed by `(0x` for user probes whose header is printed.
    prefix: Vec<u8>,
    /// The prefix and probe header as last printed, with the addresses
    /// they show (`__probe_ip`, or `__probe_ret_ip` and `__probe_func`;
    /// none for other events): a probe's own address is the same in every
    /// record and a return's nearly always, so they are not formatted (nor
    /// a kernel address looked up) again.
    head: RefCell<(u64, u64, Padded)>,
    /// The steps as [`FastOp`]s when they all have one (see
    /// [`TextPrinter::write_fast_line`]), with the most bytes they print
    /// besides their strings, and how many strings.
    fast: Option<(Box<[FastOp]>, usize, usize)>,
    /// Readers of `__probe_ip`, `__probe_ret_ip`, `__probe_func`.
    ip: Option<FastInt>,
    ret_ip: Option<FastInt>,
    func: Option<FastInt>,
    /// Whether the kernel prints the probe header itself.
    probe: bool,
    /// Whether the kernel prints the body as probe arguments
    /// (`trace_probe_print_args()`: a faulted string is `(fault)`).
    args: bool,
    /// The print fmt from the end of the probe header on (the header's
    /// closing `)` is the first literal's first byte).
    steps: Vec<Step>,
    /// An `ftrace` or `syscalls` event, or one without a print format:
    /// [`TextPrinter::write_event`] tries its own printers (or fails) for
    /// it before the steps.
    special: bool,
}

/// One step of a [`Plan`].
enum Step {
    /// Bytes printed as they are.
    Lit(Box<[u8]>),
    /// Bytes printed as they are, at most 16 of them: `bytes` padded with
    /// zeros to 16, appended whole and cut back to `len` (one fixed-size
    /// copy instead of `append`'s tests of the length).
    Short {
        /// The bytes, then zeros.
        padded: [u8; 16],
        /// How many bytes are the literal's.
        len: u8,
    },
    /// A plain integer conversion, precomputed, after the short literal
    /// before it in the format (`lead`, often ` a=0x`): one step, not
    /// two, for the pair nearly every probe argument prints as.
    Int { lead: Lead, fi: FastInt },
    /// A `%s` of a string field (`__get_str()`), its width and precision
    /// written in the format (`plain`: neither), printed from the record
    /// without going through [`Render`], after its `lead` as above.
    Str {
        lead: Lead,
        src: StrSrc,
        dims: Dims,
        plain: bool,
    },
    /// Any other conversion, rendered from the print fmt op.
    Conv(Spec, Arg),
}

/// The literal of at most 16 bytes a conversion step prints first (none:
/// `len` 0), padded like [`Step::Short`].
#[derive(Clone, Copy, Default)]
struct Lead {
    padded: [u8; 16],
    len: u8,
}

impl Lead {
    /// Appends the literal; after a faulted string (`skip_quote`) without
    /// its first byte if that is the closing `"` (see
    /// [`TextPrinter::write_steps`]).
    #[inline(always)]
    fn write(&self, out: &mut Vec<u8>, skip_quote: bool) {
        let len = usize::from(self.len);
        if skip_quote && len > 0 && self.padded[0] == b'"' {
            append(out, &self.padded[1..len]);
            return;
        }
        let at = out.len();
        out.extend_from_slice(&self.padded);
        out.truncate(at + len);
    }
}

/// Where a [`Step::Str`] string is.
#[derive(Clone, Copy)]
enum StrSrc {
    /// A `__data_loc` (`__rel_loc`: `relative`) reference at byte `at` of
    /// the record, found in the format once.
    Loc { at: usize, relative: bool },
    /// Element `elem` (of a `__data_loc char[][N]` array) of field
    /// `index`, which is not a reference [`EventFormat::read_str`] can
    /// read: looked at per record, to fail as it does.
    Field { index: usize, elem: usize },
}

impl StrSrc {
    fn new(f: &EventFormat, index: usize, elem: usize) -> StrSrc {
        match f.fields.get(index) {
            Some(fl) if elem < fl.count => match fl.kind {
                FieldKind::DataLoc { relative } => StrSrc::Loc {
                    at: fl.offset + elem * 4,
                    relative,
                },
                _ => StrSrc::Field { index, elem },
            },
            _ => StrSrc::Field { index, elem },
        }
    }

    /// The string of record `data`, as [`EventFormat::read_str`] reads it.
    #[inline]
    fn read<'d>(self, f: &EventFormat, data: &'d [u8], endian: Endian) -> StrValue<'d> {
        match self {
            StrSrc::Loc { at, relative } => read_loc_str(data, at, relative, endian),
            StrSrc::Field { index, elem } => f.read_str(data, index, elem, endian),
        }
    }
}

/// A `%d`/`%u`/`%x`/`%#x`/`%X` (any length modifier, no width, precision,
/// `+` or space) of an in-bounds element of an integer field: the bytes to
/// read and how, so the record is read without looking the field up.
#[derive(Clone, Copy)]
struct FastInt {
    off: usize,
    size: usize,
    signed: bool,
    /// Bits of the printf length (`%hhd` 8 ... `%lld` 64).
    width_bits: u32,
    /// What to print.
    conv: FastConv,
}

/// The conversions [`FastInt`] prints.
#[derive(Clone, Copy)]
enum FastConv {
    Signed,
    Unsigned,
    Hex { upper: bool, alt: bool },
}

impl Plan {
    fn new(ev: &Arc<Event>, long_size: usize) -> Plan {
        let f = &ev.format;
        let header_convs = match ev.kind {
            ProbeKind::Uprobe | ProbeKind::Kprobe => 1,
            ProbeKind::Uretprobe | ProbeKind::Kretprobe => 2,
            // kernels before 6.2 gave eprobes a `(%u)` header over a
            // `__probe_type` field; later ones none
            ProbeKind::Eprobe if f.field("__probe_type").is_some() => 1,
            ProbeKind::Eprobe | ProbeKind::Other => 0,
        };
        let (start, skip) = match &f.print_fmt {
            Some(pf) if header_convs > 0 => body_start(&pf.ops, header_convs).unwrap_or_default(),
            _ => (0, 0),
        };
        let probe = header_convs > 0 && (start, skip) != (0, 0);
        let mut prefix = f.name.as_bytes().to_vec();
        prefix.extend_from_slice(b": ");
        if probe && matches!(ev.kind, ProbeKind::Uprobe | ProbeKind::Uretprobe) {
            prefix.extend_from_slice(b"(0x");
        }
        // print_eprobe_event(): `(system.event)`, then the arguments
        let eprobe = ev.kind == ProbeKind::Eprobe;
        if eprobe {
            prefix.push(b'(');
            prefix.extend_from_slice(ev.target.as_deref().unwrap_or("?").as_bytes());
            prefix.push(b')');
        }
        let steps: Vec<Step> = match &f.print_fmt {
            Some(pf) => pf
                .ops
                .iter()
                .enumerate()
                .skip(start)
                .map(|(i, op)| match op {
                    // the header's `)` is this literal's, skipped or not
                    // (an eprobe's prefix carries its own)
                    Op::Lit(b) if i == start && (!probe || eprobe) => {
                        Step::lit(&b[skip.min(b.len())..])
                    }
                    Op::Lit(b) => Step::lit(b),
                    Op::Conv {
                        spec,
                        arg: Arg::Str { index, elem },
                    } if spec.conv == Conv::Str
                        && spec.width_arg.is_none()
                        && spec.precision_arg.is_none() =>
                    {
                        let dims = Dims::of(spec);
                        Step::Str {
                            lead: Lead::default(),
                            src: StrSrc::new(f, *index, elem.unwrap_or(0)),
                            plain: dims.width.is_none() && dims.precision.is_none(),
                            dims,
                        }
                    }
                    Op::Conv { spec, arg } => match FastInt::new(f, spec, arg, long_size) {
                        Some(fi) => Step::Int {
                            lead: Lead::default(),
                            fi,
                        },
                        None => Step::Conv(spec.clone(), arg.clone()),
                    },
                })
                .collect(),
            None => Vec::new(),
        };
        let steps = fuse_leads(steps);
        Plan {
            event: ev.clone(),
            head: RefCell::default(),
            prefix,
            ip: FastInt::field(f, "__probe_ip"),
            ret_ip: FastInt::field(f, "__probe_ret_ip"),
            func: FastInt::field(f, "__probe_func"),
            probe: probe && !eprobe,
            args: probe || eprobe,
            fast: fast_ops(&steps),
            steps,
            special: ev.system == "ftrace" || ev.system == "syscalls" || f.print_fmt.is_none(),
        }
    }
}

/// A step of [`TextPrinter::write_fast_line`]: a [`Step`] of the kinds
/// every probe argument prints as, on the path where nothing fails.
enum FastOp {
    /// [`Step::Short`].
    Short(Lead),
    /// [`Step::Lit`].
    Long(Padded),
    /// [`Step::Int`].
    Int(Lead, FastInt),
    /// [`Step::Str`] of a `__data_loc` string without width or precision.
    Str {
        lead: Lead,
        at: usize,
        relative: bool,
    },
}

/// `steps` as [`FastOp`]s, with the most bytes they print besides their
/// strings and how many strings they print; `None` when a step has no
/// fast form.
fn fast_ops(steps: &[Step]) -> Option<(Box<[FastOp]>, usize, usize)> {
    let (mut bytes, mut strs) = (0, 0);
    let ops = steps
        .iter()
        .map(|step| {
            Some(match step {
                Step::Short { padded, len } => {
                    bytes += 16;
                    FastOp::Short(Lead {
                        padded: *padded,
                        len: *len,
                    })
                }
                Step::Lit(b) => {
                    bytes += b.len() + 16;
                    FastOp::Long(Padded::new(b))
                }
                // the sign, up to 20 digits, a store's 32 bytes
                Step::Int { lead, fi } => {
                    bytes += 16 + 1 + 32;
                    FastOp::Int(*lead, *fi)
                }
                Step::Str {
                    lead,
                    src: StrSrc::Loc { at, relative },
                    plain: true,
                    ..
                } => {
                    bytes += 16 + 16;
                    strs += 1;
                    FastOp::Str {
                        lead: *lead,
                        at: *at,
                        relative: *relative,
                    }
                }
                Step::Str { .. } | Step::Conv(..) => return None,
            })
        })
        .collect::<Option<Box<[FastOp]>>>()?;
    Some((ops, bytes, strs))
}

/// `steps` with each [`Step::Short`] that comes right before an
/// [`Step::Int`] or a [`Step::Str`] moved into that step's lead.
fn fuse_leads(steps: Vec<Step>) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for mut step in steps {
        if let Step::Int { lead, .. } | Step::Str { lead, .. } = &mut step
            && let Some(Step::Short { padded, len }) = out.last()
        {
            *lead = Lead {
                padded: *padded,
                len: *len,
            };
            out.pop();
        }
        out.push(step);
    }
    out
}

impl Step {
    /// The step printing `b` as it is.
    fn lit(b: &[u8]) -> Step {
        if b.len() <= 16 {
            let mut padded = [0u8; 16];
            padded[..b.len()].copy_from_slice(b);
            Step::Short {
                padded,
                len: b.len() as u8,
            }
        } else {
            Step::Lit(b.into())
        }
    }
}

impl FastInt {
    /// A reader of integer field `name` (element 0), as `read_int` reads it.
    fn field(f: &EventFormat, name: &str) -> Option<FastInt> {
        let fl = f.field(name)?;
        if fl.kind != FieldKind::Int || fl.count == 0 || !matches!(fl.elem_size, 1 | 2 | 4 | 8) {
            return None;
        }
        Some(FastInt {
            off: fl.offset,
            size: fl.elem_size,
            signed: fl.signed,
            width_bits: 64,
            conv: FastConv::Unsigned,
        })
    }

    /// The fast form of `spec` on `arg`, if it has one.
    fn new(f: &EventFormat, spec: &Spec, arg: &Arg, long_size: usize) -> Option<FastInt> {
        let Arg::Field { index, elem } = arg else {
            return None;
        };
        if spec.width.is_some()
            || spec.precision.is_some()
            || spec.width_arg.is_some()
            || spec.precision_arg.is_some()
            || spec.plus
            || spec.space
        {
            return None;
        }
        let conv = match spec.conv {
            Conv::Signed => FastConv::Signed,
            Conv::Unsigned => FastConv::Unsigned,
            Conv::Hex { upper } => FastConv::Hex {
                upper,
                alt: spec.alt,
            },
            _ => return None,
        };
        let fl = f.fields.get(*index)?;
        let elem = elem.unwrap_or(0);
        if fl.kind != FieldKind::Int || elem >= fl.count || !matches!(fl.elem_size, 1 | 2 | 4 | 8) {
            return None;
        }
        Some(FastInt {
            off: fl.offset.checked_add(elem.checked_mul(fl.elem_size)?)?,
            size: fl.elem_size,
            signed: fl.signed,
            width_bits: length_bits(spec, long_size),
            conv,
        })
    }

    /// The value's bits as `read_int` would give them; `None` when the
    /// record is too short.
    #[inline]
    fn read(self, data: &[u8], endian: Endian) -> Option<u64> {
        let b = data.get(self.off..self.off.checked_add(self.size)?)?;
        let raw = match self.size {
            1 => u64::from(b[0]),
            2 => u64::from(endian.u16(b)),
            4 => u64::from(endian.u32(b)),
            _ => endian.u64(b),
        };
        Some(if self.signed {
            let shift = 64 - 8 * self.size as u32;
            (((raw << shift) as i64) >> shift) as u64
        } else {
            raw
        })
    }

    /// The value this spec prints for `bits`, cut to its width: the
    /// magnitude and whether a `-` goes before it (signed decimal only).
    #[inline(always)]
    fn value(self, bits: u64) -> (u64, bool) {
        let ubits = if self.width_bits >= 64 {
            bits
        } else {
            bits & ((1u64 << self.width_bits) - 1)
        };
        match self.conv {
            FastConv::Signed => {
                let sval = if self.width_bits >= 64 {
                    ubits as i64
                } else {
                    let sh = 64 - self.width_bits;
                    ((ubits << sh) as i64) >> sh
                };
                (sval.unsigned_abs(), sval < 0)
            }
            FastConv::Unsigned | FastConv::Hex { .. } => (ubits, false),
        }
    }

    /// [`FastInt::write`] into a [`Line`].
    #[inline(always)]
    fn put(self, line: &mut Line<'_>, bits: u64) {
        let (v, negative) = self.value(bits);
        match self.conv {
            FastConv::Hex { upper, alt } => {
                if alt {
                    line.byte(b'0');
                    line.byte(if upper { b'X' } else { b'x' });
                }
                line.hex(v, upper);
            }
            FastConv::Unsigned | FastConv::Signed => {
                if negative {
                    line.byte(b'-');
                }
                line.dec(v);
            }
        }
    }

    /// Prints `bits` as this spec's conversion prints it (the general
    /// path of [`TextPrinter::write_event`] and, into a [`Line`], `put`).
    #[inline]
    fn write(self, out: &mut Vec<u8>, bits: u64) {
        let (v, negative) = self.value(bits);
        match self.conv {
            // the kernel's number(): `%#x` of zero is `0x0` (C's is `0`)
            FastConv::Hex { upper, alt } => {
                if alt {
                    out.extend_from_slice(if upper { b"0X" } else { b"0x" });
                }
                num::hex_case(out, v, upper);
            }
            FastConv::Unsigned | FastConv::Signed => {
                if negative {
                    out.push(b'-');
                }
                num::dec(out, v);
            }
        }
    }
}

impl<'a> TextPrinter<'a> {
    /// A printer for records of `events` from a kernel with byte order
    /// `endian`, flag style `style`, resolving kernel addresses with
    /// `symbols`.
    pub fn new(
        events: &Events,
        endian: Endian,
        style: FlagStyle,
        symbols: &'a dyn Symbolizer,
        comms: Comms,
    ) -> TextPrinter<'a> {
        let mut plans: Vec<Option<Plan>> = Vec::new();
        for id in events.iter().map(|e| e.format.id) {
            let Some(ev) = events.get_shared(id) else {
                continue;
            };
            let id = usize::from(id);
            if plans.len() <= id {
                plans.resize_with(id + 1, || None);
            }
            plans[id] = Some(Plan::new(ev, events.long_size()));
        }
        TextPrinter {
            events: events.clone(),
            endian,
            long_size: events.long_size(),
            style,
            symbols,
            comms,
            irq_info: true,
            time_in_ns: true,
            syscall_style: SyscallStyle::Mixed,
            hide_probe_frames: false,
            plans,
            ctx: Padded::default(),
            ctx_key: None,
            ctx_secs: 0,
            sym_cache: RefCell::default(),
            scratch: RefCell::new(Box::new([0; Line::MAX + Line::SLACK])),
        }
    }

    /// Appends the line for one record (with its newline), with the
    /// printer's own events and names. Unknown event ids print the
    /// kernel's `Unknown type N` line.
    pub fn write_record(&mut self, out: &mut Vec<u8>, cpu: usize, ts: u64, data: &[u8]) {
        let Some(common) = Common::read(data, self.endian) else {
            let _ = writeln!(out, "CPU:{cpu} [RECORD TOO SHORT: {} BYTES]", data.len());
            return;
        };
        let comms = std::mem::take(&mut self.comms);
        let ev = self.events.get_shared(common.type_id).cloned();
        self.write_line(out, cpu, ts, data, common, ev.as_ref(), &comms);
        self.comms = comms;
    }

    /// Appends the line for one record whose header and event were found
    /// already (`ev`: `None` for an unknown id), naming tasks from `comms`.
    #[allow(clippy::too_many_arguments)]
    pub fn write_line(
        &mut self,
        out: &mut Vec<u8>,
        cpu: usize,
        ts: u64,
        data: &[u8],
        common: Common,
        ev: Option<&Arc<Event>>,
        comms: &Comms,
    ) {
        // the task, CPU and flag columns repeat from record to record:
        // format them again only when what they show may have changed
        let key = (
            common.pid,
            cpu,
            comms.generation(),
            common.flags,
            common.preempt_count,
            self.irq_info,
        );
        // ... and so do the time stamp's whole seconds (` %5lu.%06lu`,
        // rounded to the microsecond like ns2usecs())
        let us = ts.saturating_add(500) / 1000;
        let secs = if self.time_in_ns { us / 1_000_000 } else { 0 };
        if self.ctx_key != Some(key) || self.ctx_secs != secs {
            self.set_ctx(key, common, secs, comms);
        }
        if self.time_in_ns
            && let Some(ev) = ev
            && let Some(plan) = self
                .plans
                .get(usize::from(ev.format.id))
                .and_then(Option::as_ref)
            && Arc::ptr_eq(&plan.event, ev)
            && !plan.special
            && let Some(fast) = &plan.fast
            && self.write_fast_line(out, (us % 1_000_000) as u32, ev, plan, fast, data)
        {
            return;
        }
        self.write_slow_line(out, ts, us, data, common, ev);
    }

    /// The context columns (task, CPU, flags, the time stamp's whole
    /// seconds) into `self.ctx`, and the key under which they stand.
    #[inline(never)]
    fn set_ctx(&mut self, key: CtxKey, common: Common, secs: u64, comms: &Comms) {
        let cpu = key.1;
        let comm = comms.get(common.pid);
        let (irq_info, style, time_in_ns) = (self.irq_info, &self.style, self.time_in_ns);
        self.ctx.set(|ctx| {
            write_task_cpu(ctx, comm, common.pid, cpu);
            if irq_info {
                style.write(ctx, common.flags, common.preempt_count);
            }
            ctx.push(b' ');
            if time_in_ns {
                let mut b = [0u8; 24];
                num::right(ctx, num::digits(&mut b, secs, 10, false), 5);
                ctx.push(b'.');
            }
        });
        self.ctx_secs = secs;
        self.ctx_key = comms.knows(common.pid).then_some(key);
    }

    /// [`TextPrinter::write_line`] of a record the fast line does not
    /// take (out of line, so that the common path stays small): the
    /// context, the time stamp, the event's text step by step.
    #[inline(never)]
    fn write_slow_line(
        &mut self,
        out: &mut Vec<u8>,
        ts: u64,
        us: u64,
        data: &[u8],
        common: Common,
        ev: Option<&Arc<Event>>,
    ) {
        append(out, self.ctx.text());
        if self.time_in_ns {
            num::dec6_colon(out, (us % 1_000_000) as u32);
        } else {
            let mut b = [0u8; 24];
            num::right(out, num::digits(&mut b, ts, 10, false), 12);
            out.extend_from_slice(b": ");
        }
        match ev {
            Some(ev) => {
                let id = usize::from(ev.format.id);
                let cached = self
                    .plans
                    .get(id)
                    .and_then(Option::as_ref)
                    .is_some_and(|p| Arc::ptr_eq(&p.event, ev));
                if !cached && ev.format.print_fmt.is_some() {
                    if self.plans.len() <= id {
                        self.plans.resize_with(id + 1, || None);
                    }
                    self.plans[id] = Some(Plan::new(ev, self.long_size));
                }
                self.write_event(out, ev, data)
            }
            None => {
                let _ = write!(out, "Unknown type {}", common.type_id);
            }
        }
        out.push(b'\n');
    }

    /// The whole line of a record whose event's steps all have a
    /// [`FastOp`] (the context columns are in `self.ctx`, `usecs` the time
    /// stamp's fraction), formatted into a region of `out` set aside at
    /// once (see [`Line`]). False, with `out` as it was, when the record
    /// is not on the path where nothing fails (a field cut short, a
    /// string that faulted or points outside the record, a line longer
    /// than 4 KiB): the general path prints it then.
    fn write_fast_line(
        &self,
        out: &mut Vec<u8>,
        usecs: u32,
        ev: &Event,
        plan: &Plan,
        fast: &(Box<[FastOp]>, usize, usize),
        data: &[u8],
    ) -> bool {
        let (ops, bytes, strs) = fast;
        let head = self.head(ev, plan, data);
        let max = self.ctx.len() + 8 + head.2.len() + bytes + strs * data.len() + 1 + Line::SLACK;
        if max > Line::MAX {
            return false;
        }
        let mut scratch = self.scratch.borrow_mut();
        let mut line = Line::new(&mut scratch);
        line.padded(&self.ctx);
        line.dec6_colon(usecs);
        line.padded(&head.2);
        let endian = self.endian;
        let whole = ops.iter().all(|op| match op {
            FastOp::Short(lead) => {
                line.short(&lead.padded, usize::from(lead.len));
                true
            }
            FastOp::Long(b) => {
                line.padded(b);
                true
            }
            FastOp::Int(lead, fi) => {
                line.short(&lead.padded, usize::from(lead.len));
                match fi.read(data, endian) {
                    Some(v) => {
                        fi.put(&mut line, v);
                        true
                    }
                    None => false,
                }
            }
            FastOp::Str { lead, at, relative } => {
                line.short(&lead.padded, usize::from(lead.len));
                match read_loc_str(data, *at, *relative, endian) {
                    StrValue::Ok(s) => {
                        line.bytes(s);
                        true
                    }
                    StrValue::Fault | StrValue::Bad => false,
                }
            }
        });
        line.byte(b'\n');
        let n = line.len();
        if whole {
            // fixed-size moves, not a call of memcpy with its set-up for a
            // line's hundred bytes, the excess cut again (the scratch is
            // 4 KiB, and holds SLACK bytes past a line): most lines in one
            // copy of 128 bytes, longer ones in 16-byte pieces
            let start = out.len();
            if let Some(head) = scratch.first_chunk::<128>()
                && n <= 128
            {
                out.extend_from_slice(head);
            } else {
                out.reserve(n + 16);
                for piece in scratch[..n.next_multiple_of(16)].chunks_exact(16) {
                    out.extend_from_slice(piece);
                }
            }
            out.truncate(start + n);
        }
        whole
    }

    /// Appends the kernel's lost-events line for `cpu`.
    pub fn write_lost(&self, out: &mut Vec<u8>, cpu: usize, missed: Missed) {
        match missed {
            Missed::None => {}
            Missed::Unknown => {
                let _ = writeln!(out, "CPU:{cpu} [LOST EVENTS]");
            }
            Missed::Count(n) => {
                let _ = writeln!(out, "CPU:{cpu} [LOST {n} EVENTS]");
            }
        }
    }

    /// Appends `name: ` and the event's own text (no context, no newline).
    pub fn write_event(&self, out: &mut Vec<u8>, ev: &Event, data: &[u8]) {
        let f = &ev.format;
        let cached = self
            .plans
            .get(usize::from(f.id))
            .and_then(Option::as_ref)
            .filter(|p| std::ptr::eq(Arc::as_ptr(&p.event), ev));
        // a cached plan knows whether the event needs the checks below
        if let Some(plan) = cached
            && !plan.special
        {
            append(out, self.head(ev, plan, data).2.text());
            self.write_steps(out, f, plan, data);
            return;
        }
        if ev.system == "ftrace"
            && (self.write_stack(out, f, data)
                || self.write_function(out, f, data)
                || self.write_print(out, f, data))
        {
            return;
        }
        if ev.system == "syscalls"
            && crate::syscalls::write(
                out,
                f,
                data,
                self.endian,
                self.long_size,
                self.syscall_style,
            )
        {
            return;
        }
        if f.print_fmt.is_none() {
            out.extend_from_slice(f.name.as_bytes());
            out.extend_from_slice(b": [FAILED TO PARSE]");
            return;
        }
        let tmp;
        let plan = match cached {
            Some(p) => p,
            None => {
                tmp = Plan::new(&Arc::new(ev.clone()), self.long_size);
                &tmp
            }
        };
        append(out, &plan.prefix);
        self.write_probe_header(out, ev, plan, data);
        self.write_steps(out, f, plan, data);
    }

    /// The event's prefix and probe header for record `data` (see
    /// [`Plan::head`]): the text kept when its addresses are those printed
    /// last, formatted again otherwise.
    #[inline(always)]
    fn head<'p>(
        &self,
        ev: &Event,
        plan: &'p Plan,
        data: &[u8],
    ) -> std::cell::RefMut<'p, (u64, u64, Padded)> {
        let u =
            |r: Option<FastInt>| -> u64 { r.and_then(|r| r.read(data, self.endian)).unwrap_or(0) };
        let (a, b) = match ev.kind {
            _ if !plan.probe => (0, 0),
            ProbeKind::Uprobe | ProbeKind::Kprobe => (u(plan.ip), 0),
            ProbeKind::Uretprobe | ProbeKind::Kretprobe => (u(plan.ret_ip), u(plan.func)),
            ProbeKind::Eprobe | ProbeKind::Other => (0, 0),
        };
        let mut head = plan.head.borrow_mut();
        let (ha, hb, text) = &mut *head;
        if text.is_empty() || (*ha, *hb) != (a, b) {
            text.set(|text| {
                append(text, &plan.prefix);
                self.write_probe_header(text, ev, plan, data);
            });
            (*ha, *hb) = (a, b);
        }
        head
    }

    /// A probe event's header, as print_kprobe_event(),
    /// print_kretprobe_event() and print_uprobe_event() write it before
    /// the arguments; nothing for other events.
    fn write_probe_header(&self, out: &mut Vec<u8>, ev: &Event, plan: &Plan, data: &[u8]) {
        let u =
            |r: Option<FastInt>| -> u64 { r.and_then(|r| r.read(data, self.endian)).unwrap_or(0) };
        let probe = plan.probe;
        // the header, without its closing `)` (the body's first literal)
        if probe {
            match ev.kind {
                ProbeKind::Uprobe => num::hex(out, u(plan.ip)),
                ProbeKind::Uretprobe => {
                    num::hex(out, u(plan.ret_ip));
                    out.extend_from_slice(b" <- 0x");
                    num::hex(out, u(plan.func));
                }
                ProbeKind::Kprobe => {
                    out.push(b'(');
                    self.write_ip_sym(out, u(plan.ip), true);
                }
                ProbeKind::Kretprobe => {
                    out.push(b'(');
                    let ret_ip = u(plan.ret_ip);
                    let found = self.write_ip_sym(out, ret_ip, true);
                    out.extend_from_slice(b" <- ");
                    // a kernel return address always has a symbol; one
                    // without is a uretprobe's (trace-cmd files do not
                    // say which kind a probe outside the `uprobes` group
                    // is), printed as print_uprobe_event() does
                    if ret_ip != 0 && !found {
                        out.extend_from_slice(b"0x");
                        num::hex(out, u(plan.func));
                    } else {
                        self.write_ip_sym(out, u(plan.func), false);
                    }
                }
                ProbeKind::Eprobe | ProbeKind::Other => {}
            }
        }
    }

    /// The event's text after its prefix and header: the plan's literals
    /// and conversions over the record's fields.
    fn write_steps(&self, out: &mut Vec<u8>, f: &EventFormat, plan: &Plan, data: &[u8]) {
        let mut skip_quote = false;
        for step in &plan.steps {
            match step {
                Step::Lit(b) => {
                    let mut b: &[u8] = b;
                    if skip_quote {
                        skip_quote = false;
                        if let Some(rest) = b.strip_prefix(b"\"") {
                            b = rest;
                        }
                    }
                    append(out, b);
                }
                Step::Short { padded, len } => {
                    let len = usize::from(*len);
                    if skip_quote {
                        skip_quote = false;
                        if len > 0 && padded[0] == b'"' {
                            append(out, &padded[1..len]);
                            continue;
                        }
                    }
                    let at = out.len();
                    out.extend_from_slice(padded);
                    out.truncate(at + len);
                }
                Step::Int { lead, fi } => {
                    lead.write(out, skip_quote);
                    skip_quote = false;
                    match fi.read(data, self.endian) {
                        Some(v) => fi.write(out, v),
                        None => out.extend_from_slice(b"[FAILED TO PARSE]"),
                    }
                }
                &Step::Str {
                    ref lead,
                    src,
                    dims,
                    plain,
                } => {
                    lead.write(out, skip_quote);
                    skip_quote = false;
                    // what Render does for `%s` of `__get_str()`, with the
                    // fault rule below
                    match src.read(f, data, self.endian) {
                        StrValue::Ok(s) if plain => append(out, s),
                        StrValue::Ok(s) => pad_str(out, dims, s),
                        StrValue::Fault if plan.args => {
                            // a probe argument whose fetch faulted:
                            // `(fault)` without the quotes around it
                            // (trace_probe_print_args())
                            if out.last() == Some(&b'"') {
                                out.pop();
                                skip_quote = true;
                            }
                            out.extend_from_slice(b"(fault)");
                        }
                        StrValue::Fault => pad_str(out, dims, b""),
                        StrValue::Bad => out.extend_from_slice(b"[FAILED TO PARSE]"),
                    }
                }
                Step::Conv(spec, arg) => {
                    skip_quote = false;
                    if let Arg::Str { index, elem } = arg
                        && plan.args
                        && f.read_str(data, *index, elem.unwrap_or(0), self.endian)
                            == StrValue::Fault
                    {
                        // a probe argument whose fetch faulted:
                        // `(fault)` without the quotes around it
                        // (trace_probe_print_args())
                        if out.last() == Some(&b'"') {
                            out.pop();
                            skip_quote = true;
                        }
                        out.extend_from_slice(b"(fault)");
                        continue;
                    }
                    let r = Render::new(f, data, self.endian, self.long_size, self.symbols);
                    if r.write(out, spec, arg).is_err() {
                        out.extend_from_slice(b"[FAILED TO PARSE]");
                    }
                }
            }
        }
    }

    /// ftrace's own stack records, printed as kernel/trace/trace_output.c
    /// does (their `print fmt` is not what the kernel prints):
    /// `kernel_stack` (`trace_stack_print`) as `<stack trace>` and one
    /// ` => SYM` line per frame; `user_stack` (`trace_user_stack_print`,
    /// without the sym-userobj option) as `<user stack trace>` and
    /// ` =>  <%016lx>` per frame. The frames and where they stop are
    /// [`ktrace_event::Stack`]'s. Returns false for other events (or a
    /// record without a `caller` field).
    fn write_stack(&self, out: &mut Vec<u8>, f: &EventFormat, data: &[u8]) -> bool {
        let Some(stack) = ktrace_event::Stack::read(f, data, self.endian) else {
            return false;
        };
        out.extend_from_slice(if stack.user {
            b"<user stack trace>".as_slice()
        } else {
            b"<stack trace>".as_slice()
        });
        let w = stack.long_size() * 2;
        let skip = if self.hide_probe_frames && !stack.user {
            ktrace_event::probe_machinery(
                stack
                    .frames()
                    .map(|a| self.symbols.lookup(a).map(|s| s.name)),
            )
        } else {
            0
        };
        for addr in stack.frames().skip(skip) {
            out.extend_from_slice(b"\n => ");
            if stack.user {
                let _ = write!(out, " <{addr:0w$x}>");
            } else {
                self.write_ip_sym(out, addr, false);
            }
        }
        true
    }

    /// The function tracer's record, as `print_fn_trace()` in
    /// kernel/trace/trace_output.c prints it with the default options
    /// (`print-parent` on, `sym-offset` off): `func <-parent`, no event
    /// name. Returns false for other events.
    fn write_function(&self, out: &mut Vec<u8>, f: &EventFormat, data: &[u8]) -> bool {
        if f.name != "function" {
            return false;
        }
        let field = |name: &str| {
            let x = f.fields.iter().find(|x| x.name == name)?;
            let b = data.get(x.offset..x.offset + x.size)?;
            Some(match x.size {
                8 => self.endian.u64(b),
                4 => u64::from(self.endian.u32(b)),
                _ => return None,
            })
        };
        let Some(ip) = field("ip") else {
            return false;
        };
        self.write_ip_sym(out, ip, false);
        if let Some(parent) = field("parent_ip").filter(|p| *p != 0) {
            out.extend_from_slice(b" <-");
            self.write_ip_sym(out, parent, false);
        }
        true
    }

    /// A `trace_marker` line (ftrace's `print` event), as
    /// `trace_print_print()` in kernel/trace/trace_output.c prints it:
    /// `%ps: %s` of the writer's address and the text, whose newline (the
    /// kernel adds one when the writer did not) ends the line. Its `print
    /// fmt` (`"%ps: %s", (void *)REC->ip, REC->buf`) says nearly the same
    /// but leaves the newline inside. Returns false for other events.
    fn write_print(&self, out: &mut Vec<u8>, f: &EventFormat, data: &[u8]) -> bool {
        if f.name != "print" {
            return false;
        }
        let Some(ip) = f.fields.iter().find(|x| x.name == "ip") else {
            return false;
        };
        let Some(buf) = f.fields.iter().find(|x| x.name == "buf") else {
            return false;
        };
        let ip = match data.get(ip.offset..ip.offset + ip.size) {
            Some(b) if b.len() == 8 => self.endian.u64(b),
            Some(b) if b.len() == 4 => u64::from(self.endian.u32(b)),
            _ => return false,
        };
        let text = data.get(buf.offset..).unwrap_or(&[]);
        let text = &text[..text.iter().position(|&b| b == 0).unwrap_or(text.len())];
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        self.write_ip_sym(out, ip, false);
        out.extend_from_slice(b": ");
        out.extend_from_slice(text);
        true
    }

    /// `seq_print_ip_sym()`: `0` for a null address, `sym+0xoff/0xsize
    /// [mod]` (with offset) or `sym` (without); when unknown, `0x%lx` with
    /// offset (sprint_symbol()'s fallback) and `0x%08lx` without
    /// (trace_seq_print_sym()'s). A uprobe's `(0x%lx)` header read as a
    /// kprobe's (trace-cmd files do not say which) thus prints alike.
    fn write_ip_sym(&self, out: &mut Vec<u8>, addr: u64, offset: bool) -> bool {
        if addr == 0 {
            out.push(b'0');
            return false;
        }
        // the same few addresses come back event after event (a probe's
        // own address, its function): their text is kept, in a table of
        // SYM_SLOTS entries (direct-mapped; a clash formats again)
        let mut cache = self.sym_cache.borrow_mut();
        if cache.is_empty() {
            cache.resize_with(SYM_SLOTS, SymSlot::default);
        }
        let i = (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize ^ usize::from(offset);
        let slot = &mut cache[i % SYM_SLOTS];
        if slot.addr != addr || slot.offset != offset {
            slot.text.clear();
            slot.found = self.format_ip_sym(&mut slot.text, addr, offset);
            slot.addr = addr;
            slot.offset = offset;
        }
        append(out, &slot.text);
        slot.found
    }

    /// What [`TextPrinter::write_ip_sym`] prints for `addr` (not 0);
    /// whether a symbol holds it.
    fn format_ip_sym(&self, out: &mut Vec<u8>, addr: u64, offset: bool) -> bool {
        match self.symbols.lookup(addr) {
            Some(s) if offset => {
                append(out, s.name.as_bytes());
                out.extend_from_slice(b"+0x");
                num::hex(out, s.offset);
                out.extend_from_slice(b"/0x");
                num::hex(out, s.size);
                if let Some(m) = s.module {
                    out.extend_from_slice(b" [");
                    append(out, m.as_bytes());
                    out.push(b']');
                }
                true
            }
            Some(s) => {
                append(out, s.name.as_bytes());
                true
            }
            None if offset => {
                out.extend_from_slice(b"0x");
                num::hex(out, addr);
                false
            }
            None => {
                out.extend_from_slice(b"0x");
                num::hex_zero(out, addr, 8);
                false
            }
        }
    }
}

/// Where the print fmt body starts after a probe header of `n` conversions
/// (`(%lx)` or `(%lx <- %lx)`): (op index, bytes to skip in that literal).
fn body_start(ops: &[Op], n: usize) -> Option<(usize, usize)> {
    let mut convs = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Conv { .. } => convs += 1,
            Op::Lit(b) if convs == n => {
                return b.starts_with(b")").then_some((i, 1));
            }
            Op::Lit(_) => {}
        }
        if convs == n && i + 1 == ops.len() {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NoSymbols;

    /// The common fields of every event's `format` file.
    macro_rules! common_fields {
        () => {
            "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
             \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
             \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
             \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
        };
    }

    /// printf conversions against values as the kernel's vsnprintf()
    /// renders them (lib/vsprintf.c number(): `%#x` of zero is `0x0`, where
    /// C's printf and trace-cmd print `0`).
    #[test]
    fn int_conversions_follow_kernel_vsprintf() {
        let fmt = concat!(
            "name: t\nID: 9\nformat:\n",
            common_fields!(),
            "\tfield:s64 v;\toffset:8;\tsize:8;\tsigned:1;\n\n"
        );
        let cases: &[(&str, i64, &str)] = &[
            ("%d", -5, "-5"),
            ("%5d", -5, "   -5"),
            ("%-5u|", 7, "7    |"),
            ("%05x", 255, "000ff"),
            ("%#x", 255, "0xff"),
            ("%#x", 0, "0x0"),
            ("%#lx", 0, "0x0"),
            ("%#08x", 0, "0x000000"),
            ("%.0u", 0, "0"),
            ("%#o", 8, "010"),
            ("%X", 48879, "BEEF"),
            ("%hhd", 255, "-1"),
            ("%hu", 65537, "1"),
            ("%.3d", 5, "005"),
            ("%+d", 5, "+5"),
            ("%lu", -1, "18446744073709551615"),
            ("%d", 0xffff_ffff, "-1"),
            ("%u", -1, "4294967295"),
            ("%Ld", i64::MIN, "-9223372036854775808"),
            ("%c", 65, "A"),
            ("%3c|", 65, "  A|"),
            ("%pS", 0x1234, "0x1234"),
        ];
        for (conv, v, want) in cases {
            let text = format!("{fmt}print fmt: \"{conv}\", REC->v\n");
            let mut events = Events::new(8);
            events.add_with_kind("s", &text, ProbeKind::Other).unwrap();
            let mut rec = vec![9, 0, 0, 0, 1, 0, 0, 0];
            rec.extend_from_slice(&v.to_le_bytes());
            let p = TextPrinter::new(
                &events,
                Endian::Little,
                FlagStyle::Lazy,
                &NoSymbols,
                Comms::new(),
            );
            let mut out = Vec::new();
            p.write_event(&mut out, events.get(9).unwrap(), &rec);
            assert_eq!(
                String::from_utf8_lossy(&out),
                format!("t: {want}"),
                "{conv} {v}"
            );
        }
    }

    /// Issue 14 #3: eprobes print `name: (system.event)` and their
    /// arguments (print_eprobe_event() in kernel/trace/trace_eprobe.c),
    /// whether the print fmt has no header (6.2 and later, and 6.1 stable)
    /// or the older `(%u)` over `__probe_type`; `%s` of a char array is the
    /// string up to its NUL.
    #[test]
    fn eprobe_header_names_the_probed_event() {
        let head = concat!("name: e1\nID: 9\nformat:\n", common_fields!());
        let cases = [
            (
                "\tfield:u32 prev;\toffset:8;\tsize:4;\tsigned:0;\n\n\
                 print fmt: \" prev=%u\", REC->prev\n",
                "e1: (sched.sched_switch) prev=640",
            ),
            (
                "\tfield:unsigned int __probe_type;\toffset:8;\tsize:4;\tsigned:0;\n\
                 \tfield:u32 prev;\toffset:12;\tsize:4;\tsigned:0;\n\n\
                 print fmt: \"(%u) prev=%u\", REC->__probe_type, REC->prev\n",
                "e1: (sched.sched_switch) prev=640",
            ),
            ("\n\nprint fmt: \"\"\n", "e1: (sched.sched_switch)"),
            (
                "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\n\
                 print fmt: \" comm=%s\", REC->comm\n",
                "e1: (sched.sched_switch) comm=kfix",
            ),
        ];
        for (rest, want) in cases {
            let mut events = Events::new(8);
            let text = format!("{head}{rest}");
            events
                .add_eprobe("g", &text, "sched.sched_switch")
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            let mut rec = vec![9, 0, 0, 0, 1, 0, 0, 0];
            if rest.contains("__probe_type") {
                rec.extend_from_slice(&311u32.to_le_bytes());
            }
            if rest.contains("comm") {
                rec.extend_from_slice(b"kfix\0\0\0\0\0\0\0\0\0\0\0\0");
            } else {
                rec.extend_from_slice(&640u32.to_le_bytes());
            }
            let p = TextPrinter::new(
                &events,
                Endian::Little,
                FlagStyle::Lazy,
                &NoSymbols,
                Comms::new(),
            );
            let mut out = Vec::new();
            p.write_event(&mut out, events.get(9).unwrap(), &rec);
            assert_eq!(String::from_utf8_lossy(&out), want, "{rest}");
        }
    }

    /// ftrace's `function` event (format read from this host's
    /// events/ftrace/function/format, 6.18).
    const FUNCTION: &str = "name: function\nID: 1\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long parent_ip;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long args[];\toffset:24;\tsize:0;\tsigned:0;\n\n\
print fmt: \" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip\n";

    /// The function tracer's record as the kernel's `trace` prints it
    /// (format read from this host's events/ftrace/function/format, 6.18).
    #[test]
    fn function_records_print_like_print_fn_trace() {
        let mut events = Events::new(8);
        events
            .add_with_kind("ftrace", FUNCTION, ProbeKind::Other)
            .unwrap();
        let syms = crate::TableSymbols::new(vec![
            (0xffff_0000_1000, 0x100, "ksys_sync".to_string(), None),
            (
                0xffff_0000_2000,
                0x80,
                "romfs_fill_super".to_string(),
                Some("romfs".to_string()),
            ),
        ]);
        let p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &syms,
            Comms::new(),
        );
        let rec = |ip: u64, parent: u64| {
            let mut r = vec![1, 0, 0, 0, 1, 0, 0, 0];
            r.extend_from_slice(&ip.to_le_bytes());
            r.extend_from_slice(&parent.to_le_bytes());
            r
        };
        let cases = [
            // no offset, no module: kallsyms_lookup's name alone
            (
                rec(0xffff_0000_1004, 0xffff_0000_2010),
                "ksys_sync <-romfs_fill_super",
            ),
            // an unknown parent in hex; no parent: no arrow
            (rec(0xffff_0000_1004, 0xdead_beef), "ksys_sync <-0xdeadbeef"),
            (rec(0xffff_0000_1004, 0), "ksys_sync"),
        ];
        for (r, want) in cases {
            let mut out = Vec::new();
            p.write_event(&mut out, events.get(1).unwrap(), &r);
            assert_eq!(String::from_utf8_lossy(&out), want);
        }
    }

    /// The symbol texts kept between events (`write_ip_sym`'s cache):
    /// a printer that has printed thousands of records over more
    /// addresses than the cache has entries prints each as a new printer
    /// does, for kretprobe headers (`sym+0xoff/0xsize [mod]`, a return
    /// address without a symbol) and function records (names alone).
    #[test]
    fn cached_symbol_texts_print_as_fresh_lookups() {
        const KRET: &str = "name: myret\nID: 2\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;\n\n\
print fmt: \"(%lx <- %lx)\", REC->__probe_func, REC->__probe_ret_ip\n";
        let mut events = Events::new(8);
        events
            .add_with_kind("ftrace", FUNCTION, ProbeKind::Other)
            .unwrap();
        events
            .add_with_kind("kprobes", KRET, ProbeKind::Kretprobe)
            .unwrap();
        // 600 functions of 0x100 bytes from 0xffff_0000_0000_0000, every
        // seventh in a module; addresses past them have no symbol
        let base = 0xffff_0000_0000_0000u64;
        let syms = crate::TableSymbols::new(
            (0..600u64)
                .map(|i| {
                    (
                        base + i * 0x100,
                        0x100,
                        format!("func_{i}"),
                        (i % 7 == 0).then(|| format!("mod{}", i % 3)),
                    )
                })
                .collect(),
        );
        let new = || {
            TextPrinter::new(
                &events,
                Endian::Little,
                FlagStyle::Lazy,
                &syms,
                Comms::new(),
            )
        };
        let kept = new();
        // a kernel return address, and a user one (a uretprobe's, whose
        // function prints as the number print_uprobe_event() prints)
        for (ret, func, want) in [
            (
                base + 64 * 0x100 + 8,
                base + 36 * 0x100,
                "myret: (func_64+0x8/0x100 <- func_36)",
            ),
            (
                base + 63 * 0x100 + 8,
                base + 35 * 0x100,
                "myret: (func_63+0x8/0x100 [mod0] <- func_35)",
            ),
            (
                0x401136,
                base + 0x4010,
                "myret: (0x401136 <- 0xffff000000004010)",
            ),
        ] {
            let mut r = vec![2, 0, 0, 0, 1, 0, 0, 0];
            r.extend_from_slice(&func.to_le_bytes());
            r.extend_from_slice(&ret.to_le_bytes());
            let mut got = Vec::new();
            kept.write_event(&mut got, events.get(2).unwrap(), &r);
            assert_eq!(String::from_utf8_lossy(&got), want);
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut addr = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // mostly a few hot addresses, the rest anywhere (or nowhere)
            match x % 4 {
                0 => base + 0x4010,
                1 => base + (x >> 8) % (700 * 0x100),
                2 => base + (x >> 8) % 40 * 0x100 + 8,
                _ => (x >> 8) % 0x1_0000_0000,
            }
        };
        for n in 0..20_000 {
            let id = 1 + n % 2;
            let mut r = vec![id as u8, 0, 0, 0, 1, 0, 0, 0];
            r.extend_from_slice(&addr().to_le_bytes());
            r.extend_from_slice(&addr().to_le_bytes());
            let (mut got, mut want) = (Vec::new(), Vec::new());
            kept.write_event(&mut got, events.get(id as u16).unwrap(), &r);
            new().write_event(&mut want, events.get(id as u16).unwrap(), &r);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "record {n}"
            );
        }
    }

    /// Issue 20: a `trace_marker` line (ftrace's `print` event, the
    /// format captured on the 6.18 host: `cat
    /// /sys/kernel/tracing/events/ftrace/print/format`) prints as
    /// trace_print_print() does: `tracing_mark_write: TEXT`, the writer's
    /// symbol without offset and the text without the newline the kernel
    /// keeps in it (the line's own); the print fmt alone gave
    /// `print: tracing_mark_write: TEXT\n`.
    #[test]
    fn trace_marker_line_prints_as_the_kernel() {
        const PRINT: &str = "name: print\nID: 5\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n\n\
print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n";
        let mut events = Events::new(8);
        events
            .add_with_kind("ftrace", PRINT, ProbeKind::Other)
            .unwrap();
        let syms = crate::TableSymbols::new(vec![(
            0xffff_0000_1000,
            0x200,
            "tracing_mark_write".to_string(),
            None,
        )]);
        let p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &syms,
            Comms::new(),
        );
        let rec = |text: &[u8]| {
            let mut r = vec![5, 0, 0, 0, 1, 0, 0, 0];
            r.extend_from_slice(&0xffff_0000_1088u64.to_le_bytes());
            r.extend_from_slice(text);
            r
        };
        let cases: [(&[u8], &str); 4] = [
            (
                b"ktrace persistent test: before reset 1\n\0\0\0",
                "tracing_mark_write: ktrace persistent test: before reset 1",
            ),
            // padding after the NUL is not text; one newline is the line's
            (b"a\n\0zz\0", "tracing_mark_write: a"),
            (b"two\n\n\0", "tracing_mark_write: two\n"),
            // a record cut short: what is there
            (b"cut", "tracing_mark_write: cut"),
        ];
        for (text, want) in cases {
            let mut out = Vec::new();
            p.write_event(&mut out, events.get(5).unwrap(), &rec(text));
            assert_eq!(String::from_utf8_lossy(&out), want);
        }
    }

    /// ftrace's own events captured on the 6.18 host
    /// (`cat /sys/kernel/tracing/events/ftrace/{kernel,user}_stack/format`).
    #[test]
    fn stack_records_print_like_trace_output_c() {
        const KERNEL_STACK: &str = "name: kernel_stack\nID: 4\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n\n\
print fmt: \"\\t=> %ps\\n\\t=> %ps\\n\", (void *)REC->caller[0], (void *)REC->caller[1]\n";
        const USER_STACK: &str = "name: user_stack\nID: 13\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned int tgid;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n\n\
print fmt: \"\\t=> %ps\\n\", (void *)REC->caller[0]\n";
        let mut events = Events::new(8);
        events
            .add_with_kind("ftrace", KERNEL_STACK, ProbeKind::Other)
            .unwrap();
        events
            .add_with_kind("ftrace", USER_STACK, ProbeKind::Other)
            .unwrap();
        let syms = crate::TableSymbols::new(vec![
            (0xffff_0000_1000, 0x100, "do_sys_openat2".to_string(), None),
            (0xffff_0000_2000, 0x80, "__x64_sys_openat".to_string(), None),
        ]);
        let p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &syms,
            Comms::new(),
        );
        let rec = |id: u8, words: &[u64]| {
            let mut r = vec![
                id,
                0,
                0,
                0,
                1,
                0,
                0,
                0,
                words.len() as u8,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ];
            for w in words {
                r.extend_from_slice(&w.to_le_bytes());
            }
            r
        };
        let mut out = Vec::new();
        // Dynamic size: three frames, the record ends after them; the third
        // is unknown to the symbol table.
        let k = rec(4, &[0xffff_0000_1010, 0xffff_0000_2040, 0xdead_beef]);
        p.write_event(&mut out, events.get(4).unwrap(), &k);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "<stack trace>\n => do_sys_openat2\n => __x64_sys_openat\n => 0xdeadbeef"
        );
        out.clear();
        let k = rec(4, &[0xffff_0000_1010, u64::MAX, 0xffff_0000_2040]);
        p.write_event(&mut out, events.get(4).unwrap(), &k);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "<stack trace>\n => do_sys_openat2"
        );
        out.clear();
        let u = rec(13, &[0x7f12_3456_789a, 0x5555_5555_1234, 0, 0, 0, 0, 0, 0]);
        p.write_event(&mut out, events.get(13).unwrap(), &u);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "<user stack trace>\n =>  <00007f123456789a>\n =>  <0000555555551234>"
        );
    }

    /// The task column is cached per pid: a name learnt or changed between
    /// records shows on the next line, an unknown pid stays `<...>`, and
    /// the flags and CPU columns follow every record.
    #[test]
    fn context_columns_follow_comms_and_record_changes() {
        let fmt = concat!(
            "name: t\nID: 9\nformat:\n",
            common_fields!(),
            "\tfield:u32 v;\toffset:8;\tsize:4;\tsigned:0;\n\n",
            "print fmt: \"v=%u\", REC->v\n"
        );
        let mut events = Events::new(8);
        events.add_with_kind("s", fmt, ProbeKind::Other).unwrap();
        let rec = |flags: u8, pid: i32, v: u32| {
            let mut r = vec![9, 0, flags, 0];
            r.extend_from_slice(&pid.to_le_bytes());
            r.extend_from_slice(&v.to_le_bytes());
            r
        };
        let mut p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &NoSymbols,
            Comms::from_saved_cmdlines("7 first\n"),
        );
        let mut out = Vec::new();
        p.write_record(&mut out, 0, 1_000, &rec(0, 7, 1));
        p.write_record(&mut out, 0, 2_000, &rec(1, 7, 2));
        p.write_record(&mut out, 1, 3_000, &rec(1, 7, 3));
        p.comms.insert(7, "renamed");
        p.write_record(&mut out, 1, 4_000, &rec(1, 7, 4));
        p.write_record(&mut out, 1, 5_000, &rec(1, 8, 5));
        p.comms.insert(8, "second");
        p.write_record(&mut out, 1, 6_000, &rec(1, 8, 6));
        p.comms = Comms::from_saved_cmdlines("8 swapped\n");
        p.write_record(&mut out, 1, 7_000, &rec(1, 8, 7));
        p.irq_info = false;
        p.write_record(&mut out, 1, 8_000, &rec(1, 8, 8));
        p.write_record(&mut out, 1, 9_000, &rec(1, 8, 9)[..10]);
        let want = [
            "           first-7       [000] .....     0.000001: t: v=1",
            "           first-7       [000] d....     0.000002: t: v=2",
            "           first-7       [001] d....     0.000003: t: v=3",
            "         renamed-7       [001] d....     0.000004: t: v=4",
            "           <...>-8       [001] d....     0.000005: t: v=5",
            "          second-8       [001] d....     0.000006: t: v=6",
            "         swapped-8       [001] d....     0.000007: t: v=7",
            "         swapped-8       [001]      0.000008: t: v=8",
            "         swapped-8       [001]      0.000009: t: v=[FAILED TO PARSE]",
        ];
        assert_eq!(String::from_utf8(out).unwrap(), want.join("\n") + "\n");
        // the cached whole seconds follow the time stamp, rounding included
        for ts in [
            1_999_999_499u64,
            1_999_999_500,
            2_000_000_000,
            1_000,
            99_999_999_999_999,
            123_456_789_999_999_999,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            p.write_record(&mut out, 1, ts, &rec(1, 8, 1));
            let mut want = b"         swapped-8       [001] ".to_vec();
            crate::write_timestamp(&mut want, ts);
            want.extend_from_slice(b": t: v=1\n");
            assert_eq!(String::from_utf8(out), String::from_utf8(want), "{ts}");
        }
        // counting clocks: the raw stamp, ` %12llu`, also after ns ones
        p.time_in_ns = false;
        let mut out = Vec::new();
        for ts in [57, 1_999_999_500, 1_000_000_000_000] {
            p.write_record(&mut out, 1, ts, &rec(1, 8, 1));
        }
        p.time_in_ns = true;
        p.write_record(&mut out, 1, 1_999_999_500, &rec(1, 8, 1));
        // (irq-info is off here: `[001] ` and then the time's own space)
        let want = [
            "         swapped-8       [001]            57: t: v=1",
            "         swapped-8       [001]    1999999500: t: v=1",
            "         swapped-8       [001]  1000000000000: t: v=1",
            "         swapped-8       [001]      2.000000: t: v=1",
        ];
        assert_eq!(String::from_utf8(out).unwrap(), want.join("\n") + "\n");
        assert!(clock_in_ns("local") && clock_in_ns("mono_raw") && clock_in_ns("boot"));
        assert!(!clock_in_ns("counter") && !clock_in_ns("uptime") && !clock_in_ns("x86-tsc"));
    }

    /// A user probe's header is kept from record to record (the
    /// addresses rarely change): records whose addresses change, come
    /// back and repeat, interleaved over a uprobe and a uretprobe, print
    /// the addresses of their own record.
    #[test]
    fn kept_user_probe_headers_follow_the_addresses() {
        let up = concat!(
            "name: u\nID: 9\nformat:\n",
            common_fields!(),
            "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n",
            "\tfield:u32 a;\toffset:16;\tsize:4;\tsigned:0;\n\n",
            "print fmt: \"(0x%lx) a=%u\", REC->__probe_ip, REC->a\n"
        );
        let ret = concat!(
            "name: r\nID: 10\nformat:\n",
            common_fields!(),
            "\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;\n",
            "\tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;\n",
            "\tfield:u32 a;\toffset:24;\tsize:4;\tsigned:0;\n\n",
            "print fmt: \"(0x%lx <- 0x%lx) a=%u\", REC->__probe_ret_ip, REC->__probe_func, REC->a\n"
        );
        let mut events = Events::new(8);
        events
            .add_with_kind("uprobes", up, ProbeKind::Uprobe)
            .unwrap();
        events
            .add_with_kind("uprobes", ret, ProbeKind::Uretprobe)
            .unwrap();
        let p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &NoSymbols,
            Comms::new(),
        );
        let (mut x, mut out, mut want) = (7u64, Vec::new(), String::new());
        for i in 0..400u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // few distinct addresses, so that they repeat and come back
            let (a, b) = (0x401000 + (x & 3), 0x7f00_0000_0000 + (x >> 8 & 1) * 0x10);
            let mut rec = Vec::new();
            if x & 16 == 0 {
                rec.extend_from_slice(&[9, 0, 0, 0, 1, 0, 0, 0]);
                rec.extend_from_slice(&a.to_le_bytes());
                rec.extend_from_slice(&i.to_le_bytes());
                want += &format!("u: (0x{a:x}) a={i}");
            } else {
                rec.extend_from_slice(&[10, 0, 0, 0, 1, 0, 0, 0]);
                rec.extend_from_slice(&b.to_le_bytes());
                rec.extend_from_slice(&a.to_le_bytes());
                rec.extend_from_slice(&i.to_le_bytes());
                want += &format!("r: (0x{a:x} <- 0x{b:x}) a={i}");
            }
            let id = rec[0].into();
            p.write_event(&mut out, events.get(id).unwrap(), &rec);
        }
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    /// The fast path of whole lines (`write_fast_line`) against the
    /// general one (`write_event`, which never takes it): random records
    /// of a uprobe whose steps all have a fast form (integers of every
    /// size, sign and conversion, strings, short and long literals), with
    /// strings that faulted or point outside the record and records cut
    /// short (which the fast path hands back), print the same event text
    /// after the same time stamp.
    #[test]
    fn fast_lines_print_as_the_general_path() {
        let fmt = concat!(
            "name: f\nID: 9\nformat:\n",
            common_fields!(),
            "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n",
            "\tfield:u8 a;\toffset:16;\tsize:1;\tsigned:0;\n",
            "\tfield:s16 b;\toffset:18;\tsize:2;\tsigned:1;\n",
            "\tfield:u32 c;\toffset:20;\tsize:4;\tsigned:0;\n",
            "\tfield:s64 d;\toffset:24;\tsize:8;\tsigned:1;\n",
            "\tfield:__data_loc char[] s;\toffset:32;\tsize:4;\tsigned:1;\n",
            "\tfield:__data_loc char[] t;\toffset:36;\tsize:4;\tsigned:1;\n\n",
            "print fmt: \"(0x%lx) a=%u b=%d c=0x%x d=%lld s=\\\"%s\\\" ",
            "and a literal longer than sixteen t=%s e=%#lx E=%X h=%hd\", ",
            "REC->__probe_ip, REC->a, REC->b, REC->c, REC->d, __get_str(s), __get_str(t), ",
            "REC->d, REC->c, REC->c\n"
        );
        let mut events = Events::new(8);
        events.add_with_kind("u", fmt, ProbeKind::Uprobe).unwrap();
        let mut p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &NoSymbols,
            Comms::new(),
        );
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut fast_seen = 0;
        for i in 0..5000u64 {
            let mut rec = vec![9, 0, 0, 0];
            rec.extend_from_slice(&((next() % 4) as i32 + 1).to_le_bytes());
            rec.extend_from_slice(&(0x401000 + next() % 3).to_le_bytes());
            let v = next();
            rec.push(v as u8);
            rec.push(0);
            rec.extend_from_slice(&((v >> 8) as i16).to_le_bytes());
            rec.extend_from_slice(&((v >> 16) as u32 >> (v % 32)).to_le_bytes());
            rec.extend_from_slice(&((next() as i64) >> (v % 64)).to_le_bytes());
            let strs: Vec<Vec<u8>> = (0..2)
                .map(|_| {
                    let n = (next() % 40) as usize;
                    (0..n).map(|_| b' ' + (next() % 90) as u8).collect()
                })
                .collect();
            let mut off = 40u32;
            let mut tail = Vec::new();
            for s in &strs {
                let mut len = s.len() as u32 + 1;
                let mut at = off;
                match next() % 16 {
                    0 => len = 0,
                    1 => at += 500,
                    _ => {}
                }
                rec.extend_from_slice(&(at | len << 16).to_le_bytes());
                tail.extend_from_slice(s);
                tail.push(0);
                off += s.len() as u32 + 1;
            }
            rec.extend_from_slice(&tail);
            if next() % 20 == 0 {
                rec.truncate((next() % rec.len() as u64) as usize);
            }
            let ts = i * 1_234_567_891 + next() % 1000;
            let mut line = Vec::new();
            p.write_record(&mut line, (i % 3) as usize, ts, &rec);
            let line = String::from_utf8(line).unwrap();
            if rec.len() < 8 {
                continue;
            }
            let mut event = Vec::new();
            p.write_event(&mut event, events.get(9).unwrap(), &rec);
            let event = String::from_utf8(event).unwrap();
            let us = (ts + 500) / 1000;
            let time = format!(" {:5}.{:06}: ", us / 1_000_000, us % 1_000_000);
            let want_end = format!("{time}{event}\n");
            assert!(line.ends_with(&want_end), "{line:?}\n{want_end:?}");
            fast_seen += usize::from(!event.contains("fault") && !event.contains("FAILED"));
        }
        // most records are whole: the fast path printed them
        assert!(fast_seen > 3000, "{fast_seen}");
    }

    /// Literals of up to 16 bytes are printed from a padded copy
    /// (`Step::Short`): a faulted string argument still drops the quotes
    /// around its `(fault)`, the closing one being the next literal's
    /// first byte, and the other literals print whole.
    #[test]
    fn short_literals_around_a_faulted_string() {
        let fmt = concat!(
            "name: hit\nID: 9\nformat:\n",
            common_fields!(),
            "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n",
            "\tfield:__data_loc char[] s;\toffset:16;\tsize:4;\tsigned:1;\n",
            "\tfield:__data_loc char[] t;\toffset:20;\tsize:4;\tsigned:1;\n\n",
            "print fmt: \"(0x%lx) s=\\\"%s\\\" t=\\\"%s\\\" and a longer literal\", ",
            "REC->__probe_ip, __get_str(s), __get_str(t)\n"
        );
        let mut events = Events::new(8);
        events.add_with_kind("u", fmt, ProbeKind::Uprobe).unwrap();
        let mut rec = vec![9, 0, 0, 0, 1, 0, 0, 0];
        rec.extend_from_slice(&0x401136u64.to_le_bytes());
        // s: faulted (length 0); t: "ok" at offset 24
        rec.extend_from_slice(&0u32.to_le_bytes());
        rec.extend_from_slice(&(24u32 | 3 << 16).to_le_bytes());
        rec.extend_from_slice(b"ok\0");
        let p = TextPrinter::new(
            &events,
            Endian::Little,
            FlagStyle::Lazy,
            &NoSymbols,
            Comms::new(),
        );
        let mut out = Vec::new();
        p.write_event(&mut out, events.get(9).unwrap(), &rec);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "hit: (0x401136) s=(fault) t=\"ok\" and a longer literal"
        );
    }
}
