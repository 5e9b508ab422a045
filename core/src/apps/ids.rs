//! The id an application is known by in the store: its own bucket
//! `Keys/<id>/` and its appdata folder `appdata/<id>/` in each user's
//! bucket.
//!
//! Until issue 38 a stored application's id carried 48 bits of its URL's
//! hash — few enough that a URL could be made to share another
//! application's id, and its data. [`migrate_app_ids`] moves what was
//! stored under those ids to today's, once per store, at start-up.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ConfigApps;
use crate::buckets::{BucketCodec, BucketLocation};
use crate::clock::now_ms;
use crate::folders::created_index::created_index_complete;
use crate::folders::layout::{FOLDER_INDEX, RESOURCE_INDEX, decode_part};
use crate::locks::{LockError, LockService};

/// An application's id as one path segment — its own bucket is
/// `Keys/<id>/`, its appdata folder `appdata/<id>/`: a configuration
/// application's name; for a stored one, the last segment of its URL and
/// 128 bits of a hash of the whole URL (two users' apps of the same name
/// stay apart, and no one can make a URL whose id is another's).
pub fn app_id(deployment: &str) -> String {
    if !deployment.contains('/') {
        return deployment.to_string();
    }
    let name = deployment.rsplit('/').find(|s| !s.is_empty()).unwrap_or("app");
    format!("{name}-{}", stored_app_digest(deployment, APP_ID_DIGEST_BYTES))
}

/// Bytes of the hash a stored application's id carries.
const APP_ID_DIGEST_BYTES: usize = 16;

fn stored_app_digest(deployment: &str, bytes: usize) -> String {
    Sha256::digest(deployment.as_bytes()).iter().take(bytes).map(|b| format!("{b:02x}")).collect()
}

/// A stored application's id as it was before issue 38 (48 bits of the
/// hash): where its data is until the store is migrated.
pub fn legacy_app_id(deployment: &str) -> String {
    let name = deployment.rsplit('/').find(|s| !s.is_empty()).unwrap_or("app");
    format!("{name}-{}", stored_app_digest(deployment, 6))
}

/// Why a project key's bucket, `Keys/<project>/`, would be an
/// application's own bucket (`Keys/<app id>/`): a configuration
/// application of that name, or the form of a stored application's id.
pub fn project_bucket_clash(project: &str, apps: &ConfigApps) -> Option<String> {
    if apps.get(project).is_some() {
        return Some(format!("the configured application {project} has that name, and its bucket is Keys/{project}/"));
    }
    let digest = project.rsplit_once('-').map(|(_, digest)| digest);
    let is_digest = |hex: &str, bytes: usize| hex.len() == 2 * bytes && hex.bytes().all(|b| b.is_ascii_hexdigit());
    if digest.is_some_and(|hex| is_digest(hex, APP_ID_DIGEST_BYTES) || is_digest(hex, 6)) {
        return Some("it has the form of a stored application's id (<name>-<hex digest>)".into());
    }
    None
}

/// Says which application ids the store's data is under.
pub const IDS_DOCUMENT: &str = ".dial-host/app-ids.json";
/// Ids with 128 bits of the URL's hash.
const IDS_VERSION: u32 = 2;
const MIGRATION_LOCK: &str = "app-id-migration";
/// Objects moved at once.
const MOVES_IN_FLIGHT: usize = 16;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IdsDocument {
    app_ids: u32,
    migrated_at: i64,
}

