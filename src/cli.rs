//! Value parsers for numbers given on the command line: durations, counts
//! and buffer sizes are checked by the argument parser, so a bad value is a
//! usage error (exit 2) before anything is created, never a panic or a
//! silent zero. It is not where flags are declared (that is each
//! subcommand's `Args`).

/// The longest duration accepted, in seconds (about 31 years): anything
/// longer is surely a mistake, and it keeps every later `Duration`
/// computation far from overflow.
pub const MAX_SECONDS: f64 = 1e9;

/// A duration in seconds: a finite decimal number above zero (`0.5`, `10`,
/// `1e-3`), at most [`MAX_SECONDS`].
pub fn seconds(text: &str) -> Result<f64, String> {
    let v: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !v.is_finite() {
        return Err(format!("{text:?} is not a finite number of seconds"));
    }
    if v <= 0.0 {
        return Err(format!("{text:?}: the duration must be above zero"));
    }
    if v > MAX_SECONDS {
        return Err(format!(
            "{text:?}: the duration must be at most {MAX_SECONDS:e} seconds"
        ));
    }
    Ok(v)
}

/// `--arch` of `check`, `boot` and `syms`: the names ktrace has register and
/// ABI tables for, with their other spellings ([`ktrace_probe::Arch::spellings`]; a
/// bad one is a usage error, exit status 2, like any other bad flag; completions
/// offer the names).
pub fn arch() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue;
    clap::builder::PossibleValuesParser::new(ktrace_probe::Arch::flag_order().map(|a| {
        let others = a.spellings().iter().filter(|s| **s != a.flag_name());
        PossibleValue::new(a.flag_name()).aliases(others.copied())
    }))
}

/// `--group NAME`: the system ktrace shows for its probes, checked as the
/// kernel checks a group name (`is_good_system_name()`: a C identifier,
/// shorter than `MAX_EVENT_NAME_LEN`), so a bad one is a usage error (exit
/// 2). `ftrace` is refused: it is the system of ftrace's own events (the
/// stack records) and has a section of its own in trace.dat.
pub fn group(text: &str) -> Result<String, String> {
    let max = ktrace_probe::parse::MAX_EVENT_NAME_LEN - 1;
    let ident = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(format!(
            "{text:?}: a group name must follow the same rules as C identifiers (letters, \
             digits and '_', not starting with a digit)"
        ));
    }
    if text.len() > max {
        return Err(format!(
            "{text:?}: a group name is at most {max} bytes (it has {})",
            text.len()
        ));
    }
    if text == "ftrace" {
        return Err(
            "\"ftrace\" is the system of ftrace's own events (stack records): choose another \
             group name"
                .to_string(),
        );
    }
    Ok(text.to_string())
}

/// A count of at least one.
pub fn count(text: &str) -> Result<u64, String> {
    let v: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if v == 0 {
        return Err(format!("{text:?}: the count must be at least 1"));
    }
    Ok(v)
}

/// A per-CPU ring-buffer size in KiB: at least 1, and no more than this
/// machine's memory (the kernel shifts the value left by 10 bits in an
/// `unsigned long`, so a huge number wraps to a tiny buffer instead of
/// failing; and a buffer larger than the memory can never be allocated).
pub fn buffer_kb(text: &str) -> Result<u64, String> {
    let v: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number of KiB"))?;
    if v == 0 {
        return Err(format!("{text:?}: the buffer size must be at least 1 KiB"));
    }
    let limit = mem_total_kb().unwrap_or(u64::MAX >> 10);
    if v > limit {
        return Err(format!(
            "{text:?} KiB per CPU is more than this machine's memory ({limit} KiB)"
        ));
    }
    Ok(v)
}

/// `MemTotal` of /proc/meminfo, in KiB.
fn mem_total_kb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_total(&text)
}

fn parse_mem_total(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_must_be_finite_and_positive() {
        // Regression: `-d inf` and `-d 1e400` panicked after installing the
        // probe; `-d nan` and `-d=-1` were silently zero.
        for bad in ["inf", "1e400", "nan", "-1", "0", "0.0", "", "abc", "2e9"] {
            assert!(seconds(bad).is_err(), "{bad:?}");
        }
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert_eq!(seconds("10"), Ok(10.0));
        assert_eq!(seconds("1e-3"), Ok(0.001));
    }

    #[test]
    fn counts_start_at_one() {
        assert!(count("0").is_err());
        assert!(count("-1").is_err());
        assert!(count("x").is_err());
        assert_eq!(count("1"), Ok(1));
    }

    #[test]
    fn buffer_sizes_are_bounded() {
        // Regression: 18446744073709551615 was accepted and the kernel
        // wrapped it to 7 KB.
        assert!(buffer_kb("18446744073709551615").is_err());
        assert!(buffer_kb("0").is_err());
        assert_eq!(buffer_kb("1410"), Ok(1410));
        assert_eq!(
            parse_mem_total("MemTotal:       24576000 kB\nMemFree: 1 kB\n"),
            Some(24_576_000)
        );
    }
}
