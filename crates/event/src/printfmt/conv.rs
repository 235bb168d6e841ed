//! One `printf` conversion rendered as the kernel's `vsnprintf()` renders
//! it (lib/vsprintf.c), which is what the `trace` file shows.
//!
//! Numbers follow `number()`: `%#x` of zero is `0x0`, a precision pads
//! with zeros and never hides a zero, `-` wins over `0`. Strings follow
//! `string()`: a null pointer is `(null)`, a pointer below the first page
//! or an error value `(efault)`, both cut by the precision. Pointers follow
//! `pointer()`: `%pS`/`%ps`/`%pB` through kallsyms (a [`Symbolizer`]),
//! `%pI4`/`%pI6`/`%pI6c`/`%pIS[pfsc]`/`%pi..`, `%pM`/`%pm`, `%pU`, `%ph`,
//! `%pb`/`%pbl` from the bytes a pointer into the record shows, and plain
//! `%p`, `%px`, `%pK` as the address in hex (`pointer_string()`: what the
//! kernel prints with the `hash-ptr` option off; with it on the kernel
//! prints a keyed hash no reader can reproduce). Extensions that need
//! kernel memory (`%pd`, `%pD`, `%pg`, `%pG`, `%pa`, ...) are errors.

use super::ctype::IntTy;
use super::eval::{Val, bitmap_list, bitmap_string};
use super::{Conv, Length, Spec};
use crate::append::{append, fill};
use ktrace_ring::Endian;

/// A kernel symbol covering an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// Symbol name.
    pub name: &'a str,
    /// Address minus the symbol's start.
    pub offset: u64,
    /// Symbol size (distance to the next symbol, as kallsyms computes it).
    pub size: u64,
    /// Module name for module symbols.
    pub module: Option<&'a str>,
}

/// Address → symbol lookups (implemented from /proc/kallsyms elsewhere),
/// and the kernel strings a reader knows.
pub trait Symbolizer {
    /// The symbol containing `addr`, if any.
    fn lookup(&self, addr: u64) -> Option<Symbol<'_>>;

    /// The kernel string at `addr` (without its NUL), when known: the
    /// `tracepoint_string()`s and `trace_printk()` formats the kernel lists
    /// in tracefs `printk_formats` (see [`KernelStrings`]). `%s` of a
    /// kernel pointer prints it.
    fn string(&self, _addr: u64) -> Option<&[u8]> {
        None
    }
}

/// The kernel's `printk_formats` (kernel/trace/trace_printk.c `t_show()`):
/// `0xADDR : "text"` lines, the text escaped with `\n`, `\t` and `\"`.
#[derive(Debug, Clone, Default)]
pub struct KernelStrings {
    by_addr: Vec<(u64, Vec<u8>)>,
}

impl KernelStrings {
    /// Parses the file's text; lines it does not understand are skipped.
    pub fn parse(text: &[u8]) -> KernelStrings {
        let mut by_addr = Vec::new();
        for line in text.split(|&c| c == b'\n') {
            let Some(sep) = line.windows(4).position(|w| w == b" : \"") else {
                continue;
            };
            let addr = std::str::from_utf8(&line[..sep])
                .ok()
                .and_then(|a| u64::from_str_radix(a.trim().trim_start_matches("0x"), 16).ok());
            let (Some(addr), Some(body)) = (addr, line[sep + 4..].strip_suffix(b"\"")) else {
                continue;
            };
            let mut s = Vec::with_capacity(body.len());
            let mut i = 0;
            while i < body.len() {
                match (body[i], body.get(i + 1)) {
                    (b'\\', Some(b'n')) => s.push(b'\n'),
                    (b'\\', Some(b't')) => s.push(b'\t'),
                    (b'\\', Some(b'"')) => s.push(b'"'),
                    (c, _) => {
                        s.push(c);
                        i += 1;
                        continue;
                    }
                }
                i += 2;
            }
            by_addr.push((addr, s));
        }
        by_addr.sort_by_key(|e| e.0);
        KernelStrings { by_addr }
    }

    /// The string at exactly `addr`.
    pub fn get(&self, addr: u64) -> Option<&[u8]> {
        let i = self.by_addr.binary_search_by_key(&addr, |e| e.0).ok()?;
        Some(&self.by_addr[i].1)
    }

    /// How many strings there are.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }
}

