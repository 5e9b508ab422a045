//! The handler runtime with real components: the built-in skill handler and
//! the test guests, loaded through the same path the server uses.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dial_host::config::{HandlersConfig, TypeSettings};
use dial_host::handlers::{
    BUILTIN_SKILL_HANDLER, CacheConfig, Checked, FileSource, GUEST_WASM_DIR, Handler, HandlerErrorKind,
    HandlerRegistry, HandlerSource, InMemoryFiles, LoadError, Mutation, RegistryError, ResourceInfo, Runtime,
    RuntimeLimits, Verdict,
};
use sha2::Digest;

const SKILL_MD: &str = "---\nname: pdf-tools\ndescription: Extract text and tables from PDF files.\nlicense: MIT\nmetadata:\n  version: \"1.2\"\n---\n# PDF tools\n\nUse this skill when…\n";

fn guest(name: &str) -> PathBuf {
    PathBuf::from(GUEST_WASM_DIR).join(format!("{name}.wasm"))
}

fn limits() -> RuntimeLimits {
    RuntimeLimits {
        cpu_deadline: Duration::from_millis(100),
        wall_deadline: Duration::from_secs(20),
        memory_limit_bytes: 32 << 20,
        read_budget_bytes: 4 << 20,
        max_concurrent_calls: 4,
        memory_keep_resident_bytes: 0,
    }
}

fn config_with(dir: Option<PathBuf>, types: &[(&str, bool)]) -> HandlersConfig {
    HandlersConfig {
        dir,
        types: types
            .iter()
            .map(|(group, strict)| (group.to_string(), TypeSettings { strict: *strict, ..TypeSettings::default() }))
            .collect(),
        ..HandlersConfig::default()
    }
}

/// A registry holding the built-in skill handler and the misbehaving guest.
async fn registry(types: &[(&str, bool)]) -> HandlerRegistry {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(guest("misbehaving_guest"), dir.path().join("misbehaving.wasm")).unwrap();
    let runtime = Runtime::new(limits(), None, true).unwrap();
    HandlerRegistry::load(runtime, &config_with(Some(dir.path().into()), types)).await.unwrap()
}

fn skill_files(skill_md: &str) -> Arc<InMemoryFiles> {
    let mut files = InMemoryFiles::new();
    files.insert("SKILL.md", skill_md.to_string()).insert("scripts/extract.py", "print('hi')\n");
    Arc::new(files)
}

fn resource(name: &str) -> ResourceInfo {
    ResourceInfo { name: name.into(), path: format!("team/{name}") }
}

async fn validate(
    handler: &Handler,
    name: &str,
    files: Arc<InMemoryFiles>,
) -> Result<Verdict, dial_host::handlers::HandlerError> {
    let entries = files.entries();
    handler.validate(&resource(name), &entries, files as Arc<dyn FileSource>).await
}

async fn check(
    handler: &Handler,
    name: &str,
    files: Arc<InMemoryFiles>,
) -> Result<Checked, dial_host::handlers::HandlerError> {
    let entries = files.entries();
    handler.check(&resource(name), &entries, files as Arc<dyn FileSource>).await
}

