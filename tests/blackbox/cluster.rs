//! Many instances under load and a kill (SPEC §10): three host processes on
//! one bucket — S3 on moto, and again Azure Blob on Azurite — and one Redis,
//! sixteen clients spread across them,
//! mixing whole PUTs, single-file PUTs, DELETEs, restores, folder
//! operations, listings, shares and reads. One instance is SIGKILLed in the
//! middle of the traffic and restarted.
//!
//! Checked: every answer is 200/304/404/408/409/412; each client's own
//! resources read back exactly as its acknowledged operations left them,
//! from any instance (an operation cut off by the kill may or may not have
//! landed: both outcomes are then allowed until a read settles it); no read
//! ever serves a mix of two versions; listings agree with reads; and after
//! the sweep, the store's own listing holds no journal entry, no version
//! that a marker does not reference, and nothing of a deleted resource.
//!
//! `host/benches/chaos.rs` drives the same clients and checker for ten
//! minutes, with a kill every 30 s and a Redis restart every 2 minutes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};

use crate::services;
use crate::support::{Server, Setup, unzip};

const KEY: &str = "cluster-key";
pub(crate) const INSTANCES: usize = 3;
pub(crate) const CLIENTS: usize = 16;
const RESOURCES_PER_CLIENT: usize = 3;
const SHARED: usize = 2;
/// Each traffic phase: all up; one killed; all up again.
const PHASE: Duration = Duration::from_secs(5);
/// Writers must commit within half of it. At 12 s (a 6 s deadline) a whole
/// PUT queued behind the other black-box tests' traffic on two cores and one
/// moto was refused with 408 now and then — a correct refusal, nothing
/// stored, but not what this test is about; 24 s keeps it about data.
const GRACE_SECONDS: u64 = 24;
pub(crate) const BUCKET: &str = "cluster";

/// The instances' URLs; `None` while one is down.
pub(crate) type Urls = Arc<Mutex<Vec<Option<String>>>>;

/// What a client's resource may hold: absent, or (skill token, notes).
type State = Option<(String, String)>;

/// A small deterministic generator (no shared RNG between clients).
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The files of a whole PUT whose parts name the same token, so a read that
/// mixed two versions shows it.
fn skill_files(token: &str) -> Vec<(String, Vec<u8>)> {
    vec![
        ("SKILL.md".into(), format!("---\nname: s\ndescription: token {token}\n---\n# s\n").into_bytes()),
        ("data.txt".into(), format!("{token}\n").repeat(64).into_bytes()),
        ("notes.txt".into(), format!("notes of {token}").into_bytes()),
    ]
}

/// A served ZIP's state, after checking its parts belong to one version.
fn read_state(zip: &[u8]) -> Result<(String, String), String> {
    let files: BTreeMap<String, Vec<u8>> = unzip(zip).into_iter().collect();
    let text = |name: &str| String::from_utf8(files.get(name).cloned().unwrap_or_default()).unwrap_or_default();
    let skill = text("SKILL.md");
    let token = skill
        .lines()
        .find_map(|line| line.strip_prefix("description: token "))
        .ok_or_else(|| format!("no token in SKILL.md: {skill:?}"))?
        .to_string();
    if text("data.txt") != format!("{token}\n").repeat(64) {
        return Err(format!("data.txt is not of version {token}: a mix of versions was served"));
    }
    Ok((token, text("notes.txt")))
}

pub(crate) struct Outcome {
    /// Answers outside 200/304/404/409/412, and broken invariants.
    pub(crate) violations: Vec<String>,
    pub(crate) operations: BTreeMap<&'static str, usize>,
    pub(crate) cut_off: usize,
    /// 503s (Redis or the store away), when they are allowed.
    pub(crate) unavailable: usize,
}

