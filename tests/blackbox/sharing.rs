//! DIAL's sharing API end to end: invitations, accept, the access they give
//! (v2 skills via a shared folder, v1 items), revoke, discard, copy, limits,
//! and deletion ending shares.

use serde_json::{Value, json};

use crate::support::{Client, JwtUser as User, Reply, Server, Setup};

pub(crate) const HS_SECRET: &str = "sharing-secret";

/// A server with JWT identities and three users; shared with `resource_ops`.
pub(crate) struct Fixture {
    _setup: Setup,
    _server: Server,
    pub(crate) client: Client,
    pub(crate) alice: User,
    pub(crate) bob: User,
    pub(crate) carol: User,
}

impl Fixture {
    pub(crate) async fn start(extra: &str) -> Self {
        let setup = Setup::new();
        let config = setup.config(&format!(
            "[encryption]\nsecret = \"s\"\n[identity]\nhs256_secret = \"{HS_SECRET}\"\nroles_claim = \"roles\"\n{extra}"
        ));
        let server = setup.start(Some(&config), &[]);
        let client = server.client();
        let alice = User::new(&client, HS_SECRET, "alice", &["user"]).await;
        let bob = User::new(&client, HS_SECRET, "bob", &["user"]).await;
        let carol = User::new(&client, HS_SECRET, "carol", &["user"]).await;
        Self { _setup: setup, _server: server, client, alice, bob, carol }
    }

    /// Where the server keeps its data (the local object store among it).
    pub(crate) fn data_dir(&self) -> std::path::PathBuf {
        self._setup.path().join("data")
    }

    pub(crate) async fn post(&self, user: &User, path: &str, body: Value) -> Reply {
        // DIAL clients send JSON as text/plain; the body is read whatever it says.
        let mut headers = user.auth().to_vec();
        headers.push(("Content-Type", "text/plain"));
        self.client.post(path, &headers, &body.to_string()).await
    }

    pub(crate) async fn get(&self, user: &User, path: &str) -> Reply {
        self.client.get(path, &user.auth()).await
    }

    pub(crate) async fn put_skill(&self, user: &User, path: &str, name: &str) {
        let skill_md = format!("---\nname: {name}\ndescription: Does {name} things.\n---\n# {name}\n");
        let files: [(&str, &[u8]); 2] = [("SKILL.md", skill_md.as_bytes()), ("scripts/run.py", b"print('hi')\n")];
        let reply = self.client.put_files(&format!("/v2/skills/{}/{path}", user.bucket), &user.auth(), &files).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }

    /// Shares `urls` (relative to the group) and returns the invitation id.
    async fn share(&self, owner: &User, urls: &[&str]) -> String {
        let resources: Vec<Value> = urls.iter().map(|u| json!({"url": u, "permissions": ["READ"]})).collect();
        let reply = self
            .post(owner, "/v1/ops/resource/share/create", json!({"invitationType": "link", "resources": resources}))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let link = reply.json()["invitationLink"].as_str().unwrap().to_string();
        link.strip_prefix("/v1/invitations/").unwrap().to_string()
    }

    async fn accept(&self, user: &User, id: &str) -> Reply {
        self.get(user, &format!("/v1/invitations/{id}?accept=true")).await
    }
}

