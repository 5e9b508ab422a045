//! Authentication over HTTP: project keys, HS256/RS256/ES256 tokens,
//! configurable claims, and the errors DIAL clients expect.

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

use crate::support::{Server, Setup};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

fn server(setup: &Setup) -> Server {
    let config = setup.config(&format!(
        r#"
        [encryption]
        secret = "blackbox-secret"
        [keys.alpha-key]
        project = "alpha"
        roles = ["user"]
        [identity]
        hs256_secret = "hs-secret"
        user_id_claim = "email"
        roles_claim = "realm_access.roles"
        [[identity.public_keys]]
        algorithm = "RS256"
        pem_file = "{rs}"
        [[identity.public_keys]]
        algorithm = "ES256"
        pem_file = "{es}"
        "#,
        rs = fixture("rs256-public.pem"),
        es = fixture("es256-public.pem"),
    ));
    setup.start(Some(&config), &[])
}

fn claims(email: &str) -> Value {
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 600;
    json!({"email": email, "exp": exp, "realm_access": {"roles": ["user"]}})
}

fn token(algorithm: Algorithm, claims: &Value) -> String {
    let key = match algorithm {
        Algorithm::HS256 => EncodingKey::from_secret(b"hs-secret").unwrap(),
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&std::fs::read(fixture("rs256-private.pem")).unwrap()).unwrap(),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&std::fs::read(fixture("es256-private.pem")).unwrap()).unwrap(),
        other => panic!("no test key for {other:?}"),
    };
    encode(&Header::new(algorithm), claims, &key).unwrap()
}

async fn bucket_of(server: &Server, headers: &[(&str, &str)]) -> String {
    let reply = server.client().get("/v1/bucket", headers).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["bucket"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn every_configured_signature_algorithm_is_accepted() {
    let setup = Setup::new();
    let server = server(&setup);
    let mut buckets = Vec::new();
    for algorithm in [Algorithm::HS256, Algorithm::RS256, Algorithm::ES256] {
        let bearer = format!("Bearer {}", token(algorithm, &claims("ann@example.com")));
        buckets.push(bucket_of(&server, &[("Authorization", &bearer)]).await);
    }
    // One user, one bucket, whoever signed the token.
    assert!(buckets.windows(2).all(|pair| pair[0] == pair[1]), "{buckets:?}");

    let other_user = format!("Bearer {}", token(Algorithm::HS256, &claims("bob@example.com")));
    assert_ne!(bucket_of(&server, &[("Authorization", &other_user)]).await, buckets[0]);
    assert_ne!(bucket_of(&server, &[("Api-Key", "alpha-key")]).await, buckets[0]);
}

#[tokio::test]
async fn credentials_that_do_not_check_out_are_refused() {
    let setup = Setup::new();
    let server = server(&setup);
    let client = server.client();
    let expect = |status: u16, body: &str, reply: crate::support::Reply| {
        assert_eq!(reply.status, status, "{}", reply.body);
        assert!(reply.body.contains(body), "{:?} should contain {body:?}", reply.body);
    };

    expect(401, "At least API-KEY or Authorization header must be provided", client.get("/v1/bucket", &[]).await);
    expect(401, "Unknown api key", client.get("/v1/bucket", &[("Api-Key", "wrong")]).await);

    let mut expired = claims("ann@example.com");
    expired["exp"] = json!(1_000_000);
    let bearer = format!("Bearer {}", token(Algorithm::HS256, &expired));
    expect(401, "Bad Authorization header", client.get("/v1/bucket", &[("Authorization", &bearer)]).await);

    let no_email = json!({"sub": "x", "exp": claims("x")["exp"]});
    let bearer = format!("Bearer {}", token(Algorithm::RS256, &no_email));
    expect(401, "email", client.get("/v1/bucket", &[("Authorization", &bearer)]).await);

    expect(401, "Bad Authorization header", client.get("/v1/bucket", &[("Authorization", "Bearer a.b.c")]).await);

    let bearer = format!("Bearer {}", token(Algorithm::HS256, &claims("ann@example.com")));
    expect(
        400,
        "Either API-KEY or Authorization header must be provided but not both",
        client.get("/v1/bucket", &[("Api-Key", "alpha-key"), ("Authorization", &bearer)]).await,
    );
}
