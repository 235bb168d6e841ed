//! Where loaded modules' memory lies, from /proc/modules and
//! /sys/module/NAME/sections (both root only): each module's sections by
//! address, where its text ends, and the spans its memory may occupy. The
//! kernel's answers for a probe at a module address depend on them: an
//! address in no module's memory is -ENOENT, one in a module's data is no
//! text. Nothing here writes to the kernel.

use std::path::Path;
use std::sync::OnceLock;

/// Where the loaded modules' section addresses are.
pub(crate) const MODULES_DIR: &str = "/sys/module";

/// At most this much of a module's table is read.
pub(crate) const MODULE_TABLE_MAX: u64 = 256 << 10;

/// One module's sections by address.
pub(crate) struct ModuleSections {
    pub(crate) addrs: Vec<(u64, String)>,
}

impl ModuleSections {
    /// The sections of `dir` (`/sys/module/NAME/sections`) by address;
    /// `None` when it cannot be read or shows no addresses.
    pub(crate) fn read(dir: &Path) -> Option<ModuleSections> {
        let mut addrs: Vec<(u64, String)> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let text = std::fs::read_to_string(e.path()).ok()?;
                let addr = u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()?;
                (addr != 0).then_some((addr, name))
            })
            .collect();
        addrs.sort_unstable();
        (!addrs.is_empty()).then_some(ModuleSections { addrs })
    }

    /// Whether a section is the module's code: any that is not one of the
    /// data sections modules carry (`.rodata*`, `.data*`, `.bss`, the
    /// `__*` tables, notes, ...). Unknown names count as code (arm64's
    /// `.plt` lies between `.text` and `.exit.text`): a section taken for
    /// code only makes the text look longer, never a probe refused.
    pub(crate) fn is_text(name: &str) -> bool {
        const DATA: [&str; 22] = [
            ".rodata",
            ".data",
            ".bss",
            ".note",
            ".gnu.linkonce",
            "__",
            "_ftrace",
            ".orc_",
            ".symtab",
            ".strtab",
            ".init.data",
            ".exit.data",
            ".ref.data",
            ".altinstructions",
            ".parainstructions",
            ".return_sites",
            ".retpoline_sites",
            ".call_sites",
            ".ibt_endbr_seal",
            ".smp_locks",
            ".static_call_sites",
            ".printk_index",
        ];
        !DATA.iter().any(|d| name.starts_with(d))
    }

    /// The module's text sections (`.text`, `.text.*`, `.init.text`,
    /// `.exit.text`, `.plt`, ...), each up to the next section's address.
    pub(crate) fn text(&self) -> Vec<std::ops::Range<u64>> {
        self.addrs
            .iter()
            .enumerate()
            .filter(|(_, (_, n))| ModuleSections::is_text(n))
            .map(|(i, &(a, _))| a..self.next(i).unwrap_or(a + MODULE_TABLE_MAX))
            .collect()
    }

    /// The address of the section after the `i`th.
    fn next(&self, i: usize) -> Option<u64> {
        let a = self.addrs[i].0;
        self.addrs[i + 1..].iter().map(|s| s.0).find(|&b| b > a)
    }

    /// The address and bytes of section `name`, read up to the next
    /// section (at most [`MODULE_TABLE_MAX`]) page by page, ending at the
    /// first page kcore does not hold.
    pub(crate) fn table(&self, name: &str, core: &Path) -> Option<(u64, Vec<u8>)> {
        let i = self.addrs.iter().position(|(_, n)| n == name)?;
        let start = self.addrs[i].0;
        let end = self
            .next(i)
            .unwrap_or(u64::MAX)
            .min(start.saturating_add(MODULE_TABLE_MAX));
        let mut bytes = Vec::new();
        let mut at = start;
        while at < end {
            let page_end = (at | 0xfff).saturating_add(1).min(end);
            let len = usize::try_from(page_end - at).ok()?;
            match ktrace_disasm::kcore::read(core, at, len) {
                Ok(b) => bytes.extend_from_slice(&b),
                Err(_) => break,
            }
            at = page_end;
        }
        (!bytes.is_empty()).then_some((start, bytes))
    }
}