/// Where the kernel's text goes, and what it needs besides the value.
pub struct Target<'a> {
    /// The output.
    pub out: &'a mut Vec<u8>,
    /// The kernel's `sizeof(long)`.
    pub long_size: usize,
    /// The kernel's byte order.
    pub endian: Endian,
    /// Kernel symbols.
    pub symbols: &'a dyn Symbolizer,
}

/// Width and precision of a conversion after `*` arguments were taken:
/// `None` when not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    /// Field width; a negative `*` width has become `left`.
    pub width: Option<usize>,
    /// Precision.
    pub precision: Option<usize>,
    /// Left-justify (`-`, or a negative `*` width).
    pub left: bool,
}

impl Dims {
    /// The spec's own width and precision.
    pub fn of(spec: &Spec) -> Dims {
        Dims {
            width: spec.width,
            precision: spec.precision,
            left: spec.left,
        }
    }
}

/// Bits of the integer a conversion reads from its argument.
pub fn length_bits(spec: &Spec, long_size: usize) -> u32 {
    match spec.length {
        _ if matches!(spec.conv, Conv::Pointer(_)) => 8 * long_size as u32,
        Length::Char => 8,
        Length::Short => 16,
        Length::Int => 32,
        Length::Long | Length::Size => 8 * long_size as u32,
        Length::LongLong => 64,
    }
}

/// Writes `val` converted by `spec`.
pub fn write(t: &mut Target<'_>, spec: &Spec, dims: Dims, val: &Val<'_>) -> Result<(), String> {
    match (&spec.conv, val) {
        (Conv::Str, Val::Ptr(b, _)) => {
            let s = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
            pad_str(t.out, dims, s);
            Ok(())
        }
        (Conv::Str, Val::Int(v, _)) => {
            let p = IntTy::ulong(t.long_size).norm(*v);
            let msg: &[u8] = if p == 0 {
                b"(null)"
            } else if p < 4096 || p >= IntTy::ulong(t.long_size).norm(-4095i64 as u64) {
                b"(efault)"
            } else if let Some(s) = t.symbols.string(p) {
                pad_str(t.out, dims, s);
                return Ok(());
            } else {
                return Err("%s of a kernel pointer".into());
            };
            // error_string(): cut at twice a pointer's size without a precision
            let d = Dims {
                precision: dims.precision.or(Some(2 * t.long_size)),
                ..dims
            };
            pad_str(t.out, d, msg);
            Ok(())
        }
        (Conv::Pointer(ext), v) => pointer(t, spec, dims, ext, v),
        (_, Val::Int(v, _)) => {
            write_int(t.out, spec, dims, *v, t.long_size);
            Ok(())
        }
        (_, Val::Ptr(..)) => Err("the address of record data is not known".into()),
    }
}

/// An integer conversion (`%d %u %x %X %o %c`) of the bits `v`, read as
/// the length modifier says.
pub fn write_int(out: &mut Vec<u8>, spec: &Spec, dims: Dims, v: u64, long_size: usize) {
    let bits = length_bits(spec, long_size);
    let (base, signed, upper) = match spec.conv {
        Conv::Signed => (10, true, false),
        Conv::Unsigned => (10, false, false),
        Conv::Hex { upper } => (16, false, upper),
        Conv::Octal => (8, false, false),
        Conv::Char => {
            let c = [v as u8];
            pad_str(
                out,
                Dims {
                    precision: None,
                    ..dims
                },
                &c,
            );
            return;
        }
        // not integer conversions
        Conv::Str | Conv::Pointer(_) => (16, false, false),
    };
    let v = IntTy::new(bits, signed).norm(v);
    number(
        out,
        v,
        Num {
            base,
            signed,
            upper,
            left: dims.left,
            zero: spec.zero,
            plus: spec.plus,
            space: spec.space,
            special: spec.alt,
            width: dims.width,
            precision: dims.precision,
        },
    );
}

/// The `printf_spec` of `number()`.
#[derive(Debug, Clone, Copy)]
pub struct Num {
    /// 8, 10 or 16.
    pub base: u32,
    /// A signed conversion (`SIGN`).
    pub signed: bool,
    /// Upper-case hex digits.
    pub upper: bool,
    /// `LEFT`.
    pub left: bool,
    /// `ZEROPAD`.
    pub zero: bool,
    /// `PLUS`.
    pub plus: bool,
    /// `SPACE`.
    pub space: bool,
    /// `SPECIAL` (`#`).
    pub special: bool,
    /// Field width.
    pub width: Option<usize>,
    /// Precision.
    pub precision: Option<usize>,
}