/// What a migration of application ids did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IdMigration {
    /// Stored applications found.
    pub applications: usize,
    /// Objects moved to a new id.
    pub objects_moved: usize,
    /// Old ids two stored applications shared (made to collide): their
    /// data is left where it is, for an operator to judge.
    pub ambiguous: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum IdMigrationError {
    #[error("storage error: {0}")]
    Storage(#[from] object_store::Error),
    #[error(transparent)]
    Lock(#[from] LockError),
}

/// Moves the data of every stored application from its id before issue 38
/// ([`legacy_app_id`]) to today's ([`app_id`]): its own bucket
/// `Keys/<id>/`, and its appdata folder `<group>/appdata/<id>/` (with a v2
/// folder's marker in the index beside it) in every user's and project's
/// bucket. Runs once per store, before the server answers: the first
/// instance takes the migration lock, moves (copy, then delete: a migration
/// cut short is finished by the next start), then writes
/// [`IDS_DOCUMENT`]; later starts read it and do nothing. `None` when there
/// was nothing to do. Instances of a version before issue 38 must all be
/// stopped first (docs/operations.md).
///
/// `taken`: the names of configured applications and projects, whose
/// buckets are theirs whatever a stored application's old id was.
pub async fn migrate_app_ids(
    store: &Arc<dyn ObjectStore>,
    buckets: &BucketCodec,
    locks: &dyn LockService,
    taken: Vec<&str>,
) -> Result<Option<IdMigration>, IdMigrationError> {
    if ids_are_current(store).await? {
        return Ok(None);
    }
    let _lock = loop {
        match locks.acquire(MIGRATION_LOCK).await {
            Ok(lock) => break lock,
            // Another instance is migrating: wait for it.
            Err(LockError::Timeout { .. }) if !ids_are_current(store).await? => continue,
            Err(LockError::Timeout { .. }) => return Ok(None),
            Err(error) => return Err(error.into()),
        }
    };
    if ids_are_current(store).await? {
        return Ok(None);
    }
    let roots = bucket_roots(store).await?;
    let mut deployments = Vec::new();
    for (root, location) in &roots {
        deployments.extend(stored_applications(store, buckets, root, location).await?);
    }
    let (first, ambiguous) = renames_of(deployments.iter(), &taken);
    // A definition kept in a renamed application's own bucket names another
    // application once that bucket moves (its URL changes with it): its
    // data stays where it is.
    let moving: Vec<BucketLocation> = first.keys().map(|legacy| BucketLocation::Key(legacy.clone())).collect();
    let inside_moving = |deployment: &String| {
        let bucket = deployment.split('/').nth(1).unwrap_or_default();
        buckets.decode(bucket).is_ok_and(|location| moving.contains(&location))
    };
    let (renames, _) = renames_of(deployments.iter().filter(|d| !inside_moving(d)), &taken);
    let mut migration = IdMigration { applications: deployments.len(), ambiguous, ..IdMigration::default() };
    for (root, _) in &roots {
        migration.objects_moved += move_appdata(store, root, &renames).await?;
    }
    for (legacy, new) in &renames {
        let keys = Path::from("Keys");
        migration.objects_moved +=
            move_prefix(store, &keys.clone().join(legacy.as_str()), &keys.clone().join(new.as_str())).await?;
    }
    _lock.ensure_held()?;
    let document = IdsDocument { app_ids: IDS_VERSION, migrated_at: now_ms() };
    let json = serde_json::to_vec(&document).expect("an ids document serializes");
    store.put(&Path::from(IDS_DOCUMENT), PutPayload::from(json)).await?;
    Ok(Some(migration))
}

async fn ids_are_current(store: &Arc<dyn ObjectStore>) -> Result<bool, IdMigrationError> {
    match store.get(&Path::from(IDS_DOCUMENT)).await {
        Ok(read) => {
            let bytes = read.bytes().await?;
            Ok(serde_json::from_slice::<IdsDocument>(&bytes).is_ok_and(|document| document.app_ids >= IDS_VERSION))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// Every bucket's root in the store (users', keys' and `public`), with its location.
async fn bucket_roots(store: &Arc<dyn ObjectStore>) -> Result<Vec<(Path, BucketLocation)>, IdMigrationError> {
    let mut roots = vec![(Path::from("public"), BucketLocation::Public)];
    for (kind, location) in
        [("Users", BucketLocation::User as fn(String) -> BucketLocation), ("Keys", BucketLocation::Key)]
    {
        let listed = store.list_with_delimiter(Some(&Path::from(kind))).await?;
        for root in listed.common_prefixes {
            let Some(name) = root.parts().next_back() else { continue };
            let name = decode_part(&name);
            roots.push((root, location(name)));
        }
    }
    Ok(roots)
}

/// The deployment ids of the application definitions in one bucket.
async fn stored_applications(
    store: &Arc<dyn ObjectStore>,
    buckets: &BucketCodec,
    root: &Path,
    location: &BucketLocation,
) -> Result<Vec<String>, IdMigrationError> {
    let prefix = root.clone().join("applications");
    let bucket = buckets.encode(location);
    let listed: Vec<Path> = store.list(Some(&prefix)).map_ok(|meta| meta.location).try_collect().await?;
    Ok(listed
        .iter()
        .filter_map(|location| {
            let segments: Vec<String> = location.prefix_match(&prefix)?.map(|part| decode_part(&part)).collect();
            (!segments.is_empty()).then(|| format!("applications/{bucket}/{}", segments.join("/")))
        })
        .collect())
}

/// [`renames`] of `deployments`, leaving out old ids that are `taken`.
fn renames_of<'d>(
    deployments: impl Iterator<Item = &'d String>,
    taken: &[&str],
) -> (HashMap<String, String>, Vec<String>) {
    let (mut renames, ambiguous) = renames(deployments.map(|d| (legacy_app_id(d), app_id(d))));
    renames.retain(|legacy, _| !taken.contains(&legacy.as_str()));
    (renames, ambiguous)
}

/// Old id → today's, for the old ids exactly one application had; and the
/// old ids several had.
fn renames(pairs: impl Iterator<Item = (String, String)>) -> (HashMap<String, String>, Vec<String>) {
    let mut claimed: HashMap<String, Option<String>> = HashMap::new();
    for (legacy, new) in pairs {
        claimed
            .entry(legacy)
            .and_modify(|known| {
                if known.as_ref() != Some(&new) {
                    *known = None;
                }
            })
            .or_insert(Some(new));
    }
    let mut ambiguous: Vec<String> =
        claimed.iter().filter(|(_, new)| new.is_none()).map(|(old, _)| old.clone()).collect();
    ambiguous.sort();
    for old in &ambiguous {
        tracing::error!(id = old, "two stored applications had this id: their data is left under it");
    }
    (claimed.into_iter().filter_map(|(old, new)| Some((old, new?))).collect(), ambiguous)
}

/// The appdata folders of renamed applications in the bucket at `root`,
/// in any group: `<group>/appdata/<old>/…` and a v2 folder's or resource's
/// marker `<group>/appdata/.dial-folders/<old>` (`.dial-resources/`).
async fn move_appdata(
    store: &Arc<dyn ObjectStore>,
    root: &Path,
    renames: &HashMap<String, String>,
) -> Result<usize, IdMigrationError> {
    let renamed = |part: &PathPart<'_>| renames.get(&decode_part(part)).map(|new| PathPart::from(new.as_str()));
    let mut moved = 0;
    for group in store.list_with_delimiter(Some(root)).await?.common_prefixes {
        let before = moved;
        let appdata = group.clone().join(crate::access::APPDATA_FOLDER);
        for folder in store.list_with_delimiter(Some(&appdata)).await?.common_prefixes {
            let Some(name) = folder.parts().next_back() else { continue };
            if let Some(new) = renamed(&name) {
                moved += move_prefix(store, &folder, &appdata.clone().join(new)).await?;
            }
            if [FOLDER_INDEX, RESOURCE_INDEX].contains(&name.as_ref()) {
                for marker in store.list_with_delimiter(Some(&folder)).await?.objects {
                    let Some(new) = marker.location.parts().next_back().and_then(|name| renamed(&name)) else {
                        continue;
                    };
                    moved += move_object(store, &marker.location, &folder.clone().join(new)).await?;
                }
            }
        }
        if moved > before {
            // The group's creation index names the old URLs: the next list
            // indexes the group again (and drops the old entries).
            match store.delete(&created_index_complete(&group)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(moved)
}

/// Moves every object below `from` to the same place below `to`.
async fn move_prefix(store: &Arc<dyn ObjectStore>, from: &Path, to: &Path) -> Result<usize, IdMigrationError> {
    let listed: Vec<Path> = store.list(Some(from)).map_ok(|meta| meta.location).try_collect().await?;
    let moves = listed.into_iter().filter_map(|location| {
        let rest: Vec<PathPart<'static>> =
            location.prefix_match(from)?.map(|part| PathPart::from(decode_part(&part))).collect();
        let target = rest.into_iter().fold(to.clone(), |path, part| path.join(part));
        Some(async move { move_object(store, &location, &target).await })
    });
    let moved: Vec<usize> = futures_util::stream::iter(moves).buffer_unordered(MOVES_IN_FLIGHT).try_collect().await?;
    Ok(moved.into_iter().sum())
}

/// Copies `from` to `to` (over what a migration cut short left there),
/// then deletes `from`.
async fn move_object(store: &Arc<dyn ObjectStore>, from: &Path, to: &Path) -> Result<usize, IdMigrationError> {
    match store.copy(from, to).await {
        Ok(()) => {}
        Err(object_store::Error::NotFound { .. }) => return Ok(0),
        Err(error) => return Err(error.into()),
    }
    match store.delete(from).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(1),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::dependencies::DeclarationPolicy;

    #[test]
    fn app_ids_are_one_segment_with_128_bits_of_the_url() {
        assert_eq!(app_id("echo"), "echo");
        let id = app_id("applications/B1/team/bot");
        assert!(id.starts_with("bot-") && id.len() == "bot-".len() + 32, "{id}");
        assert_ne!(id, app_id("applications/B2/team/bot"));
        let legacy = legacy_app_id("applications/B1/team/bot");
        assert_eq!(legacy.len(), "bot-".len() + 12);
        assert!(id.starts_with(&legacy), "the legacy id is a prefix of today's: {legacy} {id}");
    }

    #[test]
    fn a_project_cannot_take_an_applications_bucket() {
        let tables = BTreeMap::from([("echo".to_string(), serde_json::json!({"endpoint": "http://a/chat"}))]);
        let apps = ConfigApps::load(&tables, &DeclarationPolicy::default()).unwrap();
        assert!(project_bucket_clash("echo", &apps).unwrap().contains("configured application echo"));
        assert!(project_bucket_clash(&app_id("applications/B/team/bot"), &apps).is_some());
        assert!(project_bucket_clash(&legacy_app_id("applications/B/team/bot"), &apps).is_some());
        for fine in ["team", "skills-team", "build-2024", "echo2"] {
            assert_eq!(project_bucket_clash(fine, &apps), None, "{fine}");
        }
    }

    #[test]
    fn an_old_id_two_applications_shared_is_renamed_for_neither() {
        let pairs = [("a-1", "a-11"), ("b-2", "b-22"), ("b-2", "b-22"), ("c-3", "c-33"), ("c-3", "c-34")];
        let (renames, ambiguous) = renames(pairs.iter().map(|(old, new)| (old.to_string(), new.to_string())));
        assert_eq!(renames.len(), 2);
        assert_eq!(renames["a-1"], "a-11");
        assert_eq!(renames["b-2"], "b-22", "one application listed twice is one");
        assert_eq!(ambiguous, ["c-3"]);
    }

    /// An application's own bucket and its appdata folders (v1 items, a v2
    /// folder with its marker) move from the old id to today's, once.
    #[tokio::test]
    async fn data_under_old_ids_moves_to_todays_once() {
        use crate::config::LockConfig;
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let buckets = BucketCodec::new("secret");
        let locks = crate::locks::from_config(None, &LockConfig::default(), "test:");
        let alice = buckets.encode(&BucketLocation::User("alice".into()));
        let deployment = format!("applications/{alice}/team/my bot");
        let (old, new) = (legacy_app_id(&deployment), app_id(&deployment));
        let put = |path: String| {
            let store = store.clone();
            async move { store.put(&Path::parse(path).unwrap(), PutPayload::from_static(b"x")).await.unwrap() }
        };
        let encoded = |id: &str| PathPart::from(id).as_ref().to_string();
        put("Users/alice/applications/team/my%20bot".into()).await;
        put(format!("Keys/{}/files/notes/a.txt", encoded(&old))).await;
        put(format!("Users/alice/files/appdata/{}/out.txt", encoded(&old))).await;
        put(format!("Keys/project/skills/appdata/.dial-folders/{}", encoded(&old))).await;
        put(format!("Keys/project/skills/appdata/{}/s/.dial-resources/x", encoded(&old))).await;
        put("Keys/project/skills/.dial-created/complete".into()).await;
        put("Users/alice/files/appdata/other-0123456789ab/kept.txt".into()).await;

        let migrated = migrate_app_ids(&store, &buckets, locks.as_ref(), vec!["project"]).await.unwrap().unwrap();
        assert_eq!((migrated.applications, migrated.objects_moved), (1, 4), "{migrated:?}");
        let mut listed: Vec<String> =
            store.list(None).map_ok(|meta| meta.location.to_string()).try_collect().await.unwrap();
        listed.sort();
        let new = encoded(&new);
        let mut expected = vec![
            IDS_DOCUMENT.to_string(),
            format!("Keys/{new}/files/notes/a.txt"),
            format!("Keys/project/skills/appdata/.dial-folders/{new}"),
            format!("Keys/project/skills/appdata/{new}/s/.dial-resources/x"),
            "Users/alice/applications/team/my%20bot".into(),
            "Users/alice/files/appdata/other-0123456789ab/kept.txt".into(),
            format!("Users/alice/files/appdata/{new}/out.txt"),
        ];
        expected.sort();
        assert_eq!(listed, expected);
        put(format!("Keys/{}/files/late.txt", encoded(&old))).await;
        assert_eq!(migrate_app_ids(&store, &buckets, locks.as_ref(), vec![]).await.unwrap(), None, "once per store");
    }
}
