//! Compile cpp/side.cpp (C++17, using the header-only wrapper tether/tether.hpp)
//! into a static library with the system's `c++` and `ar` (std::process::Command:
//! no `cc` crate, no registry), and link it with libstdc++ into the program.
//! The headers come from tether-sys (DEP_TETHER_INCLUDE), else the repository's
//! capi/include. `CXX` and `AR` override the tools.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed: {status}");
}

fn main() {
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let source = here.join("cpp/side.cpp");
    println!("cargo:rerun-if-changed={}", source.display());
    for var in ["CXX", "AR", "DEP_TETHER_INCLUDE", "DEP_TETHER_LIB_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let include = env::var_os("DEP_TETHER_INCLUDE")
        .map(PathBuf::from)
        .filter(|p| p.join("tether/tether.hpp").exists())
        .unwrap_or_else(|| here.join("../../../capi/include"));
    println!("cargo:rerun-if-changed={}", include.join("tether").display());

    let cxx = env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let ar = env::var("AR").unwrap_or_else(|_| "ar".to_string());
    let object = out.join("side.o");
    run(Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-fPIC", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", include.display()))
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(&object));
    let archive = out.join("libxlang_side.a");
    let _ = std::fs::remove_file(&archive);
    run(Command::new(&ar).arg("crs").arg(&archive).arg(&object));

    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=xlang_side");
    println!("cargo:rustc-link-lib=dylib=stdc++");
    if let Ok(dir) = env::var("DEP_TETHER_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