/// `number()` of lib/vsprintf.c.
pub fn number(out: &mut Vec<u8>, num: u64, s: Num) {
    let zero = s.zero && !s.left;
    let mut width = s.width.map_or(-1i64, |w| w as i64);
    let mut num = num;
    let mut sign = None;
    if s.signed {
        if (num as i64) < 0 {
            sign = Some(b'-');
            num = (num as i64).unsigned_abs();
            width -= 1;
        } else if s.plus {
            sign = Some(b'+');
            width -= 1;
        } else if s.space {
            sign = Some(b' ');
            width -= 1;
        }
    }
    let need_pfx = s.special && s.base != 10;
    if need_pfx {
        if s.base == 16 {
            width -= 2;
        } else if num != 0 {
            width -= 1;
        }
    }
    let mut tmp = [0u8; 24];
    let mut i = 0;
    let digits: &[u8; 16] = if s.upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    loop {
        tmp[i] = digits[(num % u64::from(s.base)) as usize];
        i += 1;
        num /= u64::from(s.base);
        if num == 0 {
            break;
        }
    }
    let mut precision = s.precision.map_or(-1i64, |p| p as i64);
    if i as i64 > precision {
        precision = i as i64;
    }
    width -= precision;
    if !zero && !s.left {
        while width > 0 {
            out.push(b' ');
            width -= 1;
        }
    }
    if let Some(c) = sign {
        out.push(c);
    }
    if need_pfx {
        if s.base == 16 || tmp[..i] != [b'0'] {
            out.push(b'0');
        }
        if s.base == 16 {
            out.push(if s.upper { b'X' } else { b'x' });
        }
    }
    if !s.left {
        let c = if zero { b'0' } else { b' ' };
        while width > 0 {
            out.push(c);
            width -= 1;
        }
    }
    while (i as i64) < precision {
        out.push(b'0');
        precision -= 1;
    }
    while i > 0 {
        i -= 1;
        out.push(tmp[i]);
    }
    while width > 0 {
        out.push(b' ');
        width -= 1;
    }
}

/// `string()`/`widen_string()`: at most `precision` bytes, padded to the
/// width.
#[inline]
pub fn pad_str(out: &mut Vec<u8>, d: Dims, s: &[u8]) {
    let s = match d.precision {
        Some(p) if p < s.len() => &s[..p],
        _ => s,
    };
    let pad = d.width.unwrap_or(0).saturating_sub(s.len());
    if !d.left && pad > 0 {
        fill(out, b' ', pad);
    }
    append(out, s);
    if d.left && pad > 0 {
        fill(out, b' ', pad);
    }
}

/// `sprint_symbol()` (`with_offset`: `name+0xoff/0xsize [mod]`) or
/// `sprint_symbol_no_offset()` (`name [mod]`... without offset the kernel
/// prints the module too); `0x%lx` when unknown. Returns false when the
/// address is unknown.
pub fn write_symbol(out: &mut Vec<u8>, symbols: &dyn Symbolizer, addr: u64, with_offset: bool) {
    match symbols.lookup(addr) {
        Some(s) => {
            out.extend_from_slice(s.name.as_bytes());
            if with_offset {
                out.extend_from_slice(format!("+0x{:x}/0x{:x}", s.offset, s.size).as_bytes());
            }
            if let Some(m) = s.module {
                out.extend_from_slice(format!(" [{m}]").as_bytes());
            }
        }
        None => out.extend_from_slice(format!("0x{addr:x}").as_bytes()),
    }
}