/// Where the text of loaded module `module` that holds `addr` ends, as
/// far as its sections show: the first data section after `addr`
/// (`/sys/module/NAME/sections`, root only). The kernel bounds a
/// module's last function by its text's end (`find_kallsyms_symbol()`)
/// and refuses a probe past it (`__module_text_address()`); kallsyms'
/// next symbol there is read-only data (`_note_*`). `None` when the
/// sections cannot be read.
pub fn module_text_end(module: &str, addr: u64) -> Option<u64> {
    if module.is_empty() || module.contains('/') || module.starts_with('.') {
        return None;
    }
    let mods = ModuleSections::read(&Path::new(MODULES_DIR).join(module).join("sections"))?;
    mods.addrs
        .iter()
        .find(|(a, n)| *a > addr && !ModuleSections::is_text(n))
        .map(|&(a, _)| a)
}

/// Where loaded modules' memory lies, as far as /proc/modules and
/// /sys/module/NAME/sections show (both root only).
///
/// Before 6.4 a module's memory is one allocation (`core_layout`: text
/// first, then read-only data, then data), and /proc/modules shows its base
/// and, once the init memory is freed, its size: every section lies within
/// [base, base + size), and that range is exact.
///
/// Since 6.4 it is one allocation per kind (`mem[MOD_TEXT]`, `mem[MOD_DATA]`,
/// `mem[MOD_RODATA]`, ...), and /proc/modules shows the text's base and the
/// sum of their sizes. Each region holds at least one section and is no
/// longer than that sum, so every byte of the module lies within its size of
/// one of its sections. An address outside all those spans is in no module,
/// which is what `__module_address()` answers and kallsyms then places
/// nowhere (-ENOENT); inside one, it is not decided.
#[derive(Debug, Default)]
pub struct ModuleSpans {
    /// Where any module's memory may lie.
    spans: Vec<std::ops::Range<u64>>,
    /// Memory known to be a module's (one allocation): its name, and whether
    /// it is text.
    known: Vec<(String, std::ops::Range<u64>, bool)>,
    /// Every loaded module's sections by address, as `from_modules()` keeps
    /// them: whether each is text, and whether its module is of several
    /// regions.
    sections: Vec<(u64, bool, bool)>,
}

