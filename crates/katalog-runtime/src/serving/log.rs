//! The logs of `katalog serve`: a tracing subscriber writing to standard
//! error, where a write that fails is dropped.

/// Log format of `katalog serve`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Install the tracing subscriber (`RUST_LOG` filters; default `info`).
/// The logs go to standard error through [`LogWriter`]: a log line that
/// cannot be written is dropped.
pub fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: not in log files or collectors.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // tracing-subscriber reports a failed write with `eprintln!`, which
        // panics when standard error is the pipe that failed.
        .log_internal_errors(false)
        .with_writer(|| LogWriter);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Standard error for the logs, where a write that fails is dropped: once
/// the reader of a log pipe has gone (`katalog serve 2>&1 | head -2`, a
/// pod's log pipe that broke), every write fails with `EPIPE`, and a
/// logger that reports it (or panics on it) would take down whichever
/// thread logged — the signal handler's among them, leaving the server deaf
/// to SIGTERM. After the first broken pipe nothing more is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogWriter;

static LOG_PIPE_BROKEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering::Relaxed;
        if !LOG_PIPE_BROKEN.load(Relaxed)
            && let Err(e) = std::io::stderr().lock().write_all(buf)
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            LOG_PIPE_BROKEN.store(true, Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}
