//! A component of some other world, for the host's load-time check.

#[cfg(target_arch = "wasm32")]
mod guest {
    wit_bindgen::generate!({
        inline: "package test:other@1.0.0; world other { export hello: func() -> string; }",
    });

    struct Other;

    impl Guest for Other {
        fn hello() -> String {
            "I am not a dial handler".into()
        }
    }

    export!(Other);
}