pub(crate) struct ClientRun {
    pub(crate) id: usize,
    bucket: String,
    urls: Urls,
    http: reqwest::Client,
    dice: Dice,
    /// Per owned resource: the states it may be in (one once known).
    possible: Vec<Vec<State>>,
    /// The state before the last acknowledged delete, for a restore.
    deleted: Vec<Option<State>>,
    folders: usize,
    /// Whether a 503 is expected (Redis restarted under the traffic): it is
    /// then an answer that says nothing of whether the change landed — the
    /// same as no answer — instead of a violation.
    unavailable_is_expected: bool,
    pub(crate) outcome: Outcome,
}

enum Answer {
    Got(u16, bytes::Bytes),
    /// No answer: the instance went away mid-request.
    CutOff,
}

impl ClientRun {
    fn resource(&self, index: usize) -> String {
        format!("skills/{}/c{}/r{index}", self.bucket, self.id)
    }

    /// An instance that is up, starting from this client's own.
    fn base(&mut self) -> String {
        let urls = self.urls.lock().unwrap().clone();
        let start = (self.id + self.dice.below(2) as usize) % INSTANCES;
        (0..INSTANCES).map(|i| (start + i) % INSTANCES).find_map(|i| urls[i].clone()).expect("an instance is up")
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Answer {
        match request.header("Api-Key", KEY).send().await {
            Ok(response) if response.status() == 503 && self.unavailable_is_expected => {
                self.outcome.unavailable += 1;
                Answer::CutOff
            }
            Ok(response) => {
                let status = response.status().as_u16();
                match response.bytes().await {
                    Ok(body) => Answer::Got(status, body),
                    Err(_) => Answer::CutOff,
                }
            }
            Err(_) => Answer::CutOff,
        }
    }

    /// 408 is the commit deadline's refusal, which stores nothing: on two
    /// cores with two such clusters (S3 and Azure) running at once, a whole
    /// PUT queued behind the others' traffic can meet it — a correct answer
    /// that changes nothing, like 409 and 412.
    fn check_status(&mut self, what: &str, status: u16, body: &[u8]) -> bool {
        if matches!(status, 200 | 304 | 404 | 408 | 409 | 412) {
            return true;
        }
        let body = String::from_utf8_lossy(body);
        self.outcome.violations.push(format!("client {}: {what} answered {status}: {body}", self.id));
        false
    }

    fn multipart(files: &[(String, Vec<u8>)]) -> reqwest::multipart::Form {
        files.iter().fold(reqwest::multipart::Form::new(), |form, (name, content)| {
            form.part("file", reqwest::multipart::Part::bytes(content.clone()).file_name(name.clone()))
        })
    }

    pub(crate) async fn step(&mut self, round: usize) {
        let index = self.dice.below(RESOURCES_PER_CLIENT as u64) as usize;
        let url = self.resource(index);
        let base = self.base();
        let choice = self.dice.below(100);
        let (name, next): (&'static str, Option<Vec<State>>) = match choice {
            // Whole PUT: a fresh token.
            0..=24 => {
                let token = format!("c{}-{round}", self.id);
                let files = skill_files(&token);
                let request = self.http.put(format!("{base}/v2/{url}")).multipart(Self::multipart(&files));
                let state = Some((token.clone(), format!("notes of {token}")));
                match self.send(request).await {
                    Answer::Got(200, _) => {
                        self.deleted[index] = None;
                        ("put", Some(vec![state]))
                    }
                    Answer::Got(status, body) => {
                        self.check_status("whole PUT", status, &body);
                        ("put", None)
                    }
                    Answer::CutOff => ("put", Some(self.with(index, state))),
                }
            }
            // Single-file PUT of notes.txt.
            25..=39 => {
                let notes = format!("notes c{}-{round}", self.id);
                let files = [("notes.txt".to_string(), notes.clone().into_bytes())];
                let request =
                    self.http.put(format!("{base}/v2/{url}/files/notes.txt")).multipart(Self::multipart(&files));
                let changed: Vec<State> = self.possible[index]
                    .iter()
                    .map(|state| state.as_ref().map(|(token, _)| (token.clone(), notes.clone())))
                    .collect();
                match self.send(request).await {
                    Answer::Got(200, _) => {
                        self.expect_live(index, "single-file PUT answered 200");
                        ("file", Some(changed.into_iter().filter(Option::is_some).collect()))
                    }
                    Answer::Got(404, _) => ("file", Some(self.settle(index, None, "single-file PUT 404"))),
                    Answer::Got(status, body) => {
                        self.check_status("single-file PUT", status, &body);
                        ("file", None)
                    }
                    Answer::CutOff => {
                        let mut all = self.possible[index].clone();
                        all.extend(changed);
                        ("file", Some(all))
                    }
                }
            }
            // DELETE.
            40..=49 => {
                let before = self.possible[index].clone();
                match self.send(self.http.delete(format!("{base}/v2/{url}"))).await {
                    Answer::Got(200, _) => {
                        self.expect_live(index, "DELETE answered 200");
                        let live: Vec<State> = before.into_iter().filter(Option::is_some).collect();
                        self.deleted[index] = (live.len() == 1).then(|| live[0].clone());
                        ("delete", Some(vec![None]))
                    }
                    Answer::Got(404, _) => ("delete", Some(self.settle(index, None, "DELETE 404"))),
                    Answer::Got(status, body) => {
                        self.check_status("DELETE", status, &body);
                        ("delete", None)
                    }
                    Answer::CutOff => {
                        self.deleted[index] = None;
                        ("delete", Some(self.with(index, None)))
                    }
                }
            }
            // Restore what this client deleted last.
            50..=56 => {
                let Some(stashed) = self.deleted[index].clone().filter(|_| self.possible[index] == [None]) else {
                    return;
                };
                let body = json!({"url": url}).to_string();
                let request = self.http.post(format!("{base}/v2/ops/skills/restore")).body(body);
                match self.send(request).await {
                    Answer::Got(200, _) => {
                        self.deleted[index] = None;
                        ("restore", Some(vec![stashed]))
                    }
                    Answer::Got(status, body) => {
                        self.check_status("restore", status, &body);
                        ("restore", None)
                    }
                    Answer::CutOff => ("restore", Some(self.with(index, stashed))),
                }
            }
            // Read it back (from whichever instance) and settle what it holds.
            57..=74 => match self.send(self.http.get(format!("{base}/v2/{url}"))).await {
                Answer::Got(200, zip) => match read_state(&zip) {
                    Ok(state) => ("get", Some(self.settle(index, Some(state), "GET"))),
                    Err(broken) => {
                        self.outcome.violations.push(format!("client {} GET {url}: {broken}", self.id));
                        ("get", None)
                    }
                },
                Answer::Got(404, _) => ("get", Some(self.settle(index, None, "GET"))),
                Answer::Got(status, body) => {
                    self.check_status("GET", status, &body);
                    ("get", None)
                }
                Answer::CutOff => ("get", None),
            },
            // A grouping folder: created, then deleted while empty.
            75..=82 => {
                self.folders += 1;
                let folder = format!("{base}/v2/skills/{}/c{}/dir{}/", self.bucket, self.id, self.folders);
                // A create that got no answer (a kill, or a 503 while Redis restarts) may not have landed:
                // the delete may then find nothing.
                let created = match self.send(self.http.put(&folder)).await {
                    Answer::Got(200, _) => true,
                    Answer::Got(status, body) => {
                        self.folder_violation("folder PUT", status, &body);
                        false
                    }
                    Answer::CutOff => false,
                };
                match self.send(self.http.delete(&folder)).await {
                    Answer::Got(200, _) | Answer::CutOff => {}
                    Answer::Got(404, _) if !created => {}
                    Answer::Got(status, body) => self.folder_violation("folder DELETE", status, &body),
                }
                ("folder", None)
            }
            // A listing of the client's folder.
            83..=89 => {
                let listing = format!("{base}/v2/metadata/skills/{}/c{}/", self.bucket, self.id);
                if let Answer::Got(status, body) = self.send(self.http.get(listing)).await {
                    self.check_status("listing", status, &body);
                }
                ("listing", None)
            }
            // A share of one of its resources.
            90..=93 => {
                let body = json!({"invitationType": "link", "resources": [{"url": url, "permissions": ["READ"]}]});
                let request = self.http.post(format!("{base}/v1/ops/resource/share/create")).body(body.to_string());
                if let Answer::Got(status, body) = self.send(request).await {
                    self.check_status("share", status, &body);
                }
                ("share", None)
            }
            // The contended resources everybody writes and reads.
            _ => {
                let shared = format!("skills/{}/shared/s{}", self.bucket, self.dice.below(SHARED as u64));
                if self.dice.below(2) == 0 {
                    let files = skill_files(&format!("c{}-{round}-shared", self.id));
                    let request = self.http.put(format!("{base}/v2/{shared}")).multipart(Self::multipart(&files));
                    if let Answer::Got(status, body) = self.send(request).await {
                        self.check_status("shared PUT", status, &body);
                    }
                    ("shared put", None)
                } else {
                    match self.send(self.http.get(format!("{base}/v2/{shared}"))).await {
                        Answer::Got(200, zip) => {
                            if let Err(broken) = read_state(&zip) {
                                self.outcome.violations.push(format!("client {} GET {shared}: {broken}", self.id));
                            }
                        }
                        Answer::Got(status, body) => {
                            self.check_status("shared GET", status, &body);
                        }
                        Answer::CutOff => {}
                    }
                    ("shared get", None)
                }
            }
        };
        *self.outcome.operations.entry(name).or_default() += 1;
        if let Some(next) = next {
            if next.len() > self.possible[index].len() && next.len() > 1 {
                self.outcome.cut_off += 1;
            }
            self.possible[index] = dedup(next);
        }
    }

    fn folder_violation(&mut self, what: &str, status: u16, body: &[u8]) {
        let body = String::from_utf8_lossy(body);
        self.outcome.violations.push(format!("client {}: {what} answered {status}: {body}", self.id));
    }

    /// The current possibilities plus `state` (an operation with no answer).
    fn with(&self, index: usize, state: State) -> Vec<State> {
        let mut all = self.possible[index].clone();
        all.push(state);
        all
    }

    /// An answer that says the resource existed.
    fn expect_live(&mut self, index: usize, how: &str) {
        if !self.possible[index].iter().any(Option::is_some) {
            self.outcome.violations.push(format!(
                "client {} {}: {how}, but its acknowledged operations left it absent",
                self.id,
                self.resource(index)
            ));
        }
    }

    /// A read saw `seen`: it must be one of the possibilities, and becomes the one.
    fn settle(&mut self, index: usize, seen: State, how: &str) -> Vec<State> {
        if !self.possible[index].contains(&seen) {
            self.outcome.violations.push(format!(
                "client {} {how} {}: read {seen:?}, but its acknowledged operations allow only {:?}",
                self.id,
                self.resource(index),
                self.possible[index]
            ));
        }
        vec![seen]
    }
}

fn dedup(states: Vec<State>) -> Vec<State> {
    let mut seen = Vec::new();
    for state in states {
        if !seen.contains(&state) {
            seen.push(state);
        }
    }
    seen
}

pub(crate) struct Cluster {
    setups: Vec<Setup>,
    configs: Vec<std::path::PathBuf>,
    servers: Vec<Option<Server>>,
    pub(crate) urls: Urls,
}

impl Cluster {
    pub(crate) fn start(emulator: &services::Emulator, redis: &services::Redis) -> Self {
        let storage = emulator.storage_toml(BUCKET);
        let setups: Vec<Setup> = (0..INSTANCES).map(|_| Setup::new()).collect();
        let configs: Vec<_> = setups
            .iter()
            .map(|setup| {
                setup.config(&format!(
                    "[encryption]\nsecret = \"cluster\"\n[keys.{KEY}]\nproject = \"p\"\nroles = [\"user\"]\n\
                     {storage}\
                     [redis]\nurl = \"{}\"\nkey_prefix = \"{BUCKET}:\"\n\
                     [locks]\nttl_ms = 2000\n\
                     [folders]\ngrace_seconds = {GRACE_SECONDS}\ngc_interval_seconds = 1\n",
                    redis.url
                ))
            })
            .collect();
        let servers: Vec<Option<Server>> =
            setups.iter().zip(&configs).map(|(setup, config)| Some(setup.start(Some(config), &[]))).collect();
        let urls = Arc::new(Mutex::new(servers.iter().map(|s| s.as_ref().map(|s| s.url.clone())).collect()));
        Self { setups, configs, servers, urls }
    }