#[tokio::test]
async fn a_skill_shared_via_its_folder_is_readable_by_the_grantee_only_until_revoked() {
    let f = Fixture::start("").await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "team/pdf-tools", "pdf-tools").await;
    let zip = format!("/v2/skills/{a}/team/pdf-tools");
    let file = format!("{zip}/files/scripts/run.py");
    let listing = format!("/v2/metadata/skills/{a}/team/");

    for path in [&zip, &file, &listing] {
        assert_eq!(f.get(&f.bob, path).await.status, 403, "{path} before sharing");
    }

    let id = f.share(&f.alice, &[&format!("skills/{a}/team/")]).await;
    assert!(id.len() >= 30 && id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
    let invitation = f.get(&f.bob, &format!("/v1/invitations/{id}")).await;
    assert_eq!(invitation.status, 200, "{}", invitation.body);
    assert_eq!(invitation.json()["resources"][0]["url"], format!("skills/{a}/team/"));
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);

    let reply = f.get(&f.bob, &zip).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/zip");
    let reply = f.get(&f.bob, &file).await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "print('hi')\n"));
    let reply = f.get(&f.bob, &listing).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["items"][0]["name"], "pdf-tools");

    // Read only: the grantee cannot write, and nobody else can read.
    let files: [(&str, &[u8]); 1] = [("SKILL.md", b"---\nname: x\ndescription: y\n---\n")];
    assert_eq!(f.client.put_files(&zip, &f.bob.auth(), &files).await.status, 403);
    assert_eq!(f.client.delete(&file, &f.bob.auth()).await.status, 403);
    for path in [&zip, &file, &listing] {
        assert_eq!(f.get(&f.carol, path).await.status, 403, "{path} for a stranger");
    }

    // Shared with me / by me.
    let mine = f.post(&f.bob, "/v1/ops/resource/share/list", json!({"resourceTypes": ["SKILL"], "with": "me"})).await;
    assert_eq!(mine.status, 200, "{}", mine.body);
    let resources = mine.json()["resources"].clone();
    assert_eq!(resources.as_array().unwrap().len(), 1, "{resources}");
    assert_eq!(resources[0]["nodeType"], "FOLDER");
    assert_eq!(resources[0]["resourceType"], "SKILL");
    assert_eq!(resources[0]["permissions"], json!(["READ"]));
    let others = f.post(&f.alice, "/v1/ops/resource/share/list", json!({"with": "others"})).await.json();
    assert_eq!(others["resources"][0]["url"], format!("skills/{a}/team/"));

    // Revoke takes effect on the next request.
    let reply = f
        .post(&f.alice, "/v1/ops/resource/share/revoke", json!({"resources": [{"url": format!("skills/{a}/team/")}]}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    for path in [&zip, &file, &listing] {
        assert_eq!(f.get(&f.bob, path).await.status, 403, "{path} after revoke");
    }
    let mine = f.post(&f.bob, "/v1/ops/resource/share/list", json!({"with": "me"})).await.json();
    assert_eq!(mine["resources"], json!([]));
}

#[tokio::test]
async fn invitations_are_owned_limited_and_end_with_the_resource() {
    let f = Fixture::start("[sharing.limits.SKILL]\nmax_accepted_users = 1\n").await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "pdf", "pdf").await;
    let url = format!("skills/{a}/pdf");

    // Validation.
    let create = "/v1/ops/resource/share/create";
    let reply = f.post(&f.alice, create, json!({"resources": []})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "No resources provided"));
    let reply = f.post(&f.alice, create, json!({"resources": [{"url": url}, {"url": url}]})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, format!("Duplicated resource: {url}").as_str()));
    let reply = f.post(&f.bob, create, json!({"resources": [{"url": url}]})).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body, format!("Resource {url} does not belong to the user"));
    let reply = f.post(&f.alice, create, json!({"resources": [{"url": "nonsense"}]})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "Incorrect resource link provided nonsense"));
    // Links may be made ahead of the resource, as in DIAL.
    let reply = f.post(&f.alice, create, json!({"resources": [{"url": format!("skills/{a}/missing")}]})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let ahead = reply.json()["invitationLink"].as_str().unwrap().to_string();
    assert_eq!(f.client.delete(&ahead, &f.alice.auth()).await.status, 200);
    assert_eq!(f.client.post(create, &f.alice.auth(), "{not json").await.status, 400);

    let id = f.share(&f.alice, &[&url]).await;
    let listed = f.get(&f.alice, "/v1/invitations").await.json();
    assert_eq!(listed["invitations"][0]["id"], id.as_str());
    assert_eq!(listed["invitations"][0]["maxAcceptedUsers"], 1);
    let ttl = listed["invitations"][0]["expireAt"].as_i64().unwrap()
        - listed["invitations"][0]["createdAt"].as_i64().unwrap();
    assert_eq!(ttl, 72 * 3_600_000, "skills: 72 h by default");

    let reply = f.accept(&f.alice, &id).await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.contains("already belong to you"), "{}", reply.body);
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    let reply = f.accept(&f.carol, &id).await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.starts_with("Limit is exceeded on the number of accepted users"), "{}", reply.body);

    // Only the owner deletes an invitation; unknown ids are 404.
    let reply = f.client.delete(&format!("/v1/invitations/{id}"), &f.bob.auth()).await;
    assert_eq!((reply.status, reply.body.as_str()), (403, "You are not invitation owner"));
    let reply = f.get(&f.bob, "/v1/invitations/NoSuchInvitation1").await;
    assert_eq!((reply.status, reply.body.as_str()), (404, "No invitation found for ID NoSuchInvitation1"));

    // Deleting the resource revokes its shares and invitations; re-creating
    // it brings neither back.
    assert_eq!(f.get(&f.bob, &format!("/v2/{url}")).await.status, 200);
    assert_eq!(f.client.delete(&format!("/v2/{url}"), &f.alice.auth()).await.status, 200);
    f.put_skill(&f.alice, "pdf", "pdf").await;
    assert_eq!(f.get(&f.bob, &format!("/v2/{url}")).await.status, 403);
    assert_eq!(f.get(&f.bob, &format!("/v1/invitations/{id}")).await.status, 404);
    assert_eq!(f.get(&f.alice, "/v1/invitations").await.json()["invitations"], json!([]));
}

