//! `POST /v1/ops/resource/copy` and `/move` end to end: every kind of item
//! (v1 file, v1 prompt, v2 skill), `overwrite`, the access each needs, the
//! errors, and what a move does to shares within and across buckets.

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::sharing::Fixture;
use crate::support::{JwtUser as User, Reply, Setup};

async fn transfer(f: &Fixture, user: &User, op: &str, source: &str, destination: &str, overwrite: bool) -> Reply {
    let body = json!({"sourceUrl": source, "destinationUrl": destination, "overwrite": overwrite});
    f.post(user, &format!("/v1/ops/resource/{op}"), body).await
}

async fn put_file(f: &Fixture, user: &User, path: &str, content: &[u8]) -> Reply {
    f.client.put_files(&format!("/v1/files/{path}"), &user.auth(), &[("f", content)]).await
}

/// Shares `url` with `permissions` and has `grantee` accept.
async fn share_with(f: &Fixture, owner: &User, grantee: &User, url: &str, permissions: &[&str]) {
    let body = json!({"invitationType": "link", "resources": [{"url": url, "permissions": permissions}]});
    let reply = f.post(owner, "/v1/ops/resource/share/create", body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let link = reply.json()["invitationLink"].as_str().unwrap().to_string();
    let accepted = f.get(grantee, &format!("{link}?accept=true")).await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
}

#[tokio::test]
async fn every_kind_of_item_is_copied_and_moved_in_one_commit() {
    let f = Fixture::start("").await;
    let a = f.alice.bucket.clone();

    // A v1 file: copy, refused over an existing one, then overwritten.
    assert_eq!(put_file(&f, &f.alice, &format!("{a}/docs/a.txt"), b"first").await.status, 200);
    assert_eq!(put_file(&f, &f.alice, &format!("{a}/docs/b.txt"), b"second").await.status, 200);
    let copied =
        transfer(&f, &f.alice, "copy", &format!("files/{a}/docs/a.txt"), &format!("files/{a}/c.txt"), false).await;
    assert_eq!(copied.status, 200);
    assert_eq!(f.get(&f.alice, &format!("/v1/files/{a}/c.txt")).await.body, "first");
    assert_eq!(f.get(&f.alice, &format!("/v1/files/{a}/docs/a.txt")).await.body, "first", "the source stays");
    let again =
        transfer(&f, &f.alice, "copy", &format!("files/{a}/docs/b.txt"), &format!("files/{a}/c.txt"), false).await;
    assert_eq!(again.status, 412, "overwrite defaults to false");
    assert_eq!(f.get(&f.alice, &format!("/v1/files/{a}/c.txt")).await.body, "first", "unchanged");
    let over =
        transfer(&f, &f.alice, "copy", &format!("files/{a}/docs/b.txt"), &format!("files/{a}/c.txt"), true).await;
    assert_eq!(over.status, 200);
    assert_eq!(f.get(&f.alice, &format!("/v1/files/{a}/c.txt")).await.body, "second");
    let moved =
        transfer(&f, &f.alice, "move", &format!("files/{a}/c.txt"), &format!("files/{a}/moved/c.txt"), false).await;
    assert_eq!(moved.status, 200);
    assert_eq!(f.get(&f.alice, &format!("/v1/files/{a}/c.txt")).await.status, 404);
    assert_eq!(f.get(&f.alice, &format!("/v1/files/{a}/moved/c.txt")).await.body, "second");

    // A v1 prompt (JSON).
    let prompt = json!({"name": "p", "content": "Summarize {{text}}"}).to_string();
    let put = f.client.put_body(&format!("/v1/prompts/{a}/p"), &f.alice.auth(), prompt.as_bytes()).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let copy = transfer(&f, &f.alice, "copy", &format!("prompts/{a}/p"), &format!("prompts/{a}/q"), false).await;
    assert_eq!(copy.status, 200, "{}", copy.body);
    let read: Value = f.get(&f.alice, &format!("/v1/prompts/{a}/q")).await.json();
    assert_eq!(read["content"], "Summarize {{text}}");

    // A v2 skill: a fresh, re-validated resource with the same content etag.
    f.put_skill(&f.alice, "team/s", "s").await;
    let copy = transfer(&f, &f.alice, "copy", &format!("skills/{a}/team/s"), &format!("skills/{a}/s"), false).await;
    assert_eq!(copy.status, 200, "{}", copy.body);
    let source = f.get(&f.alice, &format!("/v2/skills/{a}/team/s")).await;
    let copy = f.get(&f.alice, &format!("/v2/skills/{a}/s")).await;
    assert_eq!((source.status, copy.status), (200, 200));
    assert_eq!(copy.etag(), source.etag(), "same files, same aggregate etag");
    let script = f.get(&f.alice, &format!("/v2/skills/{a}/s/files/scripts/run.py")).await;
    assert_eq!(script.body, "print('hi')\n");
    // The listing form of a resource (`…/s/`) names the resource itself, as
    // a source and as a destination that does not exist yet.
    let moved =
        transfer(&f, &f.alice, "move", &format!("skills/{a}/s/"), &format!("skills/{a}/archive/s/"), false).await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/s")).await.status, 404);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/archive/s")).await.etag(), source.etag());
    let over_existing =
        transfer(&f, &f.alice, "move", &format!("skills/{a}/archive/s"), &format!("skills/{a}/team/s"), false).await;
    assert_eq!(over_existing.status, 412, "{}", over_existing.body);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/archive/s")).await.status, 200, "nothing moved");
}

