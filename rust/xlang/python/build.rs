//! rpath to the libtether that tether-sys linked (std only). When Python loads
//! this cdylib, its libtether is already loaded under the same SONAME, so the
//! dynamic linker binds to that one: one library, one table.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TETHER_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_TETHER_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