#[tokio::test]
async fn discard_and_copy() {
    let f = Fixture::start("").await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "one", "one").await;
    f.put_skill(&f.alice, "two", "two").await;
    let one = format!("skills/{a}/one");
    let two = format!("skills/{a}/two");
    let id = f.share(&f.alice, &[&one]).await;
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    assert_eq!(f.accept(&f.carol, &id).await.status, 200);

    // The owner copies the grants of one resource onto another.
    let copy = f.post(&f.alice, "/v1/ops/resource/share/copy", json!({"sourceUrl": one, "destinationUrl": two})).await;
    assert_eq!(copy.status, 200, "{}", copy.body);
    assert_eq!(f.get(&f.bob, &format!("/v2/{two}")).await.status, 200);
    let copy = f.post(&f.bob, "/v1/ops/resource/share/copy", json!({"sourceUrl": one, "destinationUrl": two})).await;
    assert_eq!(copy.status, 400, "only the owner copies");

    // A grantee gives up its access; the other keeps it.
    let reply = f.post(&f.bob, "/v1/ops/resource/share/discard", json!({"resources": [{"url": one}]})).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(f.get(&f.bob, &format!("/v2/{one}")).await.status, 403);
    assert_eq!(f.get(&f.carol, &format!("/v2/{one}")).await.status, 200);

    // Revoke is for owners.
    let reply = f.post(&f.bob, "/v1/ops/resource/share/revoke", json!({"resources": [{"url": one}]})).await;
    assert_eq!((reply.status, reply.body.as_str()), (400, "You are only allowed to revoke access from own resources"));
}

#[tokio::test]
async fn concurrent_accepts_respect_the_user_limit() {
    let f = Fixture::start("[sharing.limits.SKILL]\nmax_accepted_users = 3\n").await;
    f.put_skill(&f.alice, "busy", "busy").await;
    let id = f.share(&f.alice, &[&format!("skills/{}/busy", f.alice.bucket)]).await;
    let mut users = Vec::new();
    for i in 0..8 {
        users.push(User::new(&f.client, HS_SECRET, &format!("user-{i}"), &["user"]).await);
    }
    let accepts = users.iter().map(|user| f.accept(user, &id));
    let statuses: Vec<u16> = futures_util::future::join_all(accepts).await.iter().map(|r| r.status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 3, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 400).count(), 5, "{statuses:?}");
}