    pub(crate) fn kill(&mut self, index: usize) {
        self.urls.lock().unwrap()[index] = None;
        let server = self.servers[index].take().expect("running");
        let pid = server.pid().to_string();
        let killed = std::process::Command::new("kill").args(["-KILL", &pid]).status().expect("run kill");
        assert!(killed.success());
        drop(server);
    }

    pub(crate) fn restart(&mut self, index: usize) {
        let server = self.setups[index].start(Some(&self.configs[index]), &[]);
        self.urls.lock().unwrap()[index] = Some(server.url.clone());
        self.servers[index] = Some(server);
    }
}

/// Every object in the bucket.
async fn store_listing(store: &dyn ObjectStore) -> Vec<object_store::ObjectMeta> {
    store.list(None).try_collect().await.expect("list the bucket")
}

/// Objects below a version directory that no marker names as its current
/// version, purged tombstones' markers, and journal entries.
pub(crate) async fn orphans(store: &dyn ObjectStore) -> Vec<String> {
    let objects = store_listing(store).await;
    let mut current: BTreeSet<String> = BTreeSet::new();
    let mut purged_markers: BTreeSet<String> = BTreeSet::new();
    // Markers are in their folder's index (`…/.dial-resources/<name>`); a
    // retained version's manifest (`…/v/<version>/.dial-resource`) is not one.
    let markers = objects.iter().filter(|meta| meta.location.as_ref().contains("/.dial-resources/"));
    for meta in markers {
        let path = meta.location.as_ref();
        let bytes = match store.get(&meta.location).await {
            Ok(got) => got.bytes().await.unwrap(),
            // Gone since the listing: the sweep deletes a purged tombstone's marker.
            Err(object_store::Error::NotFound { .. }) => continue,
            Err(error) => panic!("reading {path}: {error}"),
        };
        let marker: Value = serde_json::from_slice(&bytes).unwrap();
        let (parent, name) = path.rsplit_once("/.dial-resources/").expect("an index entry");
        let base = format!("{parent}/{name}/");
        let purged = marker.get("purgedAt").is_some_and(|at| !at.is_null());
        if purged {
            // Nothing of a deleted resource outlives the sweep, its marker included.
            purged_markers.insert(path.to_string());
        } else {
            current.insert(format!("{base}v/{}/", marker["currentVersion"].as_str().unwrap()));
            for kept in marker["history"].as_array().into_iter().flatten() {
                current.insert(format!("{base}v/{}/", kept["version"].as_str().unwrap()));
            }
        }
    }
    objects
        .into_iter()
        .map(|meta| meta.location.to_string())
        .filter(|path| {
            if path.starts_with(".dial-host/gc/") || purged_markers.contains(path) {
                return true;
            }
            match path.find("/v/") {
                Some(at) => {
                    let version_end = path[at + 3..].find('/').map(|end| at + 3 + end + 1).unwrap_or(path.len());
                    !current.contains(&path[..version_end])
                }
                None => false,
            }
        })
        .collect()
}

async fn many_instances_under_load_and_a_kill_lose_no_acknowledged_write(backend: &str) {
    let Some(emulator) = services::emulator(backend) else { return };
    let Some(redis) = services::redis() else { return };
    emulator.create(BUCKET);
    let mut cluster = Cluster::start(&emulator, &redis);
    let (http, clients, stop) = start_clients(&cluster, false).await;
    let started = Instant::now();
    tokio::time::sleep(PHASE).await;
    cluster.kill(0);
    tokio::time::sleep(PHASE).await;
    cluster.restart(0);
    tokio::time::sleep(PHASE).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut runs = Vec::new();
    for client in clients {
        runs.push(client.await.expect("a client task"));
    }
    let traffic = started.elapsed();
    let report = check(&cluster, &emulator, &http, runs).await;
    eprintln!(
        "{backend}: {INSTANCES} instances, {CLIENTS} clients, {traffic:?} of traffic with one SIGKILL and restart: \
         {} operations {:?}, {} cut off by the kill, {} answered 503; {} objects in the store after the sweep \
         ({:?} after the traffic)",
        report.total, report.operations, report.cut_off, report.unavailable, report.objects, report.swept_in
    );
    assert!(report.violations.is_empty(), "{} violations:\n{}", report.violations.len(), report.violations.join("\n"));
    assert!(report.orphans.is_empty(), "orphaned objects after the sweep:\n{}", report.orphans.join("\n"));
    let puts = report.operations.get("put").copied().unwrap_or(0);
    assert!(puts > 20, "too little traffic to mean anything: {:?}", report.operations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_instances_on_s3_under_load_and_a_kill_lose_no_acknowledged_write() {
    many_instances_under_load_and_a_kill_lose_no_acknowledged_write("s3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_instances_on_azure_under_load_and_a_kill_lose_no_acknowledged_write() {
    many_instances_under_load_and_a_kill_lose_no_acknowledged_write("azure").await;
}

/// The bucket id of the clients' project key, and [`CLIENTS`] clients
/// stepping until `stop` (their runs come back from the tasks).
pub(crate) async fn start_clients(
    cluster: &Cluster,
    unavailable_is_expected: bool,
) -> (reqwest::Client, Vec<tokio::task::JoinHandle<ClientRun>>, Arc<std::sync::atomic::AtomicBool>) {
    let first = cluster.urls.lock().unwrap()[0].clone().unwrap();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let bucket: Value =
        http.get(format!("{first}/v1/bucket")).header("Api-Key", KEY).send().await.unwrap().json().await.unwrap();
    let bucket = bucket["bucket"].as_str().unwrap().to_string();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients = (0..CLIENTS)
        .map(|id| {
            let mut run = ClientRun {
                id,
                bucket: bucket.clone(),
                urls: cluster.urls.clone(),
                http: http.clone(),
                dice: Dice(0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)),
                possible: vec![vec![None]; RESOURCES_PER_CLIENT],
                deleted: vec![None; RESOURCES_PER_CLIENT],
                folders: 0,
                unavailable_is_expected,
                outcome: Outcome { violations: Vec::new(), operations: BTreeMap::new(), cut_off: 0, unavailable: 0 },
            };
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut round = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    round += 1;
                    run.step(round).await;
                }
                run
            })
        })
        .collect();
    (http, clients, stop)
}

