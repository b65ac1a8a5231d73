//! The example of docs/scheduler-interface.md is
//! `examples/interface.rs`, which `cargo test` compiles (up to spacing):
//! the snippet cannot drift into code that does not compile.

#[test]
fn the_documented_interface_snippet_is_the_compiled_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/scheduler-interface.md")).unwrap();
    let snippet = doc
        .split("```rust\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("a rust block in docs/scheduler-interface.md");
    let example = std::fs::read_to_string(root.join("examples/interface.rs")).unwrap();
    let code: String = example
        .lines()
        .filter(|l| !l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(squeeze(snippet), squeeze(&code));
}