impl ModuleSpans {
    /// The running kernel's (read once per process); `None` when a loaded
    /// module's size or sections cannot be read (not root, addresses
    /// hidden).
    pub fn running() -> Option<&'static ModuleSpans> {
        static SPANS: OnceLock<Option<ModuleSpans>> = OnceLock::new();
        SPANS
            .get_or_init(|| {
                let modules = std::fs::read_to_string("/proc/modules").ok()?;
                ModuleSpans::from_modules(&modules, |name| {
                    ModuleSections::read(&Path::new(MODULES_DIR).join(name).join("sections"))
                        .map(|m| m.addrs)
                })
            })
            .as_ref()
    }

    /// From /proc/modules' text (`NAME SIZE REFS DEPS STATE BASE`) and each
    /// module's section addresses. `.init.*` sections are skipped, and so
    /// are `.symtab` and `.strtab`, which layout_symtab() puts at the end of
    /// the init data: that memory is freed after the module's init, and the
    /// address stays shown (x86_64 7.2 and 6.1: romfs's `.init.text` names
    /// memory autofs4's `.text` holds). So is `.data..percpu`, whose address
    /// is the per-cpu area's.
    fn from_modules(
        modules: &str,
        sections: impl Fn(&str) -> Option<Vec<(u64, String)>>,
    ) -> Option<ModuleSpans> {
        let mut out = ModuleSpans::default();
        for line in modules.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(name), Some(size)) = (f.first(), f.get(1)) else {
                continue;
            };
            let size: u64 = size.parse().ok()?;
            let mut secs: Vec<(u64, String)> = sections(name)?
                .into_iter()
                .filter(|(_, n)| {
                    !n.starts_with(".init")
                        && !matches!(n.as_str(), ".symtab" | ".strtab" | ".data..percpu")
                })
                .collect();
            secs.sort_unstable();
            if secs.is_empty() {
                return None;
            }
            let base = f
                .get(5)
                .and_then(|b| b.strip_prefix("0x"))
                .and_then(|b| u64::from_str_radix(b, 16).ok())
                .filter(|&b| b != 0);
            let one = base.map(|b| b..b.saturating_add(size));
            let split = !one
                .as_ref()
                .is_some_and(|one| secs.iter().all(|(a, _)| one.contains(a)));
            out.sections.extend(
                secs.iter()
                    .map(|(a, n)| (*a, ModuleSections::is_text(n), split)),
            );
            if let Some(one) = one.filter(|one| secs.iter().all(|(a, _)| one.contains(a))) {
                // one allocation: text up to its first data section
                let data = secs
                    .iter()
                    .find(|(a, n)| *a > one.start && !ModuleSections::is_text(n))
                    .map_or(one.end, |(a, _)| *a);
                out.spans.push(one.clone());
                out.known.push((name.to_string(), one.start..data, true));
                out.known.push((name.to_string(), data..one.end, false));
                continue;
            }
            out.add_split(size, &secs);
        }
        out.sections.sort_unstable();
        Some(out)
    }

    /// A module of one region per kind (6.4 and later): every region holds
    /// one of its sections and is no longer than the module, so every byte
    /// of it lies within its size of a section. (Where the regions end is
    /// not told, nor that they are whole pages: on x86_64 and arm64 7.2 the
    /// kernel places nothing at the first byte past autofs4's last function
    /// when that is the next page's first, `exit_autofs_fs+0x15a8` on arm64,
    /// although a data section starts there.)
    fn add_split(&mut self, size: u64, secs: &[(u64, String)]) {
        self.spans.extend(
            secs.iter()
                .map(|(a, _)| a.saturating_sub(size)..a.saturating_add(size)),
        );
    }

    /// Whether `addr` may lie in a loaded module's memory (`false`: it lies
    /// in none).
    pub fn may_hold(&self, addr: u64) -> bool {
        self.spans.iter().any(|s| s.contains(&addr))
    }

    /// Where the text that holds `addr` ends, in a module known to be one
    /// allocation (before 6.4: at its first data section, the page-aligned
    /// end of its text).
    pub fn text_end(&self, addr: u64) -> Option<u64> {
        self.known
            .iter()
            .find(|(_, r, text)| *text && r.contains(&addr))
            .map(|(_, r, _)| r.end)
    }

    /// Where the text section of a module of several regions (6.4+) that
    /// `addr` is past starts, and where the next allocation above begins: the
    /// highest section at or below `addr` (any module's) is that text, and
    /// the lowest above it is data, `.data`, `.rodata`, `__bug_table`, ...
    /// (the page it is in: a region's first section starts it). Between
    /// the two lies the rest of that text region, its vmalloc guard page
    /// (the next allocation starts a page past its end at the earliest) and
    /// maybe memory of no module. `None` otherwise; also when the next
    /// section is text, which a text allocator that packs regions
    /// (execmem's cache, 6.14+) may place without a guard page.
    pub fn after_split_text(&self, addr: u64) -> Option<(u64, u64)> {
        let pos = self.sections.partition_point(|s| s.0 <= addr);
        let &(below, text, split) = self.sections.get(pos.checked_sub(1)?)?;
        let &(above, above_text, _) = self.sections.get(pos)?;
        (text && split && !above_text).then_some((below, above & !0xfff))
    }

    /// The module whose memory is known to hold `addr`, and whether it is
    /// that module's text (`false`: its data).
    pub fn holding(&self, addr: u64) -> Option<(&str, bool)> {
        self.known
            .iter()
            .find(|(_, r, _)| r.contains(&addr))
            .map(|(n, _, text)| (n.as_str(), *text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture of /proc/modules and the modules' sections files
    /// (tests/fixtures/modules-*.txt) as `from_modules()` reads them.
    fn spans_of(capture: &str) -> ModuleSpans {
        let (mut modules, mut sections) =
            (String::new(), Vec::<(String, Vec<(u64, String)>)>::new());
        let mut part = "";
        for line in capture.lines().filter(|l| !l.starts_with('#')) {
            if let Some(p) = line.strip_prefix("== ") {
                part = p;
                if let Some(m) = p.strip_prefix("sections ") {
                    sections.push((m.to_string(), Vec::new()));
                }
                continue;
            }
            match part {
                "modules" => modules.push_str(&format!("{line}\n")),
                _ => {
                    let (a, n) = line.split_once(' ').unwrap();
                    let a = u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap();
                    sections.last_mut().unwrap().1.push((a, n.to_string()));
                }
            }
        }
        ModuleSpans::from_modules(&modules, |m| {
            sections
                .iter()
                .find(|(n, _)| n == m)
                .map(|(_, s)| s.clone())
        })
        .unwrap()
    }

    #[test]
    fn a_module_in_one_allocation_is_known_exactly() {
        // x86_64 6.1: romfs at 0xffffffffc03c4000, 20480 bytes; autofs4 at
        // 0xffffffffc03ca000, 53248 bytes. In the same guest the kernel
        // refused `autofs_fill_super+0x10000` (0xffffffffc03dbxxx) with
        // "Invalid probed address or symbol" and `+0x8000` with "Failed to
        // register probe event" (autofs4's data)
        let s = spans_of(include_str!("../tests/fixtures/modules-x86_64-6.1.txt"));
        // text up to the first data section (`.note.gnu.build-id`), then data
        assert_eq!(s.holding(0xffff_ffff_c03c_4000), Some(("romfs", true)));
        assert_eq!(s.holding(0xffff_ffff_c03c_4fff), Some(("romfs", true)));
        assert_eq!(s.holding(0xffff_ffff_c03c_5000), Some(("romfs", false)));
        assert_eq!(s.holding(0xffff_ffff_c03c_8fff), Some(("romfs", false)));
        assert_eq!(s.holding(0xffff_ffff_c03d_3000), Some(("autofs4", false)));
        assert_eq!(s.holding(0xffff_ffff_c03c_b000), Some(("autofs4", true)));
        // between the two, and past the last: in no module (romfs's stale
        // `.init.text` at 0xffffffffc03ca000 is autofs4's text, not romfs's)
        for a in [
            0xffff_ffff_c03c_9000,
            0xffff_ffff_c03d_7000,
            0xffff_ffff_c03d_b000,
            0xffff_ffff_c03c_3fff,
        ] {
            assert!(!s.may_hold(a), "{a:#x}");
            assert_eq!(s.holding(a), None, "{a:#x}");
        }
    }

    #[test]
    fn a_module_of_several_regions_is_bounded_by_its_size_around_each_section() {
        // x86_64 7.2: text at 0xffffffffc0600000 (romfs) and
        // 0xffffffffc0602000 (autofs4), data near 0xffffffffc048xxxx: no
        // module is one allocation, so nothing is known to be one's, and
        // only what lies farther than a module's size from each of its
        // sections is in none
        let s = spans_of(include_str!("../tests/fixtures/modules-x86_64-7.2.txt"));
        assert_eq!(s.holding(0xffff_ffff_c060_0000), None);
        assert_eq!(s.holding(0xffff_ffff_c048_10c0), None);
        // autofs4 is 61440 bytes; its last core section, `.exit.text`, is
        // at 0xffffffffc0607950
        assert!(s.may_hold(0xffff_ffff_c060_7950 + 61439));
        assert!(!s.may_hold(0xffff_ffff_c060_7950 + 61440));
        // 1 MiB past autofs4's text, as the generator writes
        // (`autofs4:autofs_fill_super+0x100000`): in none
        assert!(!s.may_hold(0xffff_ffff_c060_2000 + 0x10_0000));
        assert!(s.may_hold(0xffff_ffff_c048_6280));
    }

    #[test]
    fn past_a_split_modules_text_the_next_data_allocation_is_found() {
        // x86_64 6.12: romfs's `.exit.text` at 0xffffffffc0217fa0, its
        // data from `__bug_table` at 0xffffffffc0219000
        let s = spans_of(include_str!("../tests/fixtures/modules-x86_64-6.12.txt"));
        for a in [
            0xffff_ffff_c021_7fb0,
            0xffff_ffff_c021_80b0,
            0xffff_ffff_c021_8fff,
        ] {
            assert_eq!(
                s.after_split_text(a),
                Some((0xffff_ffff_c021_7fa0, 0xffff_ffff_c021_9000)),
                "{a:#x}"
            );
        }
        // in the data, or past a text followed by text: nothing
        assert_eq!(s.after_split_text(0xffff_ffff_c021_9000), None);
        assert_eq!(s.after_split_text(0xffff_ffff_c021_7010), None);
        // one allocation (6.1): nothing either
        let one = spans_of(include_str!("../tests/fixtures/modules-x86_64-6.1.txt"));
        assert!(
            (0xffff_ffff_c03c_4000..0xffff_ffff_c03c_5000)
                .step_by(0x100)
                .all(|a| one.after_split_text(a).is_none())
        );
    }

    #[test]
    fn unreadable_sections_leave_the_spans_unknown() {
        let modules = "romfs 20480 0 - Live 0x0000000000000000\n";
        assert!(ModuleSpans::from_modules(modules, |_| None).is_none());
        assert!(ModuleSpans::from_modules(modules, |_| Some(Vec::new())).is_none());
        // no module loaded: every address is in none
        let none = ModuleSpans::from_modules("", |_| None).unwrap();
        assert!(!none.may_hold(0xffff_ffff_c000_0000));
    }
}
