//! The engine's per-request trace of a run (`RunConfig::trace`, `bfq run
//! --trace FILE|-`): the simulator's CSV, written as the run goes through
//! an [`outfile::Replacing`] file that replaces FILE once the run has
//! finished.
//!
//! A trace that cannot be written whole (a write failing during the run,
//! as on a full disk, its last flush, or putting it in place at FILE)
//! does not fail the run: the run's report is complete and is still
//! returned, with the error in `RunReport::trace_error`, and FILE keeps
//! what it held before.

use crate::desc::RunConfig;
use crate::outfile::{self, Replacing};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Where the trace's lines go, and the first error writing them (the
/// lines after it are dropped: the trace is incomplete anyway).
pub(crate) struct Sink {
    w: io::BufWriter<Box<dyn Write + Send>>,
    failed: Option<io::Error>,
}

impl Sink {
    /// Writes one line, unless a write has already failed.
    pub(crate) fn line(&mut self, args: std::fmt::Arguments) {
        if self.failed.is_none() {
            if let Err(e) = self.w.write_fmt(args) {
                self.failed = Some(e);
            }
        }
    }
}

/// The trace as the engine's trace callback shares it.
pub(crate) type TraceOut = Arc<Mutex<Sink>>;

/// Opens `cfg.trace` (`-` for stdout) and writes the CSV header; `None`
/// without a trace. A file replaces what was at its path only in
/// [`finish`]: an interrupted run leaves the previous trace. A path that
/// cannot be written is an error naming it, before the run.
pub(crate) fn open(cfg: &RunConfig) -> io::Result<Option<(TraceOut, Option<Replacing>)>> {
    let Some(p) = &cfg.trace else {
        return Ok(None);
    };
    let (out, file): (Box<dyn Write + Send>, _) = if p.as_os_str() == "-" {
        (Box::new(io::stdout()), None)
    } else {
        let (file, w) = Replacing::create(p).map_err(|e| named_err(Some(p), e))?;
        (Box::new(w), Some(file))
    };
    let mut sink = Sink {
        w: io::BufWriter::with_capacity(1 << 20, out),
        failed: None,
    };
    sink.line(format_args!("t_ns,event,flow,req,sector,sectors,op\n"));
    Ok(Some((Arc::new(Mutex::new(sink)), file)))
}

/// Flushes the trace and puts the file at its path (`path`, as given).
/// An error says what failed and that the trace was not written whole;
/// the file is then dropped, so a file at `path` keeps its content.
pub(crate) fn finish(
    path: Option<&Path>,
    out: TraceOut,
    file: Option<Replacing>,
) -> Result<(), String> {
    let mut sink = out.lock().unwrap_or_else(|p| p.into_inner());
    let done = match sink.failed.take() {
        Some(e) => Err(e),
        None => sink.w.flush(),
    };
    drop(sink);
    let done = done.and_then(|()| file.map_or(Ok(()), outfile::Replacing::finish));
    done.map_err(|e| {
        format!(
            "trace {}: {e}: the trace was not written whole (the run itself completed)",
            path.map_or("-".into(), |p| p.display().to_string())
        )
    })
}

/// `e` with the path it is about in front.
pub(crate) fn named_err(p: Option<&Path>, e: io::Error) -> io::Error {
    let name = p.map(|p| p.display().to_string()).unwrap_or_default();
    io::Error::new(e.kind(), format!("{name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::Backend;
    use std::time::Duration;

    fn cfg(trace: &Path) -> RunConfig {
        let mut cfg = RunConfig::new(
            Path::new("x"),
            Backend::Engine {
                scheduler: "fifo".into(),
                settings: Default::default(),
            },
            Duration::from_secs(1),
        );
        cfg.trace = Some(trace.to_path_buf());
        cfg
    }

    /// A trace whose directory went away during the run cannot be linked
    /// at its path: `finish` says so, naming it, rather than panicking or
    /// pretending. Fails with `finish` ignoring `Replacing::finish`'s
    /// result.
    #[test]
    fn a_trace_that_cannot_be_put_in_place_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("t.csv");
        let (out, file) = open(&cfg(&path)).unwrap().unwrap();
        out.lock().unwrap().line(format_args!("1,Q,a,0,0,8,R\n"));
        std::fs::remove_dir(&sub).unwrap();
        let e = finish(Some(&path), out, file).unwrap_err();
        assert!(
            e.contains("t.csv") && e.contains("not written whole"),
            "{e}"
        );
    }

    /// A write failing during the run is kept and reported at the end,
    /// though the final flush succeeds. Fails with `Sink::line` dropping
    /// the error.
    #[test]
    fn a_failed_write_during_the_run_is_reported() {
        let sink = Sink {
            w: io::BufWriter::with_capacity(1, Box::new(FailsOnce(true))),
            failed: None,
        };
        let out = Arc::new(Mutex::new(sink));
        out.lock().unwrap().line(format_args!("1,Q,a,0,0,8,R\n"));
        out.lock().unwrap().line(format_args!("2,D,a,0,0,8,R\n"));
        let e = finish(None, out, None).unwrap_err();
        assert!(e.contains("trace -: disk full"), "{e}");
    }

    /// A writer whose first write fails, the later ones succeed.
    struct FailsOnce(bool);
    impl Write for FailsOnce {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if std::mem::take(&mut self.0) {
                return Err(io::Error::other("disk full"));
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