async fn assert_skill_handler_works(registry: &HandlerRegistry) {
    let skills = &registry.get("skills").unwrap();
    let verdict = validate(skills, "pdf-tools", skill_files(SKILL_MD)).await.unwrap();
    assert_eq!(verdict, Verdict::Valid { warnings: vec![] });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_handler_validates_and_builds_metadata() {
    let registry = registry(&[]).await;
    let skills = &registry.get("skills").expect("built-in skill handler");
    let description = skills.description();
    assert_eq!((description.type_name.as_str(), description.group.as_str()), ("skill", "skills"));
    assert_eq!(skills.source(), &HandlerSource::Builtin);

    assert_skill_handler_works(&registry).await;

    let files = skill_files(SKILL_MD);
    let entries = files.entries();
    let metadata = skills.build_marker_metadata(&resource("pdf-tools"), &entries, files).await.unwrap().unwrap();
    assert_eq!(metadata["name"], "pdf-tools");
    assert_eq!(metadata["description"], "Extract text and tables from PDF files.");
    assert_eq!(metadata["version"], "1.2");
    assert_eq!(metadata["license"], "MIT");

    let mut no_skill_md = InMemoryFiles::new();
    no_skill_md.insert("README.md", "hello");
    let Verdict::Invalid { problems } = validate(skills, "x", Arc::new(no_skill_md)).await.unwrap() else {
        panic!("a skill without SKILL.md must be invalid")
    };
    assert!(problems[0].message.contains("SKILL.md"), "{problems:?}");

    let delete = skills.validate_file_mutation("SKILL.md", Mutation::Delete).await.unwrap();
    assert!(delete.unwrap_err().message.contains("cannot be deleted"));
    assert_eq!(skills.validate_file_mutation("scripts/extract.py", Mutation::Delete).await.unwrap(), Ok(()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_are_accepted_unless_the_type_is_strict() {
    let display_name = SKILL_MD.replace("name: pdf-tools", "name: PDF Tools");
    let lenient = registry(&[]).await;
    let Verdict::Valid { warnings } =
        validate(&lenient.get("skills").unwrap(), "pdf-tools", skill_files(&display_name)).await.unwrap()
    else {
        panic!("a display name is a warning, not an error")
    };
    assert!(!warnings.is_empty());

    let strict = registry(&[("skills", true)]).await;
    let handler = &strict.get("skills").unwrap();
    assert!(handler.is_strict());
    let Verdict::Invalid { problems } = validate(handler, "pdf-tools", skill_files(&display_name)).await.unwrap()
    else {
        panic!("strict turns warnings into errors")
    };
    assert_eq!(problems, warnings);
    let Checked::Invalid { problems } = check(handler, "pdf-tools", skill_files(&display_name)).await.unwrap() else {
        panic!("strict turns warnings into errors in a commit's check too")
    };
    assert_eq!(problems, warnings);
}

/// A commit asks a 1.2 handler once (`check`): the same warnings, metadata
/// and problems as `validate` then `build-marker-metadata`, valid or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_is_one_check_call_that_agrees_with_validate_and_metadata() {
    let registry = registry(&[]).await;
    let skills = &registry.get("skills").unwrap();
    assert!(skills.has_check(), "the built-in handler is built against WIT 1.2");
    let mut no_skill_md = InMemoryFiles::new();
    no_skill_md.insert("README.md", "hello");
    let cases = [
        skill_files(SKILL_MD),
        skill_files(&SKILL_MD.replace("name: pdf-tools", "name: PDF Tools")),
        skill_files(&SKILL_MD.replace("description: Extract text and tables from PDF files.\n", "")),
        Arc::new(no_skill_md),
    ];
    for files in cases {
        let entries = files.entries();
        let source = || files.clone() as Arc<dyn FileSource>;
        let expected = match skills.validate(&resource("pdf-tools"), &entries, source()).await.unwrap() {
            Verdict::Valid { warnings } => {
                let metadata = skills.build_marker_metadata(&resource("pdf-tools"), &entries, source()).await;
                Checked::Valid { warnings, metadata: metadata.unwrap().unwrap() }
            }
            Verdict::Invalid { problems } => Checked::Invalid { problems },
        };
        assert_eq!(check(skills, "pdf-tools", files.clone()).await.unwrap(), expected);
    }
}

/// The sandbox holds through `check` as through the 1.0 exports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_limits_hold_through_check() {
    let registry = registry(&[]).await;
    let misbehaving = &registry.get("misbehaving").unwrap();
    assert!(misbehaving.has_check());
    let empty = || Arc::new(InMemoryFiles::new());
    let error = check(misbehaving, "loop", empty()).await.unwrap_err();
    assert_eq!(error.kind, HandlerErrorKind::CpuLimit { limit_ms: 100 });
    let error = check(misbehaving, "hog", empty()).await.unwrap_err();
    assert_eq!(error.kind, HandlerErrorKind::MemoryLimit { limit_mib: 32 });
    let error = check(misbehaving, "panic", empty()).await.unwrap_err();
    assert!(matches!(&error.kind, HandlerErrorKind::Trapped { detail } if detail.contains("panicked on purpose")));
    let mut big = InMemoryFiles::new();
    big.insert("big.bin", vec![7u8; 1 << 20]);
    let Checked::Invalid { problems } = check(misbehaving, "greedy", Arc::new(big)).await.unwrap() else {
        panic!("the guest reports the refused read")
    };
    assert!(problems[0].message.contains("BudgetExceeded(4194304)"), "{problems:?}");
    let fine = check(misbehaving, "fine", empty()).await.unwrap();
    let expected = [("name".to_string(), "fine".to_string())].into_iter().collect();
    assert_eq!(fine, Checked::Valid { warnings: vec![], metadata: expected });
    assert_skill_handler_works(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_hits_the_cpu_deadline_and_the_host_keeps_serving() {
    let registry = registry(&[]).await;
    let misbehaving = &registry.get("misbehaving").unwrap();
    let error = validate(misbehaving, "loop", Arc::new(InMemoryFiles::new())).await.unwrap_err();
    // The CPU deadline (100 ms), not the 20 s wall bound, stopped it.
    assert_eq!(error.kind, HandlerErrorKind::CpuLimit { limit_ms: 100 });
    assert_eq!(error.handler, "misbehaving@0.1.0");
    assert_eq!(error.to_string(), "handler 'misbehaving@0.1.0' exceeded its CPU time limit of 100 ms");
    assert!(error.caused_by_input());

    assert_skill_handler_works(&registry).await;
    assert!(matches!(validate(misbehaving, "fine", Arc::new(InMemoryFiles::new())).await, Ok(Verdict::Valid { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_hog_hits_the_memory_cap() {
    let registry = registry(&[]).await;
    let error =
        validate(&registry.get("misbehaving").unwrap(), "hog", Arc::new(InMemoryFiles::new())).await.unwrap_err();
    assert_eq!(error.kind, HandlerErrorKind::MemoryLimit { limit_mib: 32 });
    assert!(error.to_string().contains("misbehaving@0.1.0"));
    assert_skill_handler_works(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_reported_with_its_message() {
    let registry = registry(&[]).await;
    let error =
        validate(&registry.get("misbehaving").unwrap(), "panic", Arc::new(InMemoryFiles::new())).await.unwrap_err();
    let HandlerErrorKind::Trapped { detail } = &error.kind else { panic!("expected a trap, got {error}") };
    assert!(detail.contains("panicked on purpose"), "{detail}");
    assert!(!error.caused_by_input());
    assert_skill_handler_works(&registry).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_stop_at_the_budget() {
    let registry = registry(&[]).await;
    let mut files = InMemoryFiles::new();
    files.insert("big.bin", vec![7u8; 1 << 20]);
    let verdict = validate(&registry.get("misbehaving").unwrap(), "greedy", Arc::new(files)).await.unwrap();
    let Verdict::Invalid { problems } = verdict else { panic!("the guest reports the refused read") };
    assert!(problems[0].message.contains("BudgetExceeded(4194304)"), "{problems:?}");
}

/// A looping guest yields every epoch tick, so other tasks on the same
/// single-threaded runtime keep running while it burns its budget.
#[tokio::test(flavor = "current_thread")]
async fn a_looping_guest_does_not_block_the_async_runtime() {
    let registry = registry(&[]).await;
    let ticks = Arc::new(AtomicU64::new(0));
    let counter = ticks.clone();
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    let error =
        validate(&registry.get("misbehaving").unwrap(), "loop", Arc::new(InMemoryFiles::new())).await.unwrap_err();
    ticker.abort();
    assert!(matches!(error.kind, HandlerErrorKind::CpuLimit { .. }));
    assert!(ticks.load(Ordering::Relaxed) >= 3, "the timer task never ran while the guest looped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_calls_than_slots_queue_instead_of_failing() {
    let runtime = Runtime::new(RuntimeLimits { max_concurrent_calls: 2, ..limits() }, None, true).unwrap();
    let registry = HandlerRegistry::load(runtime, &HandlersConfig::default()).await.unwrap();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let skills = registry.get("skills").unwrap();
        calls.spawn(async move { validate(&skills, "pdf-tools", skill_files(SKILL_MD)).await });
    }
    for verdict in calls.join_all().await {
        assert_eq!(verdict.unwrap(), Verdict::Valid { warnings: vec![] });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_of_another_world_are_refused_at_load() {
    let runtime = Runtime::new(limits(), None, false).unwrap();
    let other = std::fs::read(guest("not_a_handler")).unwrap();
    let error = runtime.load(other, HandlerSource::File("other.wasm".into())).await.err().unwrap();
    assert!(matches!(error, LoadError::NotAHandler(_)), "{error}");
    assert!(error.to_string().contains("does not implement the dial:handler@1.x world"), "{error}");

    // Junk is said to be junk, in words (wasmtime's own error quotes the bytes).
    let error = runtime.load(b"not wasm at all".to_vec(), HandlerSource::File("junk.wasm".into())).await.err().unwrap();
    assert!(matches!(error, LoadError::NotAComponent(_)), "{error}");
    assert!(error.to_string().starts_with("not a WebAssembly component: the file does not start"), "{error}");
    let core_module = b"\0asm\x01\0\0\0".to_vec();
    let error = runtime.load(core_module, HandlerSource::File("core.wasm".into())).await.err().unwrap();
    assert!(error.to_string().contains("core WebAssembly module"), "{error}");
    let mut damaged = std::fs::read(guest("not_a_handler")).unwrap();
    damaged.truncate(damaged.len() / 2);
    let error = runtime.load(damaged, HandlerSource::File("cut.wasm".into())).await.err().unwrap();
    assert!(matches!(error, LoadError::Compile(_)), "{error}");

    // A `check` export of another type than 1.2's is refused when loaded,
    // not discovered by the first commit.
    let bad_check = std::fs::read(guest("bad_check")).unwrap();
    let error = runtime.load(bad_check, HandlerSource::File("bad-check.wasm".into())).await.err().unwrap();
    assert!(matches!(error, LoadError::NotAHandler(_)), "{error}");
    assert!(error.to_string().contains("`check` export does not have the type dial:handler@1.2.0"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_components_are_cached_on_disk() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(limits(), Some(CacheConfig::new(cache.path().into(), "test-secret")), false).unwrap();
    let first = runtime.load(BUILTIN_SKILL_HANDLER.to_vec(), HandlerSource::Builtin).await.unwrap();
    let cached: Vec<_> =
        walk(cache.path()).into_iter().filter(|p| p.extension().is_some_and(|e| e == "cwasm")).collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(cached[0].file_name().unwrap().to_string_lossy().starts_with(first.sha256()));

    // A second engine with the same settings loads the artifact…
    let again = Runtime::new(limits(), Some(CacheConfig::new(cache.path().into(), "test-secret")), false).unwrap();
    assert_eq!(
        again.load(BUILTIN_SKILL_HANDLER.to_vec(), HandlerSource::Builtin).await.unwrap().sha256(),
        first.sha256()
    );
    // …and a damaged artifact is a miss, not a failure.
    std::fs::write(&cached[0], b"garbage").unwrap();
    let repaired = Runtime::new(limits(), Some(CacheConfig::new(cache.path().into(), "test-secret")), false).unwrap();
    repaired.load(BUILTIN_SKILL_HANDLER.to_vec(), HandlerSource::Builtin).await.unwrap();
    assert!(std::fs::metadata(&cached[0]).unwrap().len() > 1000, "the artifact was rewritten");
}

/// The cache never loads native code the host did not write: an entry
/// whose code was altered, one written under another key (another host, or
/// someone without the secret), and one copied from another source's name
/// are all misses — recompiled and rewritten — and the handler works (a
/// load runs the guest's `describe`, where altered code would crash).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_components_are_authenticated_before_they_are_loaded() {
    let cache = tempfile::tempdir().unwrap();
    let config = || CacheConfig::new(cache.path().into(), "host-secret");
    let cwasm = |dir: &std::path::Path| walk(dir).into_iter().find(|p| p.extension().is_some_and(|e| e == "cwasm"));
    let runtime = Runtime::new(limits(), Some(config()), false).unwrap();
    let first = runtime.load(BUILTIN_SKILL_HANDLER.to_vec(), HandlerSource::Builtin).await.unwrap();
    let entry = cwasm(cache.path()).unwrap();
    let genuine = std::fs::read(&entry).unwrap();

    // Code altered in place: `ud2` over a stretch in the middle of the artifact.
    let mut altered = genuine.clone();
    let middle = altered.len() / 2;
    for (i, byte) in altered[middle..middle + 4096].iter_mut().enumerate() {
        *byte = if i % 2 == 0 { 0x0f } else { 0x0b };
    }
    std::fs::write(&entry, &altered).unwrap();
    let runtime = Runtime::new(limits(), Some(config()), false).unwrap();
    let loaded = runtime.load(BUILTIN_SKILL_HANDLER.to_vec(), HandlerSource::Builtin).await.unwrap();
    assert_eq!(loaded.description().group, first.description().group);
    assert_eq!(std::fs::read(&entry).unwrap(), genuine, "rewritten with this host's own artifact");

    // Written under another key: a valid artifact, but not this host's.
    let other = tempfile::tempdir().unwrap();
    let foreign = Runtime::new(limits(), Some(CacheConfig::new(other.path().into(), "other-secret")), false).unwrap();
    foreign.load(BUILTIN_SKILL_HANDLER.to_vec(), HandlerSource::Builtin).await.unwrap();
    std::fs::copy(cwasm(other.path()).unwrap(), &entry).unwrap();
    assert_ne!(std::fs::read(&entry).unwrap(), genuine);
    let runtime = Runtime::new(limits(), Some(config()), false).unwrap();
    runtime.load(BUILTIN_SKILL_HANDLER.to_vec(), HandlerSource::Builtin).await.unwrap();
    assert_eq!(std::fs::read(&entry).unwrap(), genuine, "the foreign entry was replaced");

    // This host's genuine entry copied under another source's name: the tag
    // binds it to its own source, so it is not loaded for the other one.
    let other = std::fs::read(guest("not_a_handler")).unwrap();
    let name = format!("{}.cwasm", hex(&sha2::Sha256::digest(&other)));
    std::fs::copy(&entry, entry.with_file_name(name)).unwrap();
    let error = runtime.load(other, HandlerSource::Builtin).await.err().expect("the other component is no handler");
    assert!(matches!(error, LoadError::NotAHandler(_)), "compiled from its own bytes, not the copied entry: {error}");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { found.extend(walk(&path)) } else { found.push(path) }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_claimed_twice_is_a_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("another-skill.wasm"), BUILTIN_SKILL_HANDLER).unwrap();
    let runtime = Runtime::new(limits(), None, false).unwrap();
    let error = HandlerRegistry::load(runtime, &config_with(Some(dir.path().into()), &[])).await.err().unwrap();
    assert!(matches!(&error, RegistryError::DuplicateGroup { group, .. } if group == "skills"), "{error}");
    assert!(error.to_string().contains("another-skill.wasm"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_for_an_unknown_type_are_a_startup_error() {
    let runtime = Runtime::new(limits(), None, false).unwrap();
    let error = HandlerRegistry::load(runtime, &config_with(None, &[("skils", true)])).await.err().unwrap();
    assert!(matches!(&error, RegistryError::UnknownType(group) if group == "skils"), "{error}");
}

/// Versioning policy: a handler built against `dial:handler@1.0.0` (the WIT
/// frozen in `tests/guests/handler-1-0/wit`) keeps loading and working on a
/// host whose WIT has gained backwards-compatible 1.x additions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_built_against_wit_1_0_0_keep_working() {
    let frozen =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/guests/handler-1-0/wit/handler.wit"))
            .unwrap();
    assert!(frozen.contains("package dial:handler@1.0.0;"), "the compatibility guest must stay on 1.0.0");
    let current = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../wit/handler.wit")).unwrap();
    assert!(!current.contains("package dial:handler@1.0.0;"), "the host WIT has moved past 1.0.0");

    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(guest("handler_1_0"), dir.path().join("notes.wasm")).unwrap();
    let runtime = Runtime::new(limits(), None, false).unwrap();
    let registry = HandlerRegistry::load(runtime, &config_with(Some(dir.path().into()), &[])).await.unwrap();
    let notes = &registry.get("notes").expect("the 1.0.0 handler is loaded");
    assert_eq!(notes.description().handler_version, "1.0.0");

    let mut files = InMemoryFiles::new();
    files.insert("NOTE.txt", "Shopping list\nmilk\n");
    let files = Arc::new(files);
    assert_eq!(validate(notes, "n", files.clone()).await.unwrap(), Verdict::Valid { warnings: vec![] });
    let entries = files.entries();
    let metadata = notes.build_marker_metadata(&resource("n"), &entries, files.clone()).await.unwrap().unwrap();
    assert_eq!(metadata["title"], "Shopping list");
    let refused = notes.validate_file_mutation("NOTE.txt", Mutation::Delete).await.unwrap();
    assert!(refused.is_err());

    // No `check` export: a commit asks `validate`, then `build-marker-metadata`.
    assert!(!notes.has_check());
    let Checked::Valid { warnings, metadata } = check(notes, "n", files.clone()).await.unwrap() else {
        panic!("a valid note is valid through check")
    };
    assert!(warnings.is_empty());
    assert_eq!(metadata["title"], "Shopping list");
    let mut empty_note = InMemoryFiles::new();
    empty_note.insert("README.txt", "no note here");
    assert!(matches!(check(notes, "n", Arc::new(empty_note)).await.unwrap(), Checked::Invalid { .. }));
}

/// A request holds the handler it resolved: a reload swapping the group's
/// component under it does not change or break the call in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_leaves_handlers_in_use_working() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(guest("handler_1_0"), dir.path().join("notes.wasm")).unwrap();
    let runtime = Runtime::new(limits(), None, false).unwrap();
    let registry = HandlerRegistry::load(runtime, &config_with(Some(dir.path().into()), &[])).await.unwrap();
    let in_flight = registry.get("notes").unwrap();

    // The same code with an extra custom section: a different component.
    let mut changed = std::fs::read(guest("handler_1_0")).unwrap();
    changed.extend_from_slice(&[0, 3, 1, b'x', b'y']);
    std::fs::write(dir.path().join("notes.wasm"), changed).unwrap();
    let report = registry.reload().await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    let current = registry.get("notes").unwrap();
    assert_ne!(current.sha256(), in_flight.sha256());

    let mut files = InMemoryFiles::new();
    files.insert("NOTE.txt", "still here");
    let files = Arc::new(files);
    assert_eq!(validate(&in_flight, "n", files.clone()).await.unwrap(), Verdict::Valid { warnings: vec![] });
    assert_eq!(validate(&current, "n", files).await.unwrap(), Verdict::Valid { warnings: vec![] });
}

/// Every call runs in a fresh instance, however the pool resets the slot it
/// reuses (returned to the kernel, or kept resident and reset in place):
/// no counter, static buffer or heap byte of an earlier call shows through,
/// also after a call that dirtied its whole memory or trapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_state_survives_a_call_whatever_the_slot_reset() {
    for keep_resident in [0, 1 << 20, 64 << 20] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(guest("misbehaving_guest"), dir.path().join("misbehaving.wasm")).unwrap();
        let limits = RuntimeLimits { memory_keep_resident_bytes: keep_resident, ..limits() };
        let runtime = Runtime::new(limits, None, true).unwrap();
        let registry = HandlerRegistry::load(runtime, &config_with(Some(dir.path().into()), &[])).await.unwrap();
        let misbehaving = registry.get("misbehaving").unwrap();
        let empty = || Arc::new(InMemoryFiles::new()) as Arc<dyn FileSource>;
        for round in 0..12 {
            // Dirty whole slots now and then, and leave trapped instances behind.
            match round % 4 {
                1 => assert!(validate(&misbehaving, "hog", Arc::new(InMemoryFiles::new())).await.is_err()),
                3 => assert!(validate(&misbehaving, "panic", Arc::new(InMemoryFiles::new())).await.is_err()),
                _ => {}
            }
            let metadata = misbehaving.build_marker_metadata(&resource("remember"), &[], empty()).await;
            let metadata = metadata.unwrap().unwrap();
            let found: Vec<(&str, &str)> = metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(
                found,
                [("calls", "1"), ("static_clean", "true"), ("heap_clean", "true")],
                "keep resident {keep_resident}, round {round}"
            );
        }
    }
}

/// A handler's verdict depends on its input only: from inside, there is no
/// filesystem, no environment, no network, a clock that does not move and
/// randomness that repeats (ARCHITECTURE.md, `runtime.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_sees_no_filesystem_network_real_clock_or_real_randomness() {
    let registry = registry(&[]).await;
    let misbehaving = registry.get("misbehaving").unwrap();
    let probe = async || {
        let files = Arc::new(InMemoryFiles::new()) as Arc<dyn FileSource>;
        let metadata = misbehaving.build_marker_metadata(&resource("probe"), &[], files).await.unwrap().unwrap();
        metadata.into_iter().collect::<std::collections::BTreeMap<String, String>>()
    };
    let first = probe().await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let second = probe().await;
    assert_eq!(first, second, "two calls 50 ms apart see the same world");
    assert!(first["read_dir_root"].starts_with("Err("), "{first:?}");
    assert!(first["read_etc_passwd"].starts_with("Err("), "{first:?}");
    assert!(first["tcp_connect"].starts_with("Err("), "{first:?}");
    assert!(first["name_lookup"].starts_with("Err("), "{first:?}");
    assert_eq!((first["env_vars"].as_str(), first["args"].as_str()), ("0", "0"), "{first:?}");
    assert_eq!(first["monotonic_elapsed_ns"], "0", "the monotonic clock stands still: {first:?}");
    assert_eq!(first["wall_clock_ns"], "0", "the wall clock is not the host's: {first:?}");
}