#[tokio::test]
async fn v1_items_and_folders_are_shared_too() {
    let f = Fixture::start("").await;
    let a = &f.alice.bucket;
    let prompt = format!("/v1/prompts/{a}/team/greeting");
    let reply = f.client.put_empty(&prompt, &f.alice.auth()).await;
    assert_eq!(reply.status, 400, "an empty body is not JSON");
    let mut headers = f.alice.auth().to_vec();
    headers.push(("Content-Type", "text/plain"));
    let put = f.client.put_body(&prompt, &headers, br#"{"content": "Hello"}"#).await;
    assert_eq!(put.status, 200, "{}", put.body);

    assert_eq!(f.get(&f.bob, &prompt).await.status, 403);
    let id = f.share(&f.alice, &[&format!("prompts/{a}/team/")]).await;
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    let read = f.get(&f.bob, &prompt).await;
    assert_eq!((read.status, read.body.as_str()), (200, r#"{"content": "Hello"}"#));
    let listing = f.get(&f.bob, &format!("/v1/metadata/prompts/{a}/team/")).await;
    assert_eq!(listing.status, 200, "{}", listing.body);
    assert_eq!(f.client.delete(&prompt, &f.bob.auth()).await.status, 403, "READ does not allow delete");
    let mine = f.post(&f.bob, "/v1/ops/resource/share/list", json!({"resourceTypes": ["PROMPT"], "with": "me"})).await;
    assert_eq!(mine.json()["resources"][0]["resourceType"], "PROMPT");
    assert_eq!(mine.json()["resources"][0]["nodeType"], "FOLDER");
    let none = f.post(&f.bob, "/v1/ops/resource/share/list", json!({"resourceTypes": ["SKILL"], "with": "me"})).await;
    assert_eq!(none.json()["resources"], json!([]));

    // An item shared on its own: deleting it ends the share.
    let item = format!("/v1/prompts/{a}/solo");
    assert_eq!(f.client.put_body(&item, &headers, b"[1]").await.status, 200);
    let id = f.share(&f.alice, &[&format!("prompts/{a}/solo")]).await;
    assert_eq!(f.accept(&f.carol, &id).await.status, 200);
    assert_eq!(f.get(&f.carol, &item).await.status, 200);
    let listed = f.post(&f.carol, "/v1/ops/resource/share/list", json!({"with": "me"})).await.json();
    let node = &listed["resources"][0];
    assert_eq!((node["nodeType"].as_str(), node["name"].as_str()), (Some("ITEM"), Some("solo")));
    assert!(node["updatedAt"].as_i64().unwrap() > 0, "{node}");
    assert_eq!(f.client.delete(&item, &f.alice.auth()).await.status, 200);
    assert_eq!(f.client.put_body(&item, &headers, b"[2]").await.status, 200);
    assert_eq!(f.get(&f.carol, &item).await.status, 403, "re-creating does not restore the share");
}

impl Fixture {
    /// Shares `urls` with the given permissions and returns the invitation id.
    async fn share_with(&self, owner: &User, urls: &[&str], permissions: &[&str]) -> String {
        let resources: Vec<Value> = urls.iter().map(|u| json!({"url": u, "permissions": permissions})).collect();
        let reply = self.post(owner, "/v1/ops/resource/share/create", json!({"resources": resources})).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let link = reply.json()["invitationLink"].as_str().unwrap().to_string();
        link.strip_prefix("/v1/invitations/").unwrap().to_string()
    }

    async fn put_prompt(&self, user: &User, path: &str) {
        let url = format!("/v1/prompts/{}/{path}", user.bucket);
        let reply = self.client.put_body(&url, &user.auth(), br#"{"content": "hi"}"#).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
}

/// A folder grant covers what is under the folder, an item grant the item
/// only: an item and a folder of the same name stay apart, for reading,
/// listing, writing and deleting, and deleting one does not end the other's
/// shares. (On a memory store, as on S3, an item and a folder may share a
/// name at the same time.)
#[tokio::test]
async fn a_folder_grant_and_an_item_of_the_same_name_stay_apart() {
    let f = Fixture::start("[storage]\nurl = \"memory://\"\n").await;
    let a = &f.alice.bucket;
    f.put_prompt(&f.alice, "reports/q1").await;
    f.put_prompt(&f.alice, "reports").await; // an item beside the folder
    f.put_prompt(&f.alice, "doc").await;
    f.put_prompt(&f.alice, "doc/inner").await;
    let urls = [format!("prompts/{a}/reports/"), format!("prompts/{a}/doc")];
    let id = f.share_with(&f.alice, &[&urls[0], &urls[1]], &["READ", "WRITE"]).await;
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);

    assert_eq!(f.get(&f.bob, &format!("/v1/prompts/{a}/reports/q1")).await.status, 200);
    assert_eq!(f.get(&f.bob, &format!("/v1/metadata/prompts/{a}/reports/")).await.status, 200);
    assert_eq!(f.get(&f.bob, &format!("/v1/prompts/{a}/reports")).await.status, 403, "the item beside the folder");
    assert_eq!(f.client.delete(&format!("/v1/prompts/{a}/reports"), &f.bob.auth()).await.status, 403);
    assert_eq!(f.get(&f.bob, &format!("/v1/prompts/{a}/doc")).await.status, 200);
    let folder = f.get(&f.bob, &format!("/v1/metadata/prompts/{a}/doc/")).await;
    assert_eq!(folder.status, 403, "the folder beside the item");
    assert_eq!(f.get(&f.bob, &format!("/v1/prompts/{a}/doc/inner")).await.status, 403);

    // Deleting the item `reports` leaves the grant on the folder `reports/`.
    assert_eq!(f.client.delete(&format!("/v1/prompts/{a}/reports"), &f.alice.auth()).await.status, 200);
    assert_eq!(f.get(&f.bob, &format!("/v1/prompts/{a}/reports/q1")).await.status, 200);
}

/// The same on the local store, where a folder and an item cannot exist at
/// once: a folder grant outlives the folder's last item, and must not cover
/// an item created later under the folder's name.
#[tokio::test]
async fn a_folder_grant_does_not_cover_an_item_that_later_takes_its_name() {
    let f = Fixture::start("").await;
    let a = &f.alice.bucket;
    f.put_prompt(&f.alice, "reports/q1").await;
    let id = f.share_with(&f.alice, &[&format!("prompts/{a}/reports/")], &["READ", "WRITE"]).await;
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    assert_eq!(f.client.delete(&format!("/v1/prompts/{a}/reports/q1"), &f.alice.auth()).await.status, 200);
    f.put_prompt(&f.alice, "reports").await;
    assert_eq!(f.get(&f.bob, &format!("/v1/prompts/{a}/reports")).await.status, 403);
    assert_eq!(f.client.delete(&format!("/v1/prompts/{a}/reports"), &f.bob.auth()).await.status, 403);
}

/// A skill shared by the URL listings give it (`…/pdf/`) is shared as the
/// resource: the grantee reads its ZIP, files and metadata, and nothing else.
#[tokio::test]
async fn a_skill_shared_by_its_listing_url_is_shared_as_one_item() {
    let f = Fixture::start("").await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "team/pdf", "pdf").await;
    f.put_skill(&f.alice, "team/pdf-extra", "pdf-extra").await;
    let id = f.share(&f.alice, &[&format!("skills/{a}/team/pdf/")]).await;
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    for path in [
        format!("/v2/skills/{a}/team/pdf"),
        format!("/v2/skills/{a}/team/pdf/files/scripts/run.py"),
        format!("/v2/metadata/skills/{a}/team/pdf/"),
        format!("/v2/metadata/skills/{a}/team/pdf"),
    ] {
        assert_eq!(f.get(&f.bob, &path).await.status, 200, "{path}");
    }
    for path in [format!("/v2/skills/{a}/team/pdf-extra"), format!("/v2/metadata/skills/{a}/team/")] {
        assert_eq!(f.get(&f.bob, &path).await.status, 403, "{path}");
    }
    let shared = f.post(&f.bob, "/v1/ops/resource/share/list", json!({"with": "me"})).await.json();
    assert_eq!(shared["resources"].as_array().unwrap().len(), 1, "{shared}");
}

/// Revoking updates the invitations, as DIAL does: what was taken back is no
/// longer offered, so accepting the link again cannot restore it.
#[tokio::test]
async fn revoking_takes_back_what_the_invitation_offers() {
    let f = Fixture::start("").await;
    let a = &f.alice.bucket;
    f.put_skill(&f.alice, "team/pdf", "pdf").await;
    f.put_prompt(&f.alice, "notes").await;
    let (skills, notes) = (format!("skills/{a}/team/"), format!("prompts/{a}/notes"));
    let id = f.share_with(&f.alice, &[&skills, &notes], &["READ", "WRITE"]).await;
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    let skill_md: &[u8] = b"---\nname: pdf\ndescription: changed by bob\n---\n";
    let single_file = format!("/v2/skills/{a}/team/pdf/files/SKILL.md");
    let put =
        async |user: &User| f.client.put_files(&single_file, &user.auth(), &[("SKILL.md", skill_md)]).await.status;
    assert_eq!(put(&f.bob).await, 200, "bob may write before the revoke");

    // Revoke WRITE on the folder: the invitation offers READ only.
    let revoke = json!({"resources": [{"url": skills, "permissions": ["WRITE"]}]});
    assert_eq!(f.post(&f.alice, "/v1/ops/resource/share/revoke", revoke).await.status, 200);
    let listed = f.get(&f.alice, "/v1/invitations").await.json();
    let offered = &listed["invitations"][0]["resources"];
    assert_eq!(offered.as_array().unwrap().len(), 2, "{listed}");
    let folder = offered.as_array().unwrap().iter().find(|r| r["url"] == skills.as_str()).unwrap();
    assert_eq!(folder["permissions"], json!(["READ"]));
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    assert_eq!(put(&f.bob).await, 403, "accepting again does not bring WRITE back");
    assert_eq!(f.get(&f.bob, &format!("/v2/skills/{a}/team/pdf")).await.status, 200);

    // Revoke one resource entirely: the invitation lists only the other.
    let revoke = json!({"resources": [{"url": notes}]});
    assert_eq!(f.post(&f.alice, "/v1/ops/resource/share/revoke", revoke).await.status, 200);
    let listed = f.get(&f.alice, "/v1/invitations").await.json();
    let urls: Vec<&str> =
        listed["invitations"][0]["resources"].as_array().unwrap().iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert_eq!(urls, [skills.as_str()]);
    assert_eq!(f.accept(&f.bob, &id).await.status, 200);
    assert_eq!(f.get(&f.bob, &format!("/v1/prompts/{a}/notes")).await.status, 403);

    // Revoke the rest: no invitation is left, and the link is dead.
    let revoke = json!({"resources": [{"url": skills}]});
    assert_eq!(f.post(&f.alice, "/v1/ops/resource/share/revoke", revoke).await.status, 200);
    assert_eq!(f.get(&f.alice, "/v1/invitations").await.json(), json!({"invitations": []}));
    assert_eq!(f.accept(&f.bob, &id).await.status, 404);
    assert_eq!(f.get(&f.bob, &format!("/v2/skills/{a}/team/pdf")).await.status, 403);
}

/// DIAL's answers on the sharing API's edges, which clients match on.
#[tokio::test]
async fn sharing_edges_answer_as_dial_does() {
    let f = Fixture::start("").await;
    let a = &f.alice.bucket;
    f.put_prompt(&f.alice, "here").await;
    let copy = "/v1/ops/resource/share/copy";
    let missing = json!({"sourceUrl": format!("prompts/{a}/missing"), "destinationUrl": format!("prompts/{a}/here")});
    assert_eq!(f.post(&f.alice, copy, missing).await.status, 400, "a missing source is a bad request");

    let create = "/v1/ops/resource/share/create";
    for malformed in ["{not json", r#"{"resources": "nope"}"#, r#"{"resources": [{"url": 3}]}"#] {
        let reply = f.client.post(create, &f.alice.auth(), malformed).await;
        assert_eq!((reply.status, reply.body.as_str()), (400, "Can't initiate share request. Incorrect body"));
    }

    let raw_space = format!("prompts/{a}/my notes");
    let reply = f.post(&f.alice, create, json!({"resources": [{"url": raw_space}]})).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body, format!("Incorrect resource link provided {raw_space}"));
    let encoded = format!("prompts/{a}/my%20notes");
    assert_eq!(f.post(&f.alice, create, json!({"resources": [{"url": encoded}]})).await.status, 200);
}
