//! `ktrace completions SHELL` and `ktrace man`: shell completions and man
//! pages generated from the CLI definition itself (clap_complete,
//! clap_mangen), so they cannot drift from the flags. Not a documentation
//! source of its own: the text comes from the doc comments and `after_help`
//! of each subcommand.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `ktrace completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  ktrace completions bash > /etc/bash_completion.d/ktrace
  ktrace completions zsh > \"${fpath[1]}/_ktrace\"
  ktrace completions fish > ~/.config/fish/completions/ktrace.fish")]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `ktrace man`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  ktrace man | man -l -
  ktrace man --dir /usr/local/share/man/man1     ktrace.1 and ktrace-SUBCOMMAND.1")]
pub struct ManArgs {
    /// Write ktrace.1 and one ktrace-SUBCOMMAND.1 per subcommand into DIR
    /// instead of printing ktrace.1 to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Runs `ktrace completions`.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = crate::cli_command();
    // Generated into memory: clap_complete panics when its writer fails
    // (`>/dev/full` was a panic, exit 101).
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "ktrace", &mut buf);
    to_stdout(&buf)
}

/// Writes `bytes` to standard output: a reader that went away (`| head`)
/// is a quiet end, any other failure (a full disk) an error.
fn to_stdout(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => anyhow::bail!(
            "cannot write to standard output: {}",
            crate::output::describe(&e)
        ),
    }
}

/// The top page's own sections, after the generated ones: what a reader
/// of perf(1) or trace-cmd(1) expects to find (concepts, files, exit
/// status, examples, see also). Plain text, one paragraph per entry;
/// `(heading, [paragraphs])`, a paragraph starting with "  " is an example.
const TOP_SECTIONS: &[(&str, &[&str])] = &[
    (
        "DEFINITIONS",
        &[
            "A probe is defined in the kernel's own language (Documentation/trace/kprobetrace.rst, \
             uprobetracer.rst, fprobetrace.rst): p[:[GRP/]EVENT] SYM[+OFFS]|ADDR [FETCHARGS] for \
             a kprobe, r[MAXACTIVE] for a kretprobe, p PATH:OFFSET for a uprobe, e:SYS.EVENT for \
             an event probe. ktrace checks every definition exactly as the target kernel reads \
             it (its verdict, readback, error_log message and caret) before anything is written: \
             ktrace check shows that verdict, for the running kernel or offline (--arch, \
             --kernel, --kallsyms, --btf or --no-btf, --vmlinux).",
            "ktrace trace, record, count, hist and latency also take conveniences: a bare \
             function name, FUNC%return, argN for the N-th argument register of the \
             architecture, BTF names (file->f_flags, $arg*, typed $retval; compiled into the \
             classic fetch language on kernels that do not read them), and LIB:SYMBOL or \
             PATH:SYMBOL for user space (ELF symbols, ld.so.cache).",
        ],
    ),
    (
        "SESSIONS AND CLEANUP",
        &[
            "Every run works in its own event group and its own tracing instance, both named \
             ktrace_p<PID>_s<STARTTIME>_n<PIDNS> (unique per process, safe against pid reuse). \
             Enable, filter and trigger files are written only in that instance; nothing \
             ktrace did not create is ever touched. Everything is removed on every exit \
             (Ctrl-C, SIGTERM, SIGHUP, a closed pipe, a panic); after a SIGKILL the next run, or \
             ktrace clean, removes what the dead session left.",
            "What ktrace shows and writes (text, JSON, --raw, recordings, Perfetto, errors) \
             names the stable system ktrace, or --group NAME, or the group a definition wrote \
             (p:mygrp/ev ...), never the session's group: two recordings of the same probes \
             list the same events.",
            "Probes set at boot (ktrace boot, kprobe_event=) belong to no session: they live in \
             the group ktrace_boot and the top-level buffer, and only ktrace clean --boot \
             removes them.",
            "Aggregations (count, hist, latency) run in the kernel where it can (hist triggers, \
             synthetic events named after the session) and in ktrace otherwise; --engine \
             chooses.",
        ],
    ),
    (
        "FILES",
        &[
            "/sys/kernel/tracing (or /sys/kernel/debug/tracing): tracefs, mounted if needed. \
             Its README tells ktrace what the running kernel supports.",
            "/proc/kallsyms, /sys/kernel/btf/vmlinux and /sys/kernel/btf/MODULE: kernel names \
             and types. /proc/kcore: the code of a function probed at an offset.",
            "/proc/cmdline: the boot-time probes of this boot (ktrace report --boot).",
        ],
    ),
    (
        "EXIT STATUS",
        &[
            "0 on success. 1 on an error, a definition ktrace check rejects, or nothing \
             matched (ktrace list). 2 on a usage error (bad flags or arguments). 128+N when \
             ktrace trace was stopped by signal N other than SIGINT.",
        ],
    ),
    (
        "EXAMPLES",
        &[
            "Trace openat2 calls with the file name, in the kernel's trace format:",
            "  ktrace trace do_sys_openat2 dfd=arg1 'filename=+0(arg2):ustring'",
            "Calls of getenv() by one command, through a uprobe:",
            "  ktrace trace 'libc:getenv name=+0(arg1):string' -- /usr/bin/env true",
            "What the running kernel says of a definition, without writing it:",
            "  ktrace check 'p:myev vfs_read+4 count=%dx:u64'",
            "Time vfs_read per task for ten seconds:",
            "  ktrace latency vfs_read --by comm -d 10",
            "Record with stacks for trace-cmd, KernelShark and Perfetto:",
            "  ktrace record vfs_read --stack -d 5 -o read.dat",
            "Probes from the first moments of the next boot:",
            "  ktrace boot 'p:openat do_sys_openat2 path=+0(%si):ustring'",
        ],
    ),
    (
        "SEE ALSO",
        &[
            "trace-cmd(1), perf-probe(1), bpftrace(8), kernelshark(1); the kernel's \
           Documentation/trace/kprobetrace.rst, uprobetracer.rst, fprobetrace.rst, \
           eprobetrace.rst and ftrace.rst.",
        ],
    ),
];

