//! The command line: `check-config`, `handler inspect` and `handler test`.

use std::path::Path;

use crate::support::Setup;

fn guest(name: &str) -> String {
    Path::new(dial_host::handlers::GUEST_WASM_DIR).join(format!("{name}.wasm")).display().to_string()
}

#[test]
fn check_config_reports_a_good_file_and_names_a_bad_key() {
    let setup = Setup::new();
    let good = setup.config("[encryption]\nsecret = \"s\"\n[keys.k1]\nproject = \"p\"\nroles = [\"user\"]\n");
    let (ok, stdout, stderr) = setup.run(&["check-config", "--config", good.to_str().unwrap()], &[]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(stdout.contains("skills (skill@"), "{stdout}");

    let bad = setup.config("[server]\nlisten = \"127.0.0.1:1\"\nlisten_port = 5\n");
    let (ok, _, stderr) = setup.run(&["check-config", "--config", bad.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(stderr.contains("listen_port"), "{stderr}");

    let short_lease = setup.config("[locks]\nttl_ms = 10\n");
    let (ok, _, stderr) = setup.run(&["check-config", "--config", short_lease.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(stderr.contains("locks.ttl_ms must be at least 300"), "{stderr}");

    for (settings, key) in [
        ("[folders]\nkeep_versions_days = -1.0\n", "folders.keep_versions_days"),
        ("[handlers.types.skills]\nkeep_versions_days = nan\n", "handlers.types.skills.keep_versions_days"),
    ] {
        let negative = setup.config(settings);
        let (ok, _, stderr) = setup.run(&["check-config", "--config", negative.to_str().unwrap()], &[]);
        assert!(!ok, "{settings}");
        assert!(stderr.contains(&format!("{key} must be a number of days, 0 or more")), "{stderr}");
    }

    let (ok, _, stderr) = setup.run(&["check-config", "--config", "/no/such/file.toml"], &[]);
    assert!(!ok);
    assert!(stderr.contains("does not exist"), "{stderr}");
}

#[test]
fn handler_inspect_describes_a_handler() {
    let setup = Setup::new();
    let (ok, stdout, stderr) = setup.run(&["handler", "inspect", &guest("dial_skill_handler")], &[]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("dial:handler@1.x — implemented"), "{stdout}");
    assert!(stdout.contains("group:   skills"), "{stdout}");
    assert!(stdout.contains("type:    skill"), "{stdout}");
}

#[test]
fn handler_inspect_rejects_other_components() {
    let setup = Setup::new();
    let (ok, stdout, _) = setup.run(&["handler", "inspect", &guest("not_a_handler")], &[]);
    assert!(!ok);
    assert!(stdout.contains("NOT implemented"), "{stdout}");

    let junk = setup.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm junk").unwrap();
    let (ok, stdout, _) = setup.run(&["handler", "inspect", junk.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(stdout.contains("not a valid WebAssembly component"), "{stdout}");
}

#[test]
fn handler_test_prints_the_verdict_for_a_local_folder() {
    let setup = Setup::new();
    let skill = setup.path().join("pdf-tools");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: pdf-tools\ndescription: Extract text from PDFs.\nmetadata:\n  version: \"1.2\"\n---\n# PDF\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/extract.py"), "print('hi')\n").unwrap();
    let handler = guest("dial_skill_handler");

    let (code, stdout, stderr) = setup.run_for_code(&["handler", "test", skill.to_str().unwrap(), &handler], &[]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("metadata version: 1.2"), "{stdout}");
    assert!(stdout.contains("verdict: valid"), "{stdout}");
    // In the order the handler gives (name, description, version), not sorted.
    let at = |key: &str| stdout.find(&format!("metadata {key}:")).unwrap_or_else(|| panic!("{key}: {stdout}"));
    assert!(at("name") < at("description") && at("description") < at("version"), "{stdout}");

    // A warning (name differs from the folder) passes, unless --strict.
    std::fs::write(skill.join("SKILL.md"), "---\nname: other\ndescription: d\n---\n").unwrap();
    let (code, stdout, _) = setup.run_for_code(&["handler", "test", skill.to_str().unwrap(), &handler], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("warning SKILL.md:"), "{stdout}");
    let (code, stdout, _) =
        setup.run_for_code(&["handler", "test", "--strict", skill.to_str().unwrap(), &handler], &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("verdict: invalid"), "{stdout}");

    std::fs::remove_file(skill.join("SKILL.md")).unwrap();
    let (code, stdout, _) = setup.run_for_code(&["handler", "test", skill.to_str().unwrap(), &handler], &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("SKILL.md"), "{stdout}");

    let (code, stdout, _) =
        setup.run_for_code(&["handler", "test", skill.to_str().unwrap(), &guest("not_a_handler")], &[]);
    assert_eq!(code, Some(2), "{stdout}");
    assert!(stdout.contains("does not implement the dial:handler@1.x world"), "{stdout}");

    // A handler that cannot be read is a handler failure (2), not an invalid folder (1).
    let (code, stdout, stderr) =
        setup.run_for_code(&["handler", "test", skill.to_str().unwrap(), "/no/such/missing.wasm"], &[]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stdout.contains("cannot read the handler /no/such/missing.wasm"), "{stdout}");
}

/// Junk is named for what it is (never dumped as bytes), and output into a
/// pipe that closes early (`| head`) ends the command quietly.
#[test]
fn handler_commands_say_what_junk_is_and_survive_a_closed_pipe() {
    let setup = Setup::new();
    let junk = setup.path().join("notes.txt.wasm");
    std::fs::write(&junk, "just some text, not WebAssembly at all\n".repeat(20)).unwrap();
    let (ok, stdout, _) = setup.run(&["handler", "inspect", junk.to_str().unwrap()], &[]);
    assert!(!ok);
    assert!(
        stdout.contains("not a WebAssembly component: the file does not start with the WebAssembly magic"),
        "{stdout}"
    );
    assert!(!stdout.contains("[") && stdout.len() < 400, "no byte dump: {stdout}");

    let mut child = std::process::Command::new(crate::support::binary())
        .args(["handler", "inspect", &guest("dial_skill_handler")])
        .env("DIAL_HOST_HANDLERS__CACHE_DIR", crate::support::shared_cache_dir())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before anything is written
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}
