//! Recording a test that skips itself (not root, a tool missing), so that
//! a run that passes says how much it did not check. Shared by every
//! crate's tests through `#[path]` (ferroce-verbs' and ferroce-rdmacm's
//! through `tests/shared`, ferroce-cli's through `tests/common`, ferroce's
//! and ferroce-io's directly).
//!
//! [`skip`] says the reason on stderr (cargo shows it for a failing test,
//! and with `--nocapture`) and, when `FERROCE_SKIP_LOG` names a file,
//! appends one line `<test binary>::<test name>: <reason>` to it;
//! `scripts/test.sh` sets it and counts the lines, grouped by reason.
//! Keep a reason the same words at every site that skips for it.

use std::io::Write;

/// The variable naming the file skips are appended to.
const SKIP_LOG: &str = "FERROCE_SKIP_LOG";

/// The running test skips (part of) itself for `reason`.
pub(crate) fn skip(reason: &str) {
    // The test harness names each test's thread after the test.
    let thread = std::thread::current();
    let test = format!(
        "{}::{}",
        env!("CARGO_CRATE_NAME"),
        thread.name().unwrap_or("?")
    );
    eprintln!("SKIPPED {test}: {reason}");
    let Some(path) = std::env::var_os(SKIP_LOG) else {
        return;
    };
    // One write per line: tests run in parallel threads and processes.
    let line = format!("{test}: {reason}\n");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    if let Err(e) = file.and_then(|mut f| f.write_all(line.as_bytes())) {
        eprintln!("{SKIP_LOG}={}: {e}", path.to_string_lossy());
    }
}
