//! The committed bindings must be exactly what bindgen makes of the current
//! header (the single-source rule the Python cdef follows too). Runs
//! `generate.sh` into a temporary file and compares.
//!
//! Without the `bindgen` CLI the test reports that it skipped, unless
//! `TETHER_REQUIRE_BINDGEN=1` (set by ci/rust.sh), which makes it fail instead.

use std::path::PathBuf;
use std::process::Command;

/// The bindings as tokens: whitespace and trailing commas removed. Whether
/// rustfmt laid the file out (and which version did) is no difference in the
/// bindings; bindgen without rustfmt writes the same tokens.
fn tokens(s: &str) -> String {
    let packed: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = String::with_capacity(packed.len());
    for (i, &c) in packed.iter().enumerate() {
        let closes = matches!(packed.get(i + 1), Some(')') | Some(']') | Some('}'));
        if !(c == ',' && closes) {
            out.push(c);
        }
    }
    out
}

#[test]
fn bindings_up_to_date() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let have_bindgen = Command::new("bindgen").arg("--version").output().is_ok();
    if !have_bindgen {
        if std::env::var("TETHER_REQUIRE_BINDGEN").as_deref() == Ok("1") {
            panic!("bindgen is not installed (apt-get install bindgen libclang1-14 libclang-common-14-dev)");
        }
        eprintln!("SKIPPED bindings_up_to_date: the bindgen CLI is not installed");
        return;
    }
    let include = std::env::var("TETHER_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| here.join("../../capi/include"));
    assert!(
        include.join("tether/tether.h").exists(),
        "no tether/tether.h under {} (set TETHER_INCLUDE_DIR)",
        include.display()
    );
    let out = std::env::temp_dir().join(format!("tether-sys-bindings-{}.rs", std::process::id()));
    let status = Command::new("sh")
        .arg(here.join("generate.sh"))
        .arg(&out)
        .arg(&include)
        .status()
        .expect("run generate.sh");
    assert!(status.success(), "generate.sh failed: {status}");
    let fresh = std::fs::read_to_string(&out).expect("read regenerated bindings");
    let _ = std::fs::remove_file(&out);
    let committed = std::fs::read_to_string(here.join("src/bindings.rs")).expect("read src/bindings.rs");
    if tokens(&fresh) != tokens(&committed) {
        let first = fresh
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| tokens(a) != tokens(b))
            .unwrap_or(0);
        panic!(
            "src/bindings.rs is stale: the header changed (first difference near line {}).\n\
             Regenerate with rust/tether-sys/generate.sh and commit the result.",
            first + 1
        );
    }
}

/// The committed bindings declare every function the library exports, so a
/// function added to the ABI without regenerating is caught even without bindgen.
#[test]
fn bindings_declare_every_header_function() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let include = here.join("../../capi/include/tether");
    let entries = match std::fs::read_dir(&include) {
        Ok(entries) => entries,
        Err(_) => {
            eprintln!("SKIPPED: no repository headers at {}", include.display());
            return;
        }
    };
    let committed = std::fs::read_to_string(here.join("src/bindings.rs")).unwrap();
    let mut missing = Vec::new();
    for e in entries {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) != Some("h") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for chunk in text.split("TETHER_API").skip(1) {
            let before_paren = chunk.split('(').next().unwrap_or("");
            let name = before_paren
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .rfind(|s| !s.is_empty())
                .unwrap_or("");
            if name.starts_with("tether_") && !committed.contains(&format!("pub fn {name}(")) {
                missing.push(name.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "functions missing from src/bindings.rs: {missing:?}"
    );
}