#[tokio::test]
async fn what_cannot_be_copied_or_moved_is_refused_with_the_reason() {
    let f = Fixture::start("").await;
    let (a, b) = (f.alice.bucket.clone(), f.bob.bucket.clone());
    f.put_skill(&f.alice, "s", "s").await;
    assert_eq!(put_file(&f, &f.alice, &format!("{a}/x.txt"), b"x").await.status, 200);
    let copy = "/v1/ops/resource/copy";

    let malformed = f.client.post(copy, &f.alice.auth(), "{not json").await;
    assert_eq!(malformed.status, 400);
    assert!(malformed.body.contains("Incorrect body"), "{}", malformed.body);
    let missing = f.post(&f.alice, copy, json!({"destinationUrl": format!("files/{a}/y")})).await;
    assert_eq!((missing.status, missing.body.contains("sourceUrl")), (400, true), "{}", missing.body);
    let cases = [
        (format!("skills/{a}/s"), format!("files/{a}/s"), "same type"),
        (format!("files/{a}/x.txt"), format!("files/{a}/folder/"), "folder"),
        (format!("files/{a}/x.txt"), format!("files/{a}/x.txt"), "cannot be the same"),
    ];
    for (source, destination, reason) in cases {
        let reply = transfer(&f, &f.alice, "copy", &source, &destination, false).await;
        assert_eq!(reply.status, 400, "{source} → {destination}: {}", reply.body);
        assert!(reply.body.contains(reason), "{reason}: {}", reply.body);
    }
    // A v2 destination in folder form names the resource to make there,
    // unless a folder is there: an item onto a folder stays a 400 (SPEC §11).
    assert_eq!(f.client.put_empty(&format!("/v2/skills/{a}/grp/"), &f.alice.auth()).await.status, 200);
    let onto_folder = transfer(&f, &f.alice, "copy", &format!("skills/{a}/s"), &format!("skills/{a}/grp/"), true).await;
    assert_eq!(onto_folder.status, 400, "{}", onto_folder.body);
    assert!(onto_folder.body.contains("A folder already exists"), "{}", onto_folder.body);
    let gone = transfer(&f, &f.alice, "copy", &format!("files/{a}/none.txt"), &format!("files/{a}/y.txt"), false).await;
    assert_eq!(gone.status, 404, "{}", gone.body);

    // Bob may neither read Alice's skill nor write into her bucket.
    let read_other = transfer(&f, &f.bob, "copy", &format!("skills/{a}/s"), &format!("skills/{b}/s"), false).await;
    assert_eq!(read_other.status, 403, "{}", read_other.body);
    f.put_skill(&f.bob, "mine", "mine").await;
    let write_other =
        transfer(&f, &f.bob, "copy", &format!("skills/{b}/mine"), &format!("skills/{a}/mine"), false).await;
    assert_eq!(write_other.status, 403);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/mine")).await.status, 404, "nothing written");
}

#[tokio::test]
async fn a_move_carries_shares_within_a_bucket_and_ends_them_across() {
    let f = Fixture::start("").await;
    let (a, b, c) = (f.alice.bucket.clone(), f.bob.bucket.clone(), f.carol.bucket.clone());
    f.put_skill(&f.alice, "s", "s").await;
    share_with(&f, &f.alice, &f.bob, &format!("skills/{a}/s"), &["READ"]).await;
    assert_eq!(f.get(&f.bob, &format!("/v2/skills/{a}/s")).await.status, 200);

    // Within Alice's bucket: Bob's grant follows the skill.
    let moved = transfer(&f, &f.alice, "move", &format!("skills/{a}/s"), &format!("skills/{a}/t"), false).await;
    assert_eq!(moved.status, 200, "{}", moved.body);
    assert_eq!(f.get(&f.bob, &format!("/v2/skills/{a}/t")).await.status, 200, "the share moved with it");
    assert_ne!(f.get(&f.bob, &format!("/v2/skills/{a}/s")).await.status, 200);

    // READ lets Bob copy it into his bucket, not move it (that needs WRITE).
    let copy = transfer(&f, &f.bob, "copy", &format!("skills/{a}/t"), &format!("skills/{b}/t"), false).await;
    assert_eq!(copy.status, 200, "{}", copy.body);
    let steal = transfer(&f, &f.bob, "move", &format!("skills/{a}/t"), &format!("skills/{b}/u"), false).await;
    assert_eq!(steal.status, 403, "{}", steal.body);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/t")).await.status, 200);

    // Across buckets (into a folder Carol lets Alice write): the shares end.
    share_with(&f, &f.carol, &f.alice, &format!("skills/{c}/inbox/"), &["READ", "WRITE"]).await;
    let away = transfer(&f, &f.alice, "move", &format!("skills/{a}/t"), &format!("skills/{c}/inbox/t"), false).await;
    assert_eq!(away.status, 200, "{}", away.body);
    assert_eq!(f.get(&f.carol, &format!("/v2/skills/{c}/inbox/t")).await.status, 200);
    assert_eq!(f.get(&f.alice, &format!("/v2/skills/{a}/t")).await.status, 404);
    assert_eq!(f.get(&f.bob, &format!("/v2/skills/{c}/inbox/t")).await.status, 403, "Bob's grant did not travel");
    f.put_skill(&f.alice, "t", "t").await;
    assert_eq!(f.get(&f.bob, &format!("/v2/skills/{a}/t")).await.status, 403, "and does not come back");
}

