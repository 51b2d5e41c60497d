//! Runs the xlang-cpp program (src/main.rs) and checks that it proved its case.

use std::process::Command;

#[test]
fn rust_and_cpp_share_one_table_in_every_release_order() {
    // The library the program loads is usable from here too. (This also makes
    // the test executable itself link libtether, which older rustc needs: it
    // links the package's C++ archive, which calls libtether, into every target.)
    tether::check_library().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xlang-cpp"))
        .output()
        .expect("run xlang-cpp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("one table, 120 release orders"), "{stdout}");
}
