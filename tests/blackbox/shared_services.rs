//! Several server instances over one S3 store (moto) and one Redis: what one
//! instance writes, another serves; locks and events go through Redis.

use crate::services;
use crate::support::Setup;

fn config(setup: &Setup, moto: &services::Moto, redis: &services::Redis, bucket: &str) -> std::path::PathBuf {
    let options: String = moto.storage_options().iter().map(|(k, v)| format!("{k} = {v:?}\n")).collect();
    setup.config(&format!(
        "[encryption]\nsecret = \"shared\"\n[keys.k1]\nproject = \"p\"\nroles = [\"user\"]\n\
         [storage]\nurl = \"s3://{bucket}\"\n[storage.options]\n{options}\
         [redis]\nurl = \"{}\"\nkey_prefix = \"{bucket}:\"\n",
        redis.url
    ))
}

#[tokio::test]
async fn two_instances_share_one_store_and_one_redis() {
    let Some(moto) = services::moto() else { return };
    let Some(redis) = services::redis() else { return };
    moto.create_bucket("shared-instances");
    let (setup_a, setup_b) = (Setup::new(), Setup::new());
    let a = setup_a.start(Some(&config(&setup_a, &moto, &redis, "shared-instances")), &[]);
    let b = setup_b.start(Some(&config(&setup_b, &moto, &redis, "shared-instances")), &[]);
    let (client_a, client_b) = (a.client(), b.client());
    assert_eq!(client_a.get("/ready", &[]).await.status, 200);

    let key = [("Api-Key", "k1")];
    let bucket = client_a.get("/v1/bucket", &key).await.json()["bucket"].as_str().unwrap().to_string();
    assert_eq!(client_b.get("/v1/bucket", &key).await.json()["bucket"], bucket.as_str(), "same secret, same ids");

    let skill = b"---\nname: shared\ndescription: Written on A, read on B.\n---\n";
    let url = format!("/v2/skills/{bucket}/team/shared");
    let put = client_a.put_files(&url, &key, &[("SKILL.md", skill), ("data/x.bin", &[1, 2, 3])]).await;
    assert_eq!(put.status, 200, "{}", put.body);
    let get = client_b.get(&url, &key).await;
    assert_eq!((get.status, get.etag()), (200, put.etag()));
    let file = client_b.get(&format!("{url}/files/data/x.bin"), &key).await;
    assert_eq!(file.bytes, [1, 2, 3]);
    let listing = client_b.get(&format!("/v2/metadata/skills/{bucket}/team/"), &key).await.json();
    assert_eq!(listing["items"][0]["metadata"]["description"], "Written on A, read on B.");

    // A create-only PUT on B sees A's resource.
    let again = client_b.put_files(&url, &[("Api-Key", "k1"), ("If-None-Match", "*")], &[("SKILL.md", skill)]).await;
    assert_eq!(again.status, 412);
    assert_eq!(client_b.delete(&url, &key).await.status, 200);
    assert_eq!(client_a.get(&url, &key).await.status, 404);
}
