//! Property tests (proptest) for the parsers every request goes through:
//! resource URLs, file paths inside a resource, marker documents and bucket
//! ids. Each runs a few hundred cases in well under a second.

use std::collections::BTreeMap;

use dial_host::buckets::{BucketCodec, BucketLocation};
use dial_host::folders::layout::NodePaths;
use dial_host::folders::marker::{FileRecord, MarkerState, ResourceMarker, VersionRecord};
use dial_host::folders::names::check_file_path;
use dial_host::resource_url::{Intent, ResourceUrl, SEGMENT_ESCAPES};
use object_store::path::PathPart;
use percent_encoding::utf8_percent_encode;
use proptest::prelude::*;

/// Any string, biased toward the characters URL and path rules care about.
fn tricky_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("/".to_string()),
        Just(".".to_string()),
        Just("..".to_string()),
        Just("%".to_string()),
        Just("%2F".to_string()),
        Just("%2E".to_string()),
        Just("\\".to_string()),
        Just("C:".to_string()),
        Just("{".to_string()),
        Just("\u{0}".to_string()),
        Just(" ".to_string()),
        Just("é".to_string()),
        "[a-zA-Z0-9_-]{1,4}",
        any::<char>().prop_map(String::from),
    ];
    proptest::collection::vec(pieces, 0..12).prop_map(|parts| parts.concat())
}

/// A segment a client may name: any text without `/` and not empty.
fn segment() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 1..12).prop_map(|chars| chars.into_iter().collect::<String>())
}

fn location() -> impl Strategy<Value = BucketLocation> {
    let id = "[a-zA-Z0-9@._:|-]{1,24}".prop_filter("no / in ids", |id| !id.contains('/'));
    prop_oneof![
        id.clone().prop_map(BucketLocation::User),
        id.clone().prop_map(BucketLocation::Key),
        Just(BucketLocation::Public),
        (id.clone(), "[a-zA-Z0-9]{1,12}")
            .prop_map(|(user, publication)| { BucketLocation::User(user).review(&publication) }),
    ]
}

