//! A handler built against `wit/handler.wit` as released at 1.0.0 (frozen in
//! `wit/` next to this file). The host's compatibility test loads it on the
//! current 1.x host and runs every export, so a WIT change that breaks 1.0.0
//! handlers fails the build's tests.

#[cfg(target_arch = "wasm32")]
mod guest {
    wit_bindgen::generate!({ world: "handler", path: "wit" });

    use dial::handler::files;
    use dial::handler::types::Limits;

    struct Notes;

    impl Guest for Notes {
        fn describe() -> Description {
            Description {
                type_name: "note".into(),
                group: "notes".into(),
                display_name: "Note (1.0.0 handler)".into(),
                handler_version: "1.0.0".into(),
                limits: Limits { max_file_bytes: None, max_files: None, max_total_bytes: None },
            }
        }

        fn validate(_resource: ResourceInfo, files: Vec<FileEntry>) -> Result<Vec<Problem>, Vec<Problem>> {
            match files.iter().find(|f| f.path == "NOTE.txt") {
                Some(_) => Ok(vec![]),
                None => Err(vec![Problem { path: None, message: "NOTE.txt is missing".into() }]),
            }
        }

        fn build_marker_metadata(
            _resource: ResourceInfo,
            _files: Vec<FileEntry>,
        ) -> Result<Vec<(String, String)>, Vec<Problem>> {
            let bytes = files::read("NOTE.txt", 0, 256)
                .map_err(|_| vec![Problem { path: Some("NOTE.txt".into()), message: "unreadable".into() }])?;
            let first_line = String::from_utf8_lossy(&bytes).lines().next().unwrap_or_default().to_string();
            Ok(vec![("title".into(), first_line)])
        }

        fn validate_file_mutation(path: String, op: Mutation) -> Result<(), Problem> {
            match (path.as_str(), op) {
                ("NOTE.txt", Mutation::Delete) => {
                    Err(Problem { path: Some(path), message: "NOTE.txt cannot be deleted".into() })
                }
                _ => Ok(()),
            }
        }
    }

    export!(Notes);
}
