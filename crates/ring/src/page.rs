//! Decoding of one ring-buffer sub-buffer ("page") as read from
//! `per_cpu/cpuN/trace_pipe_raw`.
//!
//! Mirrors kernel/trace/ring_buffer.c: `struct buffer_data_page` (a u64
//! time stamp, a `local_t` commit whose bit 31 is `RB_MISSED_EVENTS` and bit
//! 30 `RB_MISSED_STORED`, with the missed count stored as an `unsigned long`
//! right after the committed data), and `struct ring_buffer_event` records:
//! a 32-bit header of `type_len:5, time_delta:27` followed by `array[]`.
//! `type_len` 1..=28 is a data record of `type_len * 4` bytes, 0 a data record
//! whose length is in `array[0]` (including that word), 29 padding (a zero
//! delta means the rest of the page is empty), 30 a time extend
//! (`array[0] << 27 | time_delta` added to the clock), 31 an absolute time
//! stamp (the same 59 bits, with the top 5 bits taken from the page time
//! stamp as `rb_fix_abs_ts()` does). The layout (endianness, `sizeof(long)`,
//! data offset and sub-buffer size) comes from `events/header_page` and is
//! never assumed. This module is pure code over bytes; reading the buffers
//! is [`crate::reader`].

use crate::{Endian, Error};

/// Commit flag: events were lost before this page.
pub const RB_MISSED_EVENTS: u64 = 1 << 31;
/// Commit flag: the missed count is stored after the data.
pub const RB_MISSED_STORED: u64 = 1 << 30;
/// `type_len` of padding / discarded records.
pub const TYPE_PADDING: u32 = 29;
/// `type_len` of a time extend.
pub const TYPE_TIME_EXTEND: u32 = 30;
/// `type_len` of an absolute time stamp.
pub const TYPE_TIME_STAMP: u32 = 31;
/// Largest `type_len` of a data record with an implicit length.
pub const TYPE_DATA_MAX: u32 = 28;
const TS_SHIFT: u32 = 27;
const TS_MSB: u64 = !((1u64 << 59) - 1);

/// Where things are in a sub-buffer on the traced kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// Byte order of the traced kernel.
    pub endian: Endian,
    /// Size of the commit field, which is the kernel's `sizeof(long)`.
    pub long_size: usize,
    /// Offset of the commit field.
    pub commit_offset: usize,
    /// Offset of the first record.
    pub data_offset: usize,
    /// Bytes in one sub-buffer, header included.
    pub subbuf_size: usize,
}

impl PageLayout {
    /// The layout of the machine this runs on, for sub-buffers of
    /// `subbuf_size` bytes (tests and same-machine use; prefer
    /// [`PageLayout::from_header_page`]).
    pub fn native(subbuf_size: usize) -> PageLayout {
        let long_size = std::mem::size_of::<usize>();
        PageLayout {
            endian: Endian::native(),
            long_size,
            commit_offset: 8,
            data_offset: 8 + long_size,
            subbuf_size,
        }
    }

    /// Parses the text of `events/header_page`:
    ///
    /// ```text
    /// field: u64 timestamp;   offset:0;   size:8; signed:0;
    /// field: local_t commit;  offset:8;   size:8; signed:1;
    /// field: int overwrite;   offset:8;   size:1; signed:1;
    /// field: char data;       offset:16;  size:4080;  signed:0;
    /// ```
    ///
    /// The file does not state the byte order; pass the traced kernel's.
    pub fn from_header_page(text: &str, endian: Endian) -> Result<PageLayout, Error> {
        let mut commit = None;
        let mut data = None;
        let mut timestamp = None;
        for line in text.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';');
            let decl = parts.next().unwrap_or("").trim();
            let name = decl.rsplit(' ').next().unwrap_or("");
            let mut offset = None;
            let mut size = None;
            for p in parts {
                let p = p.trim();
                if let Some(v) = p.strip_prefix("offset:") {
                    offset = v.trim().parse::<usize>().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.trim().parse::<usize>().ok();
                }
            }
            let (Some(offset), Some(size)) = (offset, size) else {
                return Err(Error::HeaderPage(format!("bad line {line:?}")));
            };
            match name {
                "timestamp" => timestamp = Some((offset, size)),
                "commit" => commit = Some((offset, size)),
                "data" => data = Some((offset, size)),
                _ => {}
            }
        }
        let (Some(ts), Some(commit), Some(data)) = (timestamp, commit, data) else {
            return Err(Error::HeaderPage(
                "missing timestamp, commit or data field".into(),
            ));
        };
        if ts != (0, 8) || !matches!(commit.1, 4 | 8) || commit.0 != 8 {
            return Err(Error::HeaderPage(format!(
                "unexpected layout: timestamp {ts:?} commit {commit:?}"
            )));
        }
        if data.0 < commit.0 + commit.1 || data.1 == 0 || data.0 + data.1 > 1 << 24 {
            return Err(Error::HeaderPage(format!("unexpected data field {data:?}")));
        }
        Ok(PageLayout {
            endian,
            long_size: commit.1,
            commit_offset: commit.0,
            data_offset: data.0,
            subbuf_size: data.0 + data.1,
        })
    }

    /// The same layout for sub-buffers of another size (instances with
    /// `buffer_subbuf_size_kb` set; `header_page` shows the default size).
    pub fn with_subbuf_size(self, subbuf_size: usize) -> PageLayout {
        PageLayout {
            subbuf_size,
            ..self
        }
    }
}

