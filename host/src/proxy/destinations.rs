//! Where a stored application may be called (SPEC "8–9 under attack":
//! destinations).
//!
//! Anyone who can write an application definition chooses its endpoint, and
//! the host then calls it with a minted key and relays the answer: without a
//! check that is a way to reach the host's own network. A stored
//! application's connections therefore never reach loopback, private
//! (RFC 1918, `fc00::/7`), link-local (`169.254/16`, `fe80::/10`), CGNAT
//! (`100.64/10`), unspecified or multicast addresses, unless the operator
//! lists the host or a CIDR in `proxy.allowed_destinations`.
//!
//! The check is on the address each connection is made to — the DNS
//! resolver of the guarded client drops refused addresses, so a name that
//! resolves somewhere else on the next lookup (DNS rebinding) is checked
//! again — and on IP literals in every URL the proxy requests, redirects
//! included. Configuration applications are the operator's and unchecked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// A connection the guard refused: rendered as 502 "The application's
/// endpoint is not allowed".
#[derive(Debug, thiserror::Error)]
#[error("{host} resolves only to addresses stored applications may not reach")]
pub struct DestinationRefused {
    pub host: String,
}

/// `proxy.allowed_destinations`, parsed.
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    /// Host names, lower case.
    hosts: Vec<String>,
    networks: Vec<IpNet>,
}

impl Destinations {
    /// Each entry is a CIDR, an address or a host name; anything with a
    /// scheme, port or path is a configuration error naming it.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut allowed = Self::default();
        for entry in entries {
            let entry = entry.trim();
            if let Ok(network) = entry.parse::<IpNet>() {
                allowed.networks.push(network);
            } else if let Ok(address) = entry.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
                allowed.networks.push(IpNet::from(address));
            } else if !entry.is_empty()
                && entry.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            {
                allowed.hosts.push(entry.trim_end_matches('.').to_ascii_lowercase());
            } else {
                return Err(format!(
                    "proxy.allowed_destinations: '{entry}' is not a host name, an IP address or a CIDR"
                ));
            }
        }
        Ok(allowed)
    }

    /// Whether `host` (a name from a URL) is listed by name.
    pub fn names(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    /// Whether a stored application may connect to `address`.
    pub fn admits(&self, address: IpAddr) -> bool {
        is_global(address) || self.networks.iter().any(|network| network.contains(&address))
    }

    /// The check for a URL's host before a request: an IP literal is judged
    /// here (no resolver sees it), a name by the guarded resolver.
    pub fn check_url(&self, url: &url::Url) -> Result<(), DestinationRefused> {
        let refused = || DestinationRefused { host: url.host_str().unwrap_or_default().to_string() };
        match url.host() {
            Some(url::Host::Ipv4(address)) if !self.admits(address.into()) => Err(refused()),
            Some(url::Host::Ipv6(address)) if !self.admits(address.into()) => Err(refused()),
            Some(_) => Ok(()),
            None => Err(refused()),
        }
    }
}

/// Whether an address is one anybody on the internet could reach: not
/// loopback, private, link-local, CGNAT, unspecified, multicast, broadcast
/// or reserved — judged on the IPv4 address an IPv6 one embeds (mapped,
/// compatible, NAT64), which reaches the same host.
fn is_global(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => is_global_v4(v4),
            None => is_global_v6(v6),
        },
    }
}

fn is_global_v4(address: Ipv4Addr) -> bool {
    let [a, b, ..] = address.octets();
    !(address.is_loopback()
        || address.is_private()
        || address.is_link_local()
        || address.is_unspecified()
        || address.is_multicast()
        || address.is_broadcast()
        || address.is_documentation()
        || a == 0 // "this network": 0.x.y.z reaches the host itself on Linux
        || (a == 100 && (b & 0xc0) == 64) // CGNAT 100.64.0.0/10
        || (a == 192 && b == 0 && address.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b & 0xfe) == 18) // benchmarking 198.18.0.0/15
        || a >= 240) // reserved
}