/// Related pages of each subcommand, for its SEE ALSO.
fn related(sub: &str) -> &'static [&'static str] {
    match sub {
        "trace" => &["check", "record", "count", "clean"],
        "record" => &["report", "export", "trace"],
        "report" => &["record", "export", "boot"],
        "export" => &["record", "report"],
        "count" | "hist" | "latency" => &["trace", "count", "hist", "latency"],
        "check" => &["trace", "boot", "disasm", "syms"],
        "boot" => &["check", "report", "clean"],
        "clean" => &["trace", "boot", "list"],
        "list" => &["syms", "check", "clean"],
        "syms" | "disasm" => &["check", "list", "syms", "disasm"],
        _ => &[],
    }
}

/// `text` as a roff paragraph (escapes; a leading dot or quote protected).
fn roff_text(text: &str) -> String {
    let t = text.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with(['.', '\'']) {
        format!("\\&{t}")
    } else {
        t
    }
}

/// Renders one man page: clap's sections, then `sections`.
fn page_with(cmd: clap::Command, sections: &[(&str, Vec<String>)]) -> anyhow::Result<Vec<u8>> {
    let versioned = cmd.get_version().is_some() || cmd.get_long_version().is_some();
    let man_has_subcommands = cmd.has_subcommands();
    let man = clap_mangen::Man::new(cmd);
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    if man_has_subcommands {
        man.render_subcommands_section(&mut buf)?;
    }
    for (heading, paras) in sections {
        writeln!(buf, ".SH {heading}")?;
        for p in paras {
            if let Some(example) = p.strip_prefix("  ") {
                writeln!(buf, ".PP\n.RS 4\n.nf\n{}\n.fi\n.RE", roff_text(example))?;
            } else {
                writeln!(buf, ".PP\n{}", roff_text(p))?;
            }
        }
    }
    if versioned {
        man.render_version_section(&mut buf)?;
    }
    Ok(buf)
}

/// Help text as man-page paragraphs: indented lines are kept as laid out
/// (examples: one entry starting with "  " per block), other lines are
/// joined into paragraphs.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut para = String::new();
    let mut block = String::new();
    let flush = |s: &mut String, out: &mut Vec<String>, pre: bool| {
        if s.is_empty() {
            return;
        }
        if pre {
            // the block's own indentation goes, its inner alignment stays
            let cut = s
                .lines()
                .map(|l| l.len() - l.trim_start().len())
                .min()
                .unwrap_or(0);
            let body: Vec<&str> = s.lines().map(|l| &l[cut..]).collect();
            out.push(format!("  {}", body.join("\n")));
        } else {
            out.push(s.clone());
        }
        s.clear();
    };
    for line in text.lines() {
        if line.trim().is_empty() {
            flush(&mut para, &mut out, false);
            flush(&mut block, &mut out, true);
        } else if line.starts_with(char::is_whitespace) {
            flush(&mut para, &mut out, false);
            if !block.is_empty() {
                block.push('\n');
            }
            block.push_str(line);
        } else {
            flush(&mut block, &mut out, true);
            if !para.is_empty() {
                para.push(' ');
            }
            para.push_str(line.trim());
        }
    }
    flush(&mut para, &mut out, false);
    flush(&mut block, &mut out, true);
    out
}

