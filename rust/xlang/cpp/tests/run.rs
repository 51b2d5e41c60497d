//! Runs the xlang-cpp program (src/main.rs) and checks that it proved its case.

use std::process::Command;

#[test]
fn rust_and_cpp_share_one_table_in_every_release_order() {
    let out = Command::new(env!("CARGO_BIN_EXE_xlang-cpp"))
        .output()
        .expect("run xlang-cpp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("one table, 120 release orders"), "{stdout}");
}