/// Checks `events/header_event` describes the record header this crate
/// decodes (5-bit type_len, 27-bit time_delta, padding 29, time extend 30,
/// time stamp 31, data max type_len 28).
pub fn check_header_event(text: &str) -> Result<(), Error> {
    let want = [
        ("type_len", "5 bits"),
        ("time_delta", "27 bits"),
        ("padding", "type == 29"),
        ("time_extend", "type == 30"),
        ("time_stamp", "type == 31"),
        ("data max type_len", "== 28"),
    ];
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let lines: Vec<String> = text.lines().map(norm).collect();
    for (key, val) in want {
        let ok = lines.iter().any(|l| l.starts_with(key) && l.ends_with(val));
        if !ok {
            return Err(Error::HeaderEvent(format!("expected {key} {val}")));
        }
    }
    Ok(())
}

/// Events lost before a page, from its commit flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Nothing lost.
    None,
    /// Events were lost; the kernel had no room to store how many.
    Unknown,
    /// This many events were lost.
    Count(u64),
}

impl Missed {
    /// The count, counting an unknown loss as 0 (report it separately).
    pub fn count(self) -> u64 {
        match self {
            Missed::Count(n) => n,
            _ => 0,
        }
    }
}

/// A decoded sub-buffer header borrowing the page bytes.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    layout: PageLayout,
    /// Time stamp of the first record (the clock base).
    pub timestamp: u64,
    /// Bytes of committed record data.
    pub commit: usize,
    /// Events lost before this page.
    pub missed: Missed,
    data: &'a [u8],
}

impl<'a> Page<'a> {
    /// Decodes the header of `bytes` (one sub-buffer, possibly shorter than
    /// the sub-buffer size when the kernel handed back a partial read).
    pub fn parse(layout: PageLayout, bytes: &'a [u8]) -> Result<Page<'a>, Error> {
        let e = layout.endian;
        if bytes.len() < layout.data_offset {
            return Err(Error::Page(format!(
                "page of {} bytes is shorter than its {}-byte header",
                bytes.len(),
                layout.data_offset
            )));
        }
        let timestamp = e.u64(&bytes[0..8]);
        let c = &bytes[layout.commit_offset..layout.commit_offset + layout.long_size];
        let raw = if layout.long_size == 8 {
            e.u64(c)
        } else {
            u64::from(e.u32(c))
        };
        let commit = (raw & 0x3fff_ffff) as usize;
        let avail = bytes.len() - layout.data_offset;
        if commit > avail {
            return Err(Error::Page(format!(
                "commit {commit} is past the {avail} data bytes of the page"
            )));
        }
        let data = &bytes[layout.data_offset..layout.data_offset + commit];
        let missed = if raw & RB_MISSED_EVENTS == 0 {
            Missed::None
        } else if raw & RB_MISSED_STORED != 0 {
            let at = layout.data_offset + commit;
            match bytes.get(at..at + layout.long_size) {
                Some(b) if layout.long_size == 8 => Missed::Count(e.u64(b)),
                Some(b) => Missed::Count(u64::from(e.u32(b))),
                None => Missed::Unknown,
            }
        } else {
            Missed::Unknown
        };
        Ok(Page {
            layout,
            timestamp,
            commit,
            missed,
            data,
        })
    }

    /// The records of this page, with absolute time stamps.
    pub fn records(&self) -> Records<'a> {
        Records {
            data: self.data,
            pos: 0,
            ts: self.timestamp,
            page_ts: self.timestamp,
            endian: self.layout.endian,
            done: false,
            discarded: 0,
        }
    }
}

/// One data record: its time stamp and payload (starting at `common_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Time stamp in trace-clock units (nanoseconds for the default clock).
    pub ts: u64,
    /// The payload. May be a few bytes longer than the event's fields (the
    /// kernel rounds lengths up to 4 bytes).
    pub data: &'a [u8],
}

/// Iterator over a page's data records. Padding, time extends and time
/// stamps are consumed internally. A malformed record ends the iteration with
/// one `Err`.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    data: &'a [u8],
    pos: usize,
    ts: u64,
    page_ts: u64,
    endian: Endian,
    done: bool,
    discarded: u32,
}