/// `pointer()`.
fn pointer(
    t: &mut Target<'_>,
    spec: &Spec,
    dims: Dims,
    ext: &str,
    v: &Val<'_>,
) -> Result<(), String> {
    let e = ext.as_bytes();
    let first = e.first().copied().unwrap_or(0);
    let mut s = Vec::new();
    match (first, v) {
        (b'S' | b's' | b'F' | b'f', Val::Int(a, _)) => {
            let a = IntTy::ulong(t.long_size).norm(*a);
            write_symbol(&mut s, t.symbols, a, matches!(first, b'S' | b'F'));
        }
        (b'B', Val::Int(a, _)) => {
            // sprint_backtrace(): the symbol of the call, addr - 1
            let a = IntTy::ulong(t.long_size).norm(*a);
            match t.symbols.lookup(a.wrapping_sub(1)) {
                Some(sym) => {
                    s.extend_from_slice(
                        format!("{}+0x{:x}/0x{:x}", sym.name, sym.offset + 1, sym.size).as_bytes(),
                    );
                    if let Some(m) = sym.module {
                        s.extend_from_slice(format!(" [{m}]").as_bytes());
                    }
                }
                None => s.extend_from_slice(format!("0x{a:x}").as_bytes()),
            }
        }
        // `%p` (with hash-ptr off), `%px`, `%pK` (read by root)
        (0 | b'x' | b'K', Val::Int(a, _)) => {
            let a = IntTy::ulong(t.long_size).norm(*a);
            let mut n = Num {
                base: 16,
                signed: false,
                upper: false,
                left: dims.left,
                zero: spec.zero,
                plus: false,
                space: false,
                special: spec.alt,
                width: dims.width,
                precision: dims.precision,
            };
            if n.width.is_none() {
                n.width = Some(2 * t.long_size);
                n.zero = true;
            }
            number(t.out, a, n);
            return Ok(());
        }
        (_, Val::Int(0, _)) => s.extend_from_slice(b"(null)"),
        (b'I' | b'i', Val::Ptr(b, _)) => ip(&mut s, e, b, t.endian)?,
        (b'M' | b'm', Val::Ptr(b, _)) => mac(&mut s, e, b)?,
        (b'U', Val::Ptr(b, _)) => uuid(&mut s, e, b)?,
        (b'h', Val::Ptr(b, _)) => {
            // hex_string(): the field width is the byte count
            let n = match spec.width_arg.is_some() || spec.width.is_some() {
                true => dims.width.unwrap_or(0).min(64),
                false => 1,
            };
            let b = b.get(..n).ok_or("hex dump past the end of the data")?;
            let sep = match e.get(1) {
                Some(b'C') => Some(b':'),
                Some(b'D') => Some(b'-'),
                Some(b'N') => None,
                _ => Some(b' '),
            };
            for (i, x) in b.iter().enumerate() {
                if i > 0
                    && let Some(c) = sep
                {
                    t.out.push(c);
                }
                t.out.extend_from_slice(format!("{x:02x}").as_bytes());
            }
            return Ok(());
        }
        (b'b', Val::Ptr(b, _)) => {
            let n = dims.width.unwrap_or(0);
            let need = n.div_ceil(8 * t.long_size) * t.long_size;
            if b.len() < need {
                return Err("bitmap past the end of the data".into());
            }
            let text = if e.get(1) == Some(&b'l') {
                bitmap_list(b, n, t.long_size, t.endian)
            } else {
                bitmap_string(b, n, t.long_size, t.endian)
            };
            t.out.extend_from_slice(&text);
            return Ok(());
        }
        (_, Val::Int(..)) => return Err(format!("%p{ext} of a kernel pointer")),
        (_, Val::Ptr(..)) => return Err(format!("%p{ext} is not supported")),
    }
    pad_str(t.out, dims, &s);
    Ok(())
}

/// `mac_address_string()`: `%pM %pMR %pMF %pm %pmR`.
fn mac(s: &mut Vec<u8>, e: &[u8], b: &[u8]) -> Result<(), String> {
    let b = b.get(..6).ok_or("short MAC address")?;
    let sep = match e.get(1) {
        _ if e.first() == Some(&b'm') => None,
        Some(b'F') => Some(b'-'),
        _ => Some(b':'),
    };
    let rev = e.get(1) == Some(&b'R');
    for i in 0..6 {
        if i > 0
            && let Some(c) = sep
        {
            s.push(c);
        }
        let x = if rev { b[5 - i] } else { b[i] };
        s.extend_from_slice(format!("{x:02x}").as_bytes());
    }
    Ok(())
}

