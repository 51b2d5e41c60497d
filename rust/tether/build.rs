//! Put an rpath to the libtether that tether-sys found into this crate's test,
//! example and doctest executables, so `cargo test` runs without LD_LIBRARY_PATH.
//! Uses std only.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TETHER_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_TETHER_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