proptest! {
    // No regression files: CI runs on clean clones.
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever is accepted has one canonical form that parses to itself.
    #[test]
    fn url_canonical_form_round_trips(raw in tricky_text(), write in any::<bool>()) {
        let intent = if write { Intent::Write } else { Intent::Read };
        let raw = format!("files/bucket1/{raw}");
        if let Ok(url) = ResourceUrl::parse(&raw, intent) {
            let canonical = url.to_string();
            let again = ResourceUrl::parse(&canonical, intent).expect("the canonical form parses");
            prop_assert_eq!(&again, &url);
            prop_assert_eq!(again.to_string(), canonical);
        }
    }

    /// Encoding decoded segments and parsing them back gives the same
    /// segments (decode ⇄ encode), or a refusal naming the segment.
    #[test]
    fn url_segments_survive_encode_then_decode(segments in proptest::collection::vec(segment(), 1..5), folder in any::<bool>()) {
        let encoded: Vec<String> =
            segments.iter().map(|s| utf8_percent_encode(s, SEGMENT_ESCAPES).to_string()).collect();
        let raw = format!("skills/bucket1/{}{}", encoded.join("/"), if folder { "/" } else { "" });
        match ResourceUrl::parse(&raw, Intent::Read) {
            Ok(url) => {
                prop_assert_eq!(url.segments(), segments.as_slice());
                prop_assert_eq!(url.is_folder(), folder);
                prop_assert_eq!(url.to_string(), raw);
            }
            Err(error) => {
                // Only the segment rules refuse: control characters, braces, `.`/`..`.
                let refused = segments.iter().any(|s| {
                    s.chars().any(char::is_control) || s.contains(['{', '}', '/']) || s == "." || s == ".."
                });
                prop_assert!(refused, "{raw} refused: {error}");
            }
        }
    }

    /// No accepted URL escapes its bucket: its storage path is the bucket's
    /// prefix, the group and one object-store part per segment, none of
    /// which is `.`, `..` or empty.
    #[test]
    fn no_accepted_url_escapes_its_bucket(raw in tricky_text(), location in location()) {
        let Ok(url) = ResourceUrl::parse(&format!("files/bucket1/{raw}"), Intent::Read) else { return Ok(()) };
        // The bucket's own parts, as the object store spells them.
        let prefix: Vec<String> = location
            .to_string()
            .split('/')
            .filter(|p| !p.is_empty())
            .map(|p| PathPart::from(p).as_ref().to_string())
            .collect();
        let paths = NodePaths::new(&url, &location);
        let parts: Vec<String> = paths.base().parts().map(|p| p.as_ref().to_string()).collect();
        prop_assert_eq!(parts.len(), prefix.len() + 1 + url.segments().len(), "{:?}", parts);
        prop_assert_eq!(&parts[..prefix.len()], prefix.as_slice());
        prop_assert_eq!(parts[prefix.len()].as_str(), "files");
        for part in &parts {
            prop_assert!(!part.is_empty() && part != "." && part != "..", "{:?}", parts);
        }
        for segment in url.segments() {
            prop_assert!(segment != "." && segment != ".." && !segment.contains('/'));
        }
    }

    /// A file path inside a resource is accepted only if it stays inside it:
    /// relative, `/`-separated, no empty, `.` or `..` segment, no drive
    /// letter, no control characters.
    #[test]
    fn accepted_file_paths_stay_inside_the_resource(path in tricky_text()) {
        if check_file_path(&path).is_ok() {
            prop_assert!(!path.starts_with('/') && !path.contains('\\'));
            prop_assert!(!path.chars().any(char::is_control));
            let bytes = path.as_bytes();
            prop_assert!(!(bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'));
            for segment in path.split('/') {
                prop_assert!(!segment.is_empty() && segment != "." && segment != "..", "{path}");
            }
        }
    }

    /// Marker documents: any bytes decode to a marker or an error, never a
    /// panic; a marker survives its own serialization.
    #[test]
    fn marker_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = serde_json::from_slice::<ResourceMarker>(&bytes);
    }

    #[test]
    fn markers_round_trip(
        files in proptest::collection::btree_map("[a-z/._-]{1,12}", (any::<u64>(), "[0-9a-f]{32}"), 0..6),
        metadata in proptest::collection::vec(("[a-z]{1,6}", any::<String>()), 0..4),
        deleted in any::<Option<i64>>(),
        author in any::<Option<String>>(),
        history in proptest::collection::vec(("[a-z0-9-]{1,36}", any::<i64>(), any::<Option<String>>(), any::<Option<i64>>()), 0..4),
    ) {
        let marker = ResourceMarker {
            type_name: "skill".into(),
            schema_version: 1,
            state: if deleted.is_some() { MarkerState::Deleting } else { MarkerState::Ready },
            current_version: "v1".into(),
            etag: "e".into(),
            created_at: 1,
            updated_at: 2,
            author: author.clone(),
            deleted_at: deleted,
            purged_at: None,
            commit_id: "c".into(),
            metadata: metadata.into_iter().collect(),
            warnings: Vec::new(),
            files: files.into_iter().map(|(path, (size, etag))| (path, FileRecord { etag, size, sha256: None })).collect::<BTreeMap<_, _>>(),
            committed_at: deleted,
            committed_by: author.clone(),
            history: history
                .into_iter()
                .map(|(version, created_at, author, keep_until)| VersionRecord {
                    version, etag: "e".into(), created_at, author, files: 3, bytes: 42, keep_until, number: None, metadata: Default::default(),
                })
                .collect(),
            number: None,
            last_number: None,
            display_name: None,
            archive: None,
        };
        let decoded: ResourceMarker = serde_json::from_slice(&marker.to_json()).expect("a marker decodes");
        prop_assert_eq!(decoded, marker);
    }

    /// Bucket ids: any string decodes to a location or `invalid bucket`,
    /// never a panic; every location round-trips through its id.
    #[test]
    fn bucket_ids_decode_or_refuse(id in tricky_text()) {
        let codec = BucketCodec::new("property-secret");
        let _ = codec.decode(&id);
    }

    #[test]
    fn bucket_ids_round_trip(location in location()) {
        let codec = BucketCodec::new("property-secret");
        let id = codec.encode(&location);
        prop_assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
        prop_assert_eq!(codec.decode(&id).expect("its own id decodes"), location.clone());
        // Another secret's codec never accepts it (ids are authenticated).
        if location != BucketLocation::Public {
            prop_assert!(BucketCodec::new("another-secret").decode(&id).is_err());
        }
    }
}
