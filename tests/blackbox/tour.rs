//! The README's tour, as the README writes it (`scripts/tour` reads the
//! commands from README.md), against the binary on its embedded default:
//! a README whose tour no longer works fails here. CI runs the same script
//! against the same binary inside the container image (`scripts/image-tour`).

use std::process::Command;

use crate::support::Setup;

#[test]
fn the_readme_tour_works_as_written() {
    let setup = Setup::new();
    let server = setup.start(None, &[]);
    let admin = server.banner_value("admin key:").expect("a generated admin key in the banner");
    let user = server.banner_value("user key:").expect("a generated user key in the banner");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/tour");
    let output =
        Command::new("bash").arg(script).args([&server.url, &admin, &user]).output().expect("run scripts/tour");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
