//! rust/README.md's example is examples/readme.rs, verbatim (ci/rust.sh runs it).

#[test]
fn readme_example_is_the_example_program() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(dir.join("../README.md")).unwrap();
    let example = std::fs::read_to_string(dir.join("examples/readme.rs")).unwrap();
    let start = readme.find("```rust\n").expect("README has a ```rust block") + "```rust\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let body: String = example.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert_eq!(
        &readme[start..end],
        body,
        "README example and examples/readme.rs differ"
    );
}
