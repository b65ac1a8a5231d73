//! Nonsense in a scenario is refused when it is planned, with the field
//! named, instead of aborting the simulator (out of memory) or running
//! something meaningless.

use bfq_sim::Scenario;

const BASE: &str = r#"
name = "t"
duration = "2s"
"#;

/// Plans `BASE` + `extra`; returns the error's field and message.
fn refused(extra: &str) -> String {
    let text = format!("{BASE}{extra}");
    let sc = match Scenario::from_toml_str(&text, "test") {
        Ok(sc) => sc,
        Err(e) => return e.to_string(),
    };
    match sc.plan() {
        Ok(_) => panic!("accepted:\n{extra}"),
        Err(e) => e.to_string(),
    }
}

fn accepted(extra: &str) {
    let sc = Scenario::from_toml_str(&format!("{BASE}{extra}"), "test").unwrap();
    sc.plan().unwrap();
}

#[test]
fn nonsense_is_refused_naming_the_field() {
    let flow = "[[flow]]\nname = \"r\"\n";
    for (extra, field) in [
        (format!("[output]\nseries_interval = \"1ns\"\n{flow}"), "series_interval"),
        (
            "[[flow]]\nname = \"p\"\nperiodic = { every = \"40ms\", bytes = \"64k\", deadline = \"0\" }\n".into(),
            "deadline",
        ),
        (
            "[[flow]]\nname = \"p\"\nperiodic = { every = \"40ms\", bytes = \"64k\", warm_up = \"700000s\" }\n".into(),
            "periodic.warm_up",
        ),
        (
            "[[flow]]\nname = \"o\"\nblock = \"4k\"\non_off = { on = \"1\", off = \"10ms\" }\n".into(),
            "on_off.on",
        ),
        ("[[flow]]\nname = \"s\"\nstart = \"10000000000s\"\n".into(), "start"),
        ("[[flow]]\nname = \"\"\n".into(), "name"),
        (
            format!("{flow}[device]\nrate_outer = 50\nrate_inner = 80\n"),
            "rate_inner",
        ),
    ] {
        let e = refused(&extra);
        assert!(e.contains(field), "{extra}: '{e}' does not name {field}");
    }
}

#[test]
fn the_edges_are_accepted() {
    accepted("[output]\nseries_interval = \"1ms\"\n[[flow]]\nname = \"r\"\n");
    accepted("[[flow]]\nname = \"o\"\nblock = \"4k\"\non_off = { on = \"4k\", off = \"1ms\" }\n");
    accepted("[[flow]]\nname = \"s\"\nstart = \"1s\"\n");
}
