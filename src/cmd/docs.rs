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

/// Renders one man page.
fn page(cmd: clap::Command) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    Ok(buf)
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
            for sub in cmd.get_subcommands() {
                let name = format!("ktrace-{}", sub.get_name());
                let path = dir.join(format!("{name}.1"));
                // clap names are 'static; a few leaked bytes for a one-shot command.
                let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
                let sub = sub.clone().name(static_name);
                std::fs::write(&path, page(sub)?)
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
        let trace = cmd
            .find_subcommand("trace")
            .unwrap()
            .clone()
            .name("ktrace-trace");
        let text = String::from_utf8(page(trace).unwrap()).unwrap();
        assert!(text.contains("Exit codes"), "{text}");
        assert!(text.contains("libc:getenv"), "{text}");
        assert!(text.contains("\\-\\-stack"), "{text}");
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