impl<'a> Records<'a> {
    /// Padding records with a length (the kernel's discarded events and the
    /// filler it writes at the end of a full page) passed over so far. A
    /// null padding, which only ends the page, is not counted.
    pub fn discarded(&self) -> u32 {
        self.discarded
    }

    fn fail(&mut self, msg: String) -> Option<Result<Record<'a>, Error>> {
        self.done = true;
        Some(Err(Error::Page(format!("offset {}: {msg}", self.pos))))
    }

    fn word(&self, at: usize) -> Option<u32> {
        self.data.get(at..at + 4).map(|b| self.endian.u32(b))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some(h) = self.word(self.pos) else {
                self.done = true;
                if self.pos < self.data.len() {
                    return self.fail("record header cut short".into());
                }
                return None;
            };
            let (type_len, delta) = match self.endian {
                Endian::Little => (h & 31, h >> 5),
                Endian::Big => (h >> 27, h & ((1 << 27) - 1)),
            };
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        self.done = true;
                        return None;
                    }
                    let Some(len) = self.word(self.pos + 4) else {
                        return self.fail("padding length cut short".into());
                    };
                    let next = (self.pos + 4).checked_add(len as usize);
                    match next {
                        Some(n) if n > self.pos && n <= self.data.len() => {
                            self.pos = n;
                            self.discarded += 1;
                        }
                        _ => return self.fail(format!("padding of {len} bytes runs past commit")),
                    }
                }
                TYPE_TIME_EXTEND | TYPE_TIME_STAMP => {
                    let Some(hi) = self.word(self.pos + 4) else {
                        return self.fail("time record cut short".into());
                    };
                    let v = (u64::from(hi) << TS_SHIFT) | u64::from(delta);
                    if type_len == TYPE_TIME_EXTEND {
                        self.ts = self.ts.wrapping_add(v);
                    } else {
                        let mut abs = v;
                        if self.page_ts & TS_MSB != 0 {
                            abs |= self.page_ts & TS_MSB;
                            if abs < self.page_ts {
                                abs = abs.wrapping_add(1 << 59);
                            }
                        }
                        self.ts = abs;
                    }
                    self.pos += 8;
                }
                _ => {
                    let (start, len) = if type_len == 0 {
                        let Some(len) = self.word(self.pos + 4) else {
                            return self.fail("record length cut short".into());
                        };
                        if len < 4 {
                            return self.fail(format!("record length {len} too small"));
                        }
                        (self.pos + 8, len as usize - 4)
                    } else {
                        (self.pos + 4, type_len as usize * 4)
                    };
                    let Some(end) = start.checked_add(len).filter(|&e| e <= self.data.len()) else {
                        return self.fail(format!("record of {len} bytes runs past commit"));
                    };
                    self.ts = self.ts.wrapping_add(u64::from(delta));
                    self.pos = end;
                    return Some(Ok(Record {
                        ts: self.ts,
                        data: &self.data[start..end],
                    }));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
";

    fn layout() -> PageLayout {
        PageLayout::from_header_page(HEADER_PAGE, Endian::Little).unwrap()
    }

    fn hdr(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | delta << 5).to_le_bytes()
    }

    fn page(ts: u64, commit: u64, body: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&ts.to_le_bytes());
        p.extend_from_slice(&commit.to_le_bytes());
        p.extend_from_slice(body);
        p
    }

    #[test]
    fn header_page_layouts() {
        let l = layout();
        assert_eq!((l.long_size, l.data_offset, l.subbuf_size), (8, 16, 4096));
        let h32 = HEADER_PAGE
            .replace("size:8;\tsigned:1", "size:4;\tsigned:1")
            .replace("offset:16;\tsize:4080", "offset:12;\tsize:4084");
        let l = PageLayout::from_header_page(&h32, Endian::Big).unwrap();
        assert_eq!((l.long_size, l.data_offset, l.subbuf_size), (4, 12, 4096));
        for bad in ["", "field: u64 timestamp;\toffset:0;\tsize:8;", "garbage"] {
            assert!(
                PageLayout::from_header_page(bad, Endian::Little).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn header_event_check() {
        let text = "# compressed entry header\n\ttype_len    :    5 bits\n\ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\tpadding     : type == 29\n\ttime_extend : type == 30\n\ttime_stamp : type == 31\n\tdata max type_len  == 28\n";
        check_header_event(text).unwrap();
        assert!(check_header_event(&text.replace("27 bits", "26 bits")).is_err());
    }

    #[test]
    fn every_record_type() {
        let mut body = Vec::new();
        // small data record, delta 5
        body.extend_from_slice(&hdr(2, 5));
        body.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        // time extend of (1 << 27) + 3
        body.extend_from_slice(&hdr(TYPE_TIME_EXTEND, 3));
        body.extend_from_slice(&1u32.to_le_bytes());
        // large data record with length word: 4 + 120 bytes
        body.extend_from_slice(&hdr(0, 2));
        body.extend_from_slice(&124u32.to_le_bytes());
        body.extend_from_slice(&[9; 120]);
        // discarded record (padding with a delta): 8 bytes of payload
        body.extend_from_slice(&hdr(TYPE_PADDING, 1));
        body.extend_from_slice(&8u32.to_le_bytes());
        body.extend_from_slice(&[0; 4]);
        // absolute stamp
        body.extend_from_slice(&hdr(TYPE_TIME_STAMP, 7));
        body.extend_from_slice(&2u32.to_le_bytes());
        body.extend_from_slice(&hdr(1, 0));
        body.extend_from_slice(&[0xaa; 4]);
        let p = page(1000, body.len() as u64, &body);
        let pg = Page::parse(layout(), &p).unwrap();
        assert_eq!(pg.missed, Missed::None);
        let mut it = pg.records();
        let recs: Vec<_> = it.by_ref().map(Result::unwrap).collect();
        assert_eq!(recs.len(), 3);
        assert_eq!(it.discarded(), 1);
        assert_eq!((recs[0].ts, recs[0].data.len()), (1005, 8));
        assert_eq!(recs[1].ts, 1005 + (1 << 27) + 3 + 2);
        assert_eq!(recs[1].data, &[9; 120][..]);
        assert_eq!((recs[2].ts, recs[2].data), ((2 << 27) | 7, &[0xaa; 4][..]));
    }

    #[test]
    fn absolute_stamp_takes_top_bits_from_page() {
        let page_ts = (3u64 << 59) | 500;
        let mut body = Vec::new();
        body.extend_from_slice(&hdr(TYPE_TIME_STAMP, 100));
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&hdr(1, 0));
        body.extend_from_slice(&[0; 4]);
        let p = page(page_ts, body.len() as u64, &body);
        let r = Page::parse(layout(), &p)
            .unwrap()
            .records()
            .next()
            .unwrap()
            .unwrap();
        // 100 < 500 once the msb are restored: the low bits wrapped.
        assert_eq!(r.ts, (4u64 << 59) | 100);
    }

    #[test]
    fn missed_counts() {
        let body = [hdr(1, 0), [0; 4]].concat();
        let flags = RB_MISSED_EVENTS | RB_MISSED_STORED;
        // the kernel's int flags sign-extend into the long commit
        let commit = (8 | flags) | 0xffff_ffff_0000_0000;
        let mut stored = body.clone();
        stored.extend_from_slice(&1234u64.to_le_bytes());
        let p = page(0, commit, &stored);
        let pg = Page::parse(layout(), &p).unwrap();
        assert_eq!((pg.commit, pg.missed), (8, Missed::Count(1234)));
        let p = page(0, 8 | RB_MISSED_EVENTS, &body);
        assert_eq!(Page::parse(layout(), &p).unwrap().missed, Missed::Unknown);
    }

    #[test]
    fn malformed_pages_never_panic() {
        let l = layout();
        assert!(Page::parse(l, &[0; 8]).is_err());
        assert!(Page::parse(l, &page(0, 100, &[0; 8])).is_err());
        let cases: &[&[u8]] = &[
            &[0, 0, 0],                  // header cut short
            &[0, 0, 0, 0, 2, 0, 0, 0],   // length < 4
            &[0, 0, 0, 0, 200, 0, 0, 0], // length past commit
            &[28, 0, 0, 0],              // type_len 28 past commit
            &[TYPE_PADDING as u8 | 32, 0, 0, 0, 255, 255, 255, 255],
            &[TYPE_TIME_EXTEND as u8, 0, 0, 0],
        ];
        for body in cases {
            let p = page(0, body.len() as u64, body);
            let pg = Page::parse(l, &p).unwrap();
            let out: Vec<_> = pg.records().collect();
            assert!(out.last().is_some_and(Result::is_err), "{body:?}: {out:?}");
        }
        // null padding ends the page quietly
        let p = page(0, 8, &[TYPE_PADDING as u8, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Page::parse(l, &p).unwrap().records().count(), 0);
    }

    #[test]
    fn big_endian_headers() {
        let l = PageLayout {
            endian: Endian::Big,
            ..layout()
        };
        let mut p = Vec::new();
        p.extend_from_slice(&10u64.to_be_bytes());
        p.extend_from_slice(&8u64.to_be_bytes());
        p.extend_from_slice(&((1u32 << 27) | 4).to_be_bytes());
        p.extend_from_slice(&[1, 2, 3, 4]);
        let r = Page::parse(l, &p)
            .unwrap()
            .records()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!((r.ts, r.data), (14, &[1u8, 2, 3, 4][..]));
    }
}