/// The top page (`ktrace.1`).
fn page(cmd: clap::Command) -> anyhow::Result<Vec<u8>> {
    let sections: Vec<(&str, Vec<String>)> = TOP_SECTIONS
        .iter()
        .map(|(h, ps)| (*h, ps.iter().map(|p| p.to_string()).collect()))
        .collect();
    page_with(cmd, &sections)
}

/// A subcommand's page (`ktrace-NAME.1`): its synopsis reads `ktrace NAME`.
fn sub_page(sub: &clap::Command) -> anyhow::Result<Vec<u8>> {
    let name = sub.get_name().to_string();
    let cmd = sub
        .clone()
        .display_name(format!("ktrace-{name}"))
        .bin_name(format!("ktrace {name}"));
    let mut see: Vec<String> = vec!["ktrace(1)".to_string()];
    see.extend(
        related(&name)
            .iter()
            .filter(|r| **r != name)
            .map(|r| format!("ktrace-{r}(1)")),
    );
    let mut sections = Vec::new();
    // the subcommand's after-help (examples, notes), kept as laid out
    if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
        sections.push(("NOTES AND EXAMPLES", paragraphs(&after.to_string())));
    }
    sections.extend([
        (
            "EXIT STATUS",
            vec!["0 on success, 1 on an error, 2 on a usage error; see ktrace(1).".to_string()],
        ),
        ("SEE ALSO", vec![see.join(", ")]),
    ]);
    page_with(cmd, &sections)
}

/// Runs `ktrace man`.
pub fn man(args: ManArgs) -> anyhow::Result<ExitCode> {
    let cmd = crate::cli_command();
    match &args.dir {
        None => return to_stdout(&page(cmd)?),
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let mut written = vec![dir.join("ktrace.1")];
            std::fs::write(&written[0], page(cmd.clone())?)
                .with_context(|| format!("cannot write {}", written[0].display()))?;
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                let path = dir.join(format!("ktrace-{}.1", sub.get_name()));
                std::fs::write(&path, sub_page(sub)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                written.push(path);
            }
            for p in &written {
                crate::oline!("{}", p.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_page_carries_every_subcommand_and_the_trace_help() {
        let cmd = crate::cli_command();
        let text = String::from_utf8(page(cmd.clone()).unwrap()).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH ktrace"),
            "{text}"
        );
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            assert!(text.contains(sub.get_name()), "{} missing", sub.get_name());
        }
        for section in [
            "DEFINITIONS",
            "SESSIONS AND CLEANUP",
            "FILES",
            "EXIT STATUS",
            "SEE ALSO",
        ] {
            assert!(
                text.contains(&format!(".SH {section}")),
                "{section} missing"
            );
        }
        let trace = cmd.find_subcommand("trace").unwrap();
        let text = String::from_utf8(sub_page(trace).unwrap()).unwrap();
        assert!(text.contains("Exit codes"), "{text}");
        assert!(text.contains("libc:getenv"), "{text}");
        assert!(text.contains("\\-\\-stack"), "{text}");
        // the synopsis names the command as it is typed; the title is the page's
        assert!(text.contains("\\fBktrace trace\\fR"), "{text}");
        assert!(text.contains(".TH ktrace-trace 1"), "{text}");
        assert!(text.contains("ktrace\\-record(1)"), "{text}");
    }

    #[test]
    fn completions_name_the_subcommands_and_flags() {
        for shell in [clap_complete::Shell::Bash, clap_complete::Shell::Zsh] {
            let mut cmd = crate::cli_command();
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, "ktrace", &mut buf);
            let text = String::from_utf8(buf).unwrap();
            for word in ["trace", "check", "completions", "--stack", "--offline"] {
                assert!(text.contains(word), "{shell}: {word} missing");
            }
        }
    }
}