/// `uuid_string()`: `%pUb %pUB %pUl %pUL`.
fn uuid(s: &mut Vec<u8>, e: &[u8], b: &[u8]) -> Result<(), String> {
    let b = b.get(..16).ok_or("short UUID")?;
    const BE: [usize; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    const LE: [usize; 16] = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
    let (index, upper) = match e.get(1) {
        Some(b'L') => (&LE, true),
        Some(b'l') => (&LE, false),
        Some(b'B') => (&BE, true),
        _ => (&BE, false),
    };
    for (i, &x) in index.iter().enumerate() {
        if upper {
            s.extend_from_slice(format!("{:02X}", b[x]).as_bytes());
        } else {
            s.extend_from_slice(format!("{:02x}", b[x]).as_bytes());
        }
        if matches!(i, 3 | 5 | 7 | 9) {
            s.push(b'-');
        }
    }
    Ok(())
}

/// `ip_addr_string()`: `%pI4 %pi4 %pI6 %pi6 %pI6c %pIS... %piS...`.
fn ip(s: &mut Vec<u8>, e: &[u8], b: &[u8], endian: Endian) -> Result<(), String> {
    let raw = e[0] == b'i';
    match e.get(1) {
        Some(b'4') => ip4(
            s,
            b.get(..4).ok_or("short IPv4 address")?,
            raw,
            e.get(2),
            endian,
        ),
        Some(b'6') => {
            let a = b.get(..16).ok_or("short IPv6 address")?;
            if !raw && e.get(2) == Some(&b'c') {
                ip6_compressed(s, a);
            } else {
                ip6_full(s, a, raw);
            }
        }
        Some(b'S') => {
            let fam = endian.u16(b.get(..2).ok_or("short socket address")?);
            let flags = &e[2..];
            let has = |c: u8| flags.contains(&c);
            match fam {
                2 => {
                    let a = b.get(4..8).ok_or("short socket address")?;
                    let order = flags
                        .iter()
                        .rev()
                        .find(|c| matches!(c, b'h' | b'l' | b'n' | b'b'));
                    ip4(s, a, raw, order, endian);
                    if has(b'p') {
                        let port = u16::from_be_bytes([b[2], b[3]]);
                        s.extend_from_slice(format!(":{port}").as_bytes());
                    }
                }
                10 => {
                    let x = b.get(..28).ok_or("short socket address")?;
                    let bracket = has(b'p') || has(b'f') || has(b's');
                    if bracket {
                        s.push(b'[');
                    }
                    if !raw && has(b'c') {
                        ip6_compressed(s, &x[8..24]);
                    } else {
                        ip6_full(s, &x[8..24], raw);
                    }
                    if bracket {
                        s.push(b']');
                    }
                    if has(b'p') {
                        let port = u16::from_be_bytes([x[2], x[3]]);
                        s.extend_from_slice(format!(":{port}").as_bytes());
                    }
                    if has(b'f') {
                        let fl = u32::from_be_bytes([x[4], x[5], x[6], x[7]]) & 0x0fff_ffff;
                        s.extend_from_slice(format!("/{fl}").as_bytes());
                    }
                    if has(b's') {
                        let scope = endian.u32(&x[24..28]);
                        s.extend_from_slice(format!("%{scope}").as_bytes());
                    }
                }
                _ => s.extend_from_slice(b"(einval)"),
            }
        }
        _ => s.extend_from_slice(if raw { b"(%pi?)" } else { b"(%pI?)" }),
    }
    Ok(())
}

/// `ip4_string()`: dotted quad; `raw` (`%pi4`) with leading zeros;
/// `h`/`l` take the bytes in the kernel's / little-endian order.
fn ip4(s: &mut Vec<u8>, a: &[u8], raw: bool, order: Option<&u8>, endian: Endian) {
    let rev = match order {
        Some(b'l') => true,
        Some(b'h') => endian == Endian::Little,
        _ => false,
    };
    for i in 0..4 {
        let x = if rev { a[3 - i] } else { a[i] };
        if raw {
            s.extend_from_slice(format!("{x:03}").as_bytes());
        } else {
            s.extend_from_slice(x.to_string().as_bytes());
        }
        if i < 3 {
            s.push(b'.');
        }
    }
}

/// `ip6_string()`: eight 4-digit groups, with colons unless `raw`.
fn ip6_full(s: &mut Vec<u8>, a: &[u8], raw: bool) {
    for i in 0..8 {
        s.extend_from_slice(format!("{:02x}{:02x}", a[2 * i], a[2 * i + 1]).as_bytes());
        if !raw && i != 7 {
            s.push(b':');
        }
    }
}

/// `ip6_compressed_string()`: RFC 5952 with the longest run of zero groups
/// as `::`, IPv4-mapped and ISATAP addresses ending in a dotted quad.
fn ip6_compressed(s: &mut Vec<u8>, a: &[u8]) {
    let word = |i: usize| u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    let v4mapped = (0..5).all(|i| word(i) == 0) && word(5) == 0xffff;
    let isatap = (word(4) | 0x0200) == 0x0200 && word(5) == 0x5efe;
    let use4 = v4mapped || isatap;
    let range = if use4 { 6 } else { 8 };
    let mut longest = 1;
    let mut colonpos: Option<usize> = None;
    for i in 0..range {
        let run = (i..range).take_while(|&j| word(j) == 0).count();
        if run > longest {
            longest = run;
            colonpos = Some(i);
        }
    }
    let mut needcolon = false;
    let mut i = 0;
    while i < range {
        if Some(i) == colonpos {
            if needcolon || i == 0 {
                s.push(b':');
            }
            s.push(b':');
            needcolon = false;
            i += longest;
            continue;
        }
        if needcolon {
            s.push(b':');
        }
        s.extend_from_slice(format!("{:x}", word(i)).as_bytes());
        needcolon = true;
        i += 1;
    }
    if use4 {
        if needcolon {
            s.push(b':');
        }
        ip4(s, &a[12..16], false, None, Endian::Big);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: u64, base: u32, signed: bool, f: &str, w: Option<usize>, p: Option<usize>) -> String {
        let mut out = Vec::new();
        number(
            &mut out,
            v,
            Num {
                base,
                signed,
                upper: false,
                left: f.contains('-'),
                zero: f.contains('0'),
                plus: f.contains('+'),
                space: f.contains(' '),
                special: f.contains('#'),
                width: w,
                precision: p,
            },
        );
        String::from_utf8(out).unwrap()
    }

    /// Cases checked against the kernel's number() semantics.
    #[test]
    fn number_like_vsprintf() {
        assert_eq!(n(0, 16, false, "#", None, None), "0x0");
        assert_eq!(n(255, 16, false, "#", Some(8), None), "    0xff");
        assert_eq!(n(255, 16, false, "#0", Some(8), None), "0x0000ff");
        assert_eq!(n(0, 8, false, "#", None, None), "0");
        assert_eq!(n(8, 8, false, "#", None, None), "010");
        assert_eq!(n(0, 10, false, "", None, Some(0)), "0");
        assert_eq!(n(5, 10, true, "", None, Some(3)), "005");
        assert_eq!(n(-5i64 as u64, 10, true, "", Some(5), None), "   -5");
        assert_eq!(n(-5i64 as u64, 10, true, "0", Some(5), None), "-0005");
        assert_eq!(n(7, 10, false, "-", Some(4), None), "7   ");
        assert_eq!(n(7, 10, false, "-0", Some(4), None), "7   ");
        assert_eq!(n(5, 10, true, "+", None, None), "+5");
        assert_eq!(n(5, 10, true, " ", None, None), " 5");
        assert_eq!(n(5, 10, false, "+", None, None), "5");
        assert_eq!(n(100, 10, false, "", Some(2), None), "100");
        assert_eq!(
            n(u64::MAX, 10, false, "", None, None),
            "18446744073709551615"
        );
        assert_eq!(
            n(i64::MIN as u64, 10, true, "", None, None),
            "-9223372036854775808"
        );
    }

    #[test]
    fn ip6_forms() {
        let mut a = [0u8; 16];
        a[15] = 1;
        let mut s = Vec::new();
        ip6_compressed(&mut s, &a);
        assert_eq!(s, b"::1");
        s.clear();
        ip6_full(&mut s, &a, false);
        assert_eq!(s, b"0000:0000:0000:0000:0000:0000:0000:0001");
        let mut m = [0u8; 16];
        m[10] = 0xff;
        m[11] = 0xff;
        m[12..].copy_from_slice(&[10, 0, 2, 15]);
        s.clear();
        ip6_compressed(&mut s, &m);
        assert_eq!(s, b"::ffff:10.0.2.15");
        let d = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        s.clear();
        ip6_compressed(&mut s, &d);
        assert_eq!(s, b"2001:db8::1:0:0:1");
        let one_zero = [0, 1, 0, 0, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7];
        s.clear();
        ip6_compressed(&mut s, &one_zero);
        assert_eq!(s, b"1:0:2:3:4:5:6:7");
        s.clear();
        ip6_compressed(&mut s, &[0; 16]);
        assert_eq!(s, b"::");
    }
}
