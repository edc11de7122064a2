//! `testenv/up-test.sh`: `scripts/testenv up` and `down` with stand-in
//! binaries, the run-etcd wrapper slowed before its exec (as under load):
//! `up` waits for it instead of declaring etcd dead. No Go build and no
//! real control plane; bounded by the script's own deadlines.

use std::path::Path;
use std::process::Command;

#[test]
fn testenv_up_waits_for_a_slow_wrapper_and_down_stops_it() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testenv/up-test.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env_remove("KATALOG_TESTENV_STATE")
        .env_remove("KATALOG_TESTENV_PARENT_PID")
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{} failed ({}):\nstdout: {}\nstderr: {}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
