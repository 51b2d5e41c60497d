//! Find libtether and tell cargo to link it. Uses std only (no build dependencies).
//!
//! The library is looked for in this order; the first that answers wins:
//!
//! 1. `TETHER_LIB_DIR`: a directory holding `libtether.so` (headers from
//!    `TETHER_INCLUDE_DIR`, else `$TETHER_LIB_DIR/../include` if it exists);
//! 2. pkg-config: `pkg-config --variable=libdir tether` (and `includedir`);
//!    `$PKG_CONFIG` names another pkg-config (`PKG_CONFIG=false` skips this step);
//! 3. the Python package: `tether.get_library()` / `tether.get_include()`, run
//!    with `$TETHER_PYTHON` (default `python3`). Linking that file makes Rust
//!    share the table with Python code that imports the same package.
//!
//! Emitted for dependents (their build scripts read `DEP_TETHER_LIB_DIR` and
//! `DEP_TETHER_INCLUDE`): the library and include directories. An rpath to the
//! library directory is added to this crate's own tests; dependents that build
//! executables add it themselves (see the `tether` crate's build.rs).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Found {
    lib_dir: PathBuf,
    /// How to name the library to the linker: `tether` (libtether.so) or, where
    /// only the SONAME file exists (the Python wheel ships libtether.so.0), that
    /// file name, linked verbatim.
    link_name: String,
    include_dir: Option<PathBuf>,
    how: &'static str,
}

/// The link name of libtether in `dir`, if it holds one.
fn library_in(dir: &Path) -> Option<String> {
    if dir.join("libtether.so").exists() || dir.join("libtether.dylib").exists() {
        return Some("tether".to_string());
    }
    // libtether.so.<ABI>: the SONAME file, e.g. libtether.so.0 (not libtether.so.0.1.0).
    let mut sonames: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            matches!(n.strip_prefix("libtether.so."), Some(v) if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()))
        })
        .collect();
    sonames.sort();
    sonames.pop()
}

fn from_env() -> Option<Found> {
    let dir = PathBuf::from(env::var_os("TETHER_LIB_DIR")?);
    let link_name = library_in(&dir).unwrap_or_else(|| {
        panic!(
            "tether-sys: TETHER_LIB_DIR={} holds no libtether.so (build tether with CMake, \
             or point TETHER_LIB_DIR at the directory of libtether.so)",
            dir.display()
        )
    });
    let include_dir = env::var_os("TETHER_INCLUDE_DIR")
        .map(PathBuf::from)
        .or_else(|| Some(dir.join("..").join("include")).filter(|p| p.join("tether").is_dir()));
    Some(Found {
        lib_dir: dir,
        link_name,
        include_dir,
        how: "TETHER_LIB_DIR",
    })
}

fn run(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn from_pkg_config() -> Option<Found> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let libdir = run(Command::new(&pkg_config).args(["--variable=libdir", "tether"]))?;
    let dir = PathBuf::from(libdir.trim());
    let link_name = library_in(&dir)?;
    let include_dir = run(Command::new(&pkg_config).args(["--variable=includedir", "tether"]))
        .map(|s| PathBuf::from(s.trim()))
        .filter(|p| !p.as_os_str().is_empty());
    Some(Found {
        lib_dir: dir,
        link_name,
        include_dir,
        how: "pkg-config",
    })
}

fn from_python() -> Option<Found> {
    let python = env::var("TETHER_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let text = run(Command::new(python).args([
        "-c",
        "import tether; print(tether.get_library()); print(tether.get_include())",
    ]))?;
    let mut lines = text.lines();
    let library = PathBuf::from(lines.next()?.trim());
    let include_dir = lines.next().map(|s| PathBuf::from(s.trim()));
    let dir = library.parent()?.to_path_buf();
    let link_name = library_in(&dir)?;
    Some(Found {
        lib_dir: dir,
        link_name,
        include_dir,
        how: "python tether.get_library()",
    })
}

fn main() {
    for var in [
        "TETHER_LIB_DIR",
        "TETHER_INCLUDE_DIR",
        "TETHER_PYTHON",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG",
        // The Python fallback asks `python3 -c "import tether"`: where it
        // imports from follows these too.
        "PYTHONPATH",
        "PATH",
        "VIRTUAL_ENV",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let found = from_env()
        .or_else(from_pkg_config)
        .or_else(from_python)
        .unwrap_or_else(|| {
            panic!(
                "tether-sys: libtether not found. Set TETHER_LIB_DIR to the directory of \
             libtether.so (e.g. build/release/capi of a CMake build), or install a tether.pc \
             for pkg-config, or `pip install` the tether Python package into the python3 \
             on PATH (or the one named by TETHER_PYTHON)."
            )
        });
    let lib_dir = found.lib_dir.canonicalize().unwrap_or(found.lib_dir);
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    if found.link_name == "tether" {
        println!("cargo:rustc-link-lib=dylib=tether");
    } else {
        // -l:libtether.so.0 (GNU ld): link the SONAME file itself.
        println!("cargo:rustc-link-lib=dylib:+verbatim={}", found.link_name);
    }
    // For this crate's own test executables (dependents add their own rpath).
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    // Metadata for dependents: DEP_TETHER_LIB_DIR, DEP_TETHER_INCLUDE, DEP_TETHER_FOUND_BY.
    println!("cargo:lib_dir={}", lib_dir.display());
    if let Some(inc) = found.include_dir {
        println!("cargo:include={}", inc.display());
    }
    println!("cargo:found_by={}", found.how);
}