/// Moves cut off by a SIGKILL at whatever point they reached: after a
/// restart every skill is whole at its source, its destination or both —
/// never at neither, never half there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_cut_off_by_a_sigkill_leave_the_source_or_the_destination_whole() {
    const KEY: &str = "mover-key";
    const SKILLS: usize = 32;
    /// Moves in flight at once: the kill finds this many cut off mid-way
    /// while the rest are done or not begun. (All 32 at once finish in one
    /// burst, so a kill timed against the clock found all or none done.)
    const IN_FLIGHT: usize = 4;
    let setup = Setup::new();
    let config =
        setup.config(&format!("[encryption]\nsecret = \"s\"\n[keys.{KEY}]\nproject = \"p\"\nroles = [\"user\"]\n"));
    let auth = [("Api-Key", KEY)];
    // (only at the source, at both, only at the destination), over all rounds.
    let mut outcomes = (0, 0, 0);
    // Round r kills the server once r quarters of the moves have answered.
    for round in 1..4u32 {
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let bucket = client.get("/v1/bucket", &auth).await.json()["bucket"].as_str().unwrap().to_string();
        let mut etags = Vec::new();
        for i in 0..SKILLS {
            let skill_md = format!("---\nname: r{round}-s{i}\ndescription: Moved around.\n---\n# r{round}-s{i}\n");
            let data: Vec<Vec<u8>> = (0..6).map(|f| vec![(i * 8 + f) as u8; 16 << 10]).collect();
            let names: Vec<String> = (0..data.len()).map(|f| format!("data/{f}.bin")).collect();
            let mut files: Vec<(&str, &[u8])> = vec![("SKILL.md", skill_md.as_bytes())];
            files.extend(names.iter().map(String::as_str).zip(data.iter().map(Vec::as_slice)));
            let put = client.put_files(&format!("/v2/skills/{bucket}/r{round}-s{i}"), &auth, &files).await;
            assert_eq!(put.status, 200, "{}", put.body);
            etags.push(put.etag());
        }
        // Plain reqwest: the requests the kill cuts off fail, and that is fine.
        let http = reqwest::Client::new();
        let url = format!("{}/v1/ops/resource/move", server.url);
        let moves = futures_util::stream::iter(0..SKILLS).map(|i| {
            let body = json!({
                "sourceUrl": format!("skills/{bucket}/r{round}-s{i}"),
                "destinationUrl": format!("skills/{bucket}/moved/r{round}-s{i}"),
            });
            let send = http.post(&url).header("Api-Key", KEY).body(body.to_string()).send();
            async move { (i, send.await) }
        });
        let mut answers = moves.buffer_unordered(IN_FLIGHT);
        let mut answered = std::collections::HashSet::new();
        while answered.len() < SKILLS * round as usize / 4 {
            let (i, reply) = answers.next().await.unwrap();
            assert_eq!(reply.unwrap().status(), 200);
            answered.insert(i);
        }
        let pid = server.pid().to_string();
        assert!(std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
        drop(answers);
        drop(server);

        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        for (i, etag) in etags.iter().enumerate() {
            let source = client.get(&format!("/v2/skills/{bucket}/r{round}-s{i}"), &auth).await;
            let destination = client.get(&format!("/v2/skills/{bucket}/moved/r{round}-s{i}"), &auth).await;
            let whole: Vec<&Reply> = [&source, &destination].into_iter().filter(|r| r.status == 200).collect();
            assert!(!whole.is_empty(), "round {round}, skill {i}: neither the source nor the destination is there");
            for reply in whole {
                assert_eq!(&reply.etag(), etag, "round {round}, skill {i}: a copy differs from what was moved");
            }
            for reply in [&source, &destination] {
                assert!(matches!(reply.status, 200 | 404), "round {round}, skill {i}: {}", reply.status);
            }
            if answered.contains(&i) {
                assert_eq!(
                    (source.status, destination.status),
                    (404, 200),
                    "round {round}, skill {i}: a move answered 200 did not survive the kill"
                );
            }
            match (source.status, destination.status) {
                (200, 404) => outcomes.0 += 1,
                (200, 200) => outcomes.1 += 1,
                _ => outcomes.2 += 1,
            }
        }
        drop(server);
    }
    eprintln!("skills only at the source, at both, only at the destination: {outcomes:?}");
    assert!(outcomes.0 > 0 && outcomes.2 > 0, "the kills came before or after every move: {outcomes:?}");
}