/// What the checker found once the traffic stopped.
pub(crate) struct Report {
    pub(crate) violations: Vec<String>,
    pub(crate) orphans: Vec<String>,
    pub(crate) operations: BTreeMap<&'static str, usize>,
    pub(crate) total: usize,
    pub(crate) cut_off: usize,
    pub(crate) unavailable: usize,
    pub(crate) objects: usize,
    /// How long the sweep took, after the traffic, to leave nothing orphaned.
    pub(crate) swept_in: Duration,
}

/// Reads every client's resources back from every instance, checks them
/// against what their acknowledged operations allow and against the
/// listings, then waits for the sweep and lists what it left.
pub(crate) async fn check(
    cluster: &Cluster,
    emulator: &services::Emulator,
    http: &reqwest::Client,
    mut runs: Vec<ClientRun>,
) -> Report {
    let bucket = runs[0].bucket.clone();
    // Quiet now: every resource reads back as its operations allow, from
    // every instance, and the listings agree with the reads.
    let urls: Vec<String> = cluster.urls.lock().unwrap().iter().flatten().cloned().collect();
    assert_eq!(urls.len(), INSTANCES);
    let mut violations: Vec<String> = Vec::new();
    let mut operations: BTreeMap<&str, usize> = BTreeMap::new();
    let mut cut_off = 0;
    let mut unavailable = 0;
    for run in &mut runs {
        for (instance, base) in urls.iter().enumerate() {
            let listing = http
                .get(format!("{base}/v2/metadata/skills/{bucket}/c{}/", run.id))
                .header("Api-Key", KEY)
                .send()
                .await
                .unwrap();
            let listed: BTreeMap<String, String> = if listing.status() == 200 {
                let body: Value = listing.json().await.unwrap();
                body["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|item| item["nodeType"] == "ITEM")
                    .map(|item| {
                        (item["name"].as_str().unwrap().to_string(), item["etag"].as_str().unwrap().to_string())
                    })
                    .collect()
            } else {
                BTreeMap::new()
            };
            for index in 0..RESOURCES_PER_CLIENT {
                let url = run.resource(index);
                let reply = http.get(format!("{base}/v2/{url}")).header("Api-Key", KEY).send().await.unwrap();
                let status = reply.status().as_u16();
                let etag = reply.headers().get("etag").map(|v| v.to_str().unwrap().trim_matches('"').to_string());
                let seen = match status {
                    200 => match read_state(&reply.bytes().await.unwrap()) {
                        Ok(state) => Some(state),
                        Err(broken) => {
                            violations.push(format!("{url} on instance {instance}: {broken}"));
                            continue;
                        }
                    },
                    404 => None,
                    other => {
                        violations.push(format!("{url} on instance {instance}: final GET {other}"));
                        continue;
                    }
                };
                run.possible[index] = run.settle(index, seen.clone(), &format!("final GET on instance {instance}"));
                let listed_etag = listed.get(&format!("r{index}")).map(|e| e.trim_matches('"').to_string());
                if listed_etag != etag {
                    violations.push(format!(
                        "{url} on instance {instance}: listed with etag {listed_etag:?}, read with {etag:?}"
                    ));
                }
            }
        }
        violations.append(&mut run.outcome.violations);
        for (name, count) in &run.outcome.operations {
            *operations.entry(name).or_default() += count;
        }
        cut_off += run.outcome.cut_off;
        unavailable += run.outcome.unavailable;
    }

    // The sweep (every instance, every second) settles the journal once
    // the grace period has passed; then no object is orphaned.
    let store = dial_host::backends::open(&emulator.url(BUCKET), &emulator.storage_options()).unwrap();
    // A long run leaves thousands of journal entries: wait while the sweep is
    // still making progress, and give up only once it has made none for the
    // grace period and a minute.
    let mut fewest = usize::MAX;
    let sweep_started = Instant::now();
    let mut progress_at = Instant::now();
    let left = loop {
        let left = orphans(store.as_ref()).await;
        if left.len() < fewest {
            fewest = left.len();
            progress_at = Instant::now();
        }
        if left.is_empty() || progress_at.elapsed() > Duration::from_secs(GRACE_SECONDS + 60) {
            break left;
        }
        tokio::time::sleep(Duration::from_secs(if left.len() > 100 { 5 } else { 1 })).await;
    };
    let objects = store_listing(store.as_ref()).await.len();
    let total: usize = operations.values().sum();
    let swept_in = sweep_started.elapsed();
    Report { violations, orphans: left, operations, total, cut_off, unavailable, objects, swept_in }
}
