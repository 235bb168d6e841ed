//! `ktrace export FILE --perfetto -o OUT`: a recording as a Perfetto trace
//! (protobuf, written by ktrace-perfetto; no Perfetto SDK), for Perfetto's
//! UI.
//!
//! Wiring only: the recording is replayed through the same merge and
//! decode as `ktrace report` (crate::cmd::report::open,
//! ktrace_stream::replay) into [`PerfettoSink`], which says what becomes a
//! slice, an instant, an argument and a stack. The records' time stamps are
//! the trace clock's, in ns. The export streams. The same sink serves
//! `ktrace trace --perfetto -o OUT` live.

use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use ktrace_perfetto::PerfettoSink;

use crate::kview::SavedSymbols;
use crate::outfile::{Input, OutFile};

/// Arguments of `ktrace export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trace.dat file (written by `ktrace record` or `trace-cmd record`);
    /// `-` (or a pipe) is read into a temporary file first.
    #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub file: PathBuf,
    /// Write a Perfetto trace (protobuf; the only format so far).
    #[arg(long, required = true)]
    pub perfetto: bool,
    /// Where to write it: written as OUT.partial beside it and renamed to
    /// OUT at the end (a failed export leaves OUT as it was); refused when it
    /// is the recording itself (also through a link) or not a regular file.
    #[arg(short = 'o', long, value_name = "OUT", required = true)]
    pub output: PathBuf,
}

/// Runs `ktrace export`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rec = crate::cmd::report::open(&args.file)?;
    let crate::cmd::report::Recording {
        meta,
        mut decoder,
        streams,
    } = rec;
    let symbols = SavedSymbols::with_strings(meta.kallsyms.clone(), meta.printk_formats.clone());
    let defs = crate::cmd::report::definitions(&meta);
    // Written to OUT.partial and renamed at the end: a failed export
    // leaves OUT as it was; an output that is the recording is refused.
    let mut out = OutFile::replace(&args.output, "the Perfetto trace", false)?;
    out.check_inputs(&[Input::new(&args.file, "the recording read")])?;
    out.start()?;
    let name = out.name();
    let mut sink = PerfettoSink::new(BufWriter::new(out.file()?), &symbols, defs);
    let end = ktrace_stream::replay(&mut decoder, streams, &mut sink);
    for w in decoder.take_warnings() {
        crate::say!("{w}");
    }
    let end = end.context("cannot export the recording")?;
    sink.close()
        .with_context(|| format!("cannot write {name}"))?;
    out.commit()?;
    crate::eline!(
        "ktrace: exported {} event(s) to {}",
        end.summary.events,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
