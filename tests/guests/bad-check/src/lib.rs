//! The 1.0 handler world plus a `check` export whose type is not the one
//! `dial:handler@1.2.0` gives it. The host must refuse it when it loads,
//! naming `check`, rather than fail the first commit.

#[cfg(target_arch = "wasm32")]
mod guest {
    wit_bindgen::generate!({
        inline: "package test:bad-check;
                 world bad-check {
                     include dial:handler/handler@1.0.0;
                     export check: func() -> string;
                 }",
        path: "../handler-1-0/wit",
        world: "test:bad-check/bad-check",
        generate_all,
    });

    use dial::handler::types::Limits;

    struct BadCheck;

    impl Guest for BadCheck {
        fn describe() -> Description {
            Description {
                type_name: "bad-check".into(),
                group: "bad-check".into(),
                display_name: "Handler with a mistyped check".into(),
                handler_version: "0.1.0".into(),
                limits: Limits { max_file_bytes: None, max_files: None, max_total_bytes: None },
            }
        }

        fn validate(_resource: ResourceInfo, _files: Vec<FileEntry>) -> Result<Vec<Problem>, Vec<Problem>> {
            Ok(vec![])
        }

        fn build_marker_metadata(
            _resource: ResourceInfo,
            _files: Vec<FileEntry>,
        ) -> Result<Vec<(String, String)>, Vec<Problem>> {
            Ok(vec![])
        }

        fn validate_file_mutation(_path: String, _op: Mutation) -> Result<(), Problem> {
            Ok(())
        }

        fn check() -> String {
            "not what a 1.2 host expects".into()
        }
    }

    export!(BadCheck);
}
