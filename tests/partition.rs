//! A network partition the test controls: a loopback TCP relay between a client (an instance, an engine)
//! and a real service (Redis, an object store emulator). `cut()` stops it carrying bytes either way — what
//! a partition does: connections stay open, nothing arrives, the sender's bytes wait (in the relay here,
//! in retransmission queues on a real network); `heal()` lets the held bytes through late, as a network
//! that comes back delivers what TCP kept retrying. New connections made while cut get no answer.
//!
//! Include it with `#[path = "../../tests/partition.rs"] mod partition;` (it needs a tokio runtime).

#![allow(dead_code)] // each test crate uses its own part

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct Link {
    /// The port clients connect to instead of the service's.
    pub port: u16,
    open: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl Link {
    /// A relay to `127.0.0.1:<target>`, open.
    pub async fn to(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a relay port");
        let port = listener.local_addr().unwrap().port();
        let (open, _) = watch::channel(true);
        let accept = tokio::spawn({
            let open = open.clone();
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    tokio::spawn(relay(client, ([127, 0, 0, 1], target).into(), open.subscribe()));
                }
            }
        });
        Self { port, open, accept }
    }

    /// `url` with the service's port replaced by the relay's (`redis://127.0.0.1:<port>`).
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// Stops carrying bytes, both ways, on every connection.
    pub fn cut(&self) {
        self.open.send_replace(false);
    }

    /// Carries bytes again, the held ones first.
    pub fn heal(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn relay(client: TcpStream, target: SocketAddr, mut open: watch::Receiver<bool>) {
    // A connection attempt during the cut waits, as a SYN into a partition does.
    if open.wait_for(|open| *open).await.is_err() {
        return;
    }
    let Ok(server) = TcpStream::connect(target).await else { return };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = tokio::spawn(carry(client_read, server_write, open.clone()));
    let down = tokio::spawn(carry(server_read, client_write, open.clone()));
    let _ = tokio::join!(up, down);
}

/// Copies `from` to `to`, holding each chunk while the link is cut.
async fn carry(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut open: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if open.wait_for(|open| *open).await.is_err() || to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