fn is_global_v6(address: Ipv6Addr) -> bool {
    let [first, second, third, ..] = address.segments();
    !(address.is_loopback()
        || address.is_unspecified()
        || address.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated) fec0::/10
        || (first == 0x0064 && second == 0xff9b && third == 0x0001) // local-use NAT64 64:ff9b:1::/48 (RFC 8215)
        || (first == 0x0100 && second == 0 && third == 0 && address.segments()[3] == 0) // discard-only 100::/64
        || (first == 0x2001 && second == 0) // Teredo 2001::/32: tunnels to an IPv4 address
        || (first == 0x2001 && second == 0x0db8)) // documentation
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::`)
/// address: the host a connection to it reaches.
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    let segments = address.segments();
    let v4 = |high: u16, low: u16| Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8);
    match segments {
        [0, 0, 0, 0, 0, 0xffff, ..] => Some(v4(segments[6], segments[7])),
        [0, 0, 0, 0, 0, 0, high, _] if high != 0 => Some(v4(segments[6], segments[7])),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(v4(segments[6], segments[7])),
        [0x2002, high, low, ..] => Some(v4(high, low)),
        _ => None,
    }
}

/// The resolver of the client stored applications are called with: the
/// system's lookup, minus the addresses [`Destinations`] refuses.
pub struct GuardedResolver {
    pub destinations: Arc<Destinations>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let destinations = self.destinations.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if destinations.names(&host) {
                return Ok(Box::new(found.into_iter()) as Addrs);
            }
            let admitted: Vec<SocketAddr> =
                found.iter().copied().filter(|address| destinations.admits(address.ip())).collect();
            if admitted.is_empty() {
                return Err(Box::new(DestinationRefused { host }) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(admitted.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn internal_addresses_are_refused_and_public_ones_admitted() {
        let none = Destinations::default();
        for refused in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::a00:1",
            "64:ff9b:1:a00:1::",
            "64:ff9b:1:ffff:ffff::1",
            "2002:a00:1::1",
            "2002:7f00:1::",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "100::1",
        ] {
            assert!(!none.admits(ip(refused)), "{refused} must be refused");
        }
        for admitted in
            ["8.8.8.8", "1.1.1.1", "100.128.0.1", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]
        {
            assert!(none.admits(ip(admitted)), "{admitted} must be admitted");
        }
    }

    #[test]
    fn the_operator_lists_hosts_addresses_and_networks() {
        let allowed =
            Destinations::parse(&["127.0.0.1".into(), "10.20.0.0/16".into(), "MCP.internal.".into(), "[::1]".into()])
                .unwrap();
        assert!(allowed.admits(ip("127.0.0.1")) && !allowed.admits(ip("127.0.0.2")));
        assert!(allowed.admits(ip("10.20.3.4")) && !allowed.admits(ip("10.21.0.1")));
        assert!(allowed.admits(ip("::1")));
        assert!(allowed.names("mcp.internal") && !allowed.names("other.internal"));
        for bad in ["http://x", "x:80", "a/b", ""] {
            let error = Destinations::parse(&[bad.into()]).unwrap_err();
            assert!(error.contains("allowed_destinations"), "{error}");
        }
    }

    #[test]
    fn ip_literals_in_urls_are_checked() {
        let none = Destinations::default();
        for refused in ["http://127.0.0.1:8080/x", "http://[::1]/", "http://[::ffff:10.0.0.1]/", "http://0/"] {
            assert!(none.check_url(&url::Url::parse(refused).unwrap()).is_err(), "{refused}");
        }
        assert!(none.check_url(&url::Url::parse("https://8.8.8.8/").unwrap()).is_ok());
        assert!(none.check_url(&url::Url::parse("http://localhost/").unwrap()).is_ok(), "names go to the resolver");
    }
}
