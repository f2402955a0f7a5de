//! Who the client is, as every per-address limit sees it: the socket peer, or behind a proxy
//! we run, the address that proxy saw; IPv6 clients grouped by network prefix.
//!
//! Why by sender and not by count: `X-Forwarded-For` is a list anyone can write. Only an entry
//! appended by a proxy we run is evidence, and only when the request reaches us from that
//! proxy. So the header is read only when the socket peer is a configured proxy address or
//! network (`--trusted-proxy`, as nginx's `set_real_ip_from`), and read from the right,
//! skipping entries that are themselves our proxies (a CDN then a load balancer): the first
//! entry that is not ours is the client. A client reaching a replica directly is its socket
//! address whatever it writes.
//!
//! Why prefixes for IPv6: an ordinary IPv6 subscriber holds a /64 (2^64 addresses) and can
//! send each request from a new one; per-address buckets would never fill. An IPv6 client is
//! its `--ipv6-prefix` network (default /64) in every per-address bucket. IPv4-mapped IPv6
//! peers (`::ffff:a.b.c.d`, a dual-stack socket) count as the IPv4 address.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderName;
pub use ipnet::IpNet;

/// Default of `--ipv6-prefix`: the network an ordinary IPv6 subscriber is given.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// The client as the per-address limits see it; set on every request by the route guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddr {
    /// The bucket key: an IPv4 address, or an IPv6 network (`2001:db8:1:2::/64`);
    /// `local` for a request with no socket (dispatched in-process).
    pub bucket: String,
    /// Whether the request came through one of our proxies (its forwarded headers are ours).
    pub via_proxy: bool,
}

/// Parses one `--trusted-proxy` value: an address (`10.0.0.5`) or a network (`10.0.0.0/8`).
pub fn parse_proxy(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!(
                "{s:?} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24): name the proxies in front of the service by address, not by count"
            )
        })
}

/// The bucket an address counts in: IPv4 as itself, IPv6 as its `v6_prefix` network.
pub fn bucket_of(ip: IpAddr, v6_prefix: u8) -> String {
    match ip {
        IpAddr::V4(v4) => v4_text(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4_text(v4),
            None => {
                let prefix = v6_prefix.min(128);
                let net = ipnet::Ipv6Net::new(v6, prefix)
                    .expect("a prefix of at most 128")
                    .trunc();
                net.to_string()
            }
        },
    }
}

/// An IPv4 address in dotted decimal, as `Display` writes it, without the formatter (which
/// handles widths and padding, a tenth of a keyed request's work before this).
fn v4_text(v4: std::net::Ipv4Addr) -> String {
    let mut s = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        if octet >= 100 {
            s.push(char::from(b'0' + octet / 100));
        }
        if octet >= 10 {
            s.push(char::from(b'0' + octet / 10 % 10));
        }
        s.push(char::from(b'0' + octet % 10));
    }
    s
}

fn is_proxy(ip: IpAddr, proxies: &[IpNet]) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    proxies.iter().any(|n| n.contains(&ip))
}

/// The scheme a proxy says the client used (a name made once: a `&str` name is parsed and
/// checked on every lookup).
pub const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// Whether `req` reached us from one of our proxies (its forwarded headers are ours): what
/// [`client_of`] says in `via_proxy`, without working out the client's bucket.
pub fn from_proxy(req: &Request, proxies: &[IpNet]) -> bool {
    !proxies.is_empty()
        && req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .is_some_and(|c| is_proxy(c.0.ip(), proxies))
}

/// The client of `req` (see the module's comment).
pub fn client_of(req: &Request, proxies: &[IpNet], v6_prefix: u8) -> ClientAddr {
    let Some(peer) = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
    else {
        return ClientAddr {
            bucket: "local".to_owned(),
            via_proxy: false,
        };
    };
    let own = |ip: IpAddr, via_proxy| ClientAddr {
        bucket: bucket_of(ip, v6_prefix),
        via_proxy,
    };
    if !is_proxy(peer, proxies) {
        return own(peer, false);
    }
    // Several header fields are one list, in order; read from the right.
    let entries: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for entry in entries.iter().rev() {
        match entry.parse::<IpAddr>() {
            // Our own proxy's entry: the client is further left.
            Ok(ip) if is_proxy(ip, proxies) => client = ip,
            Ok(ip) => return own(ip, true),
            // Not an address: nothing further left can be believed; the last proxy seen
            // is as far as the evidence goes.
            Err(_) => break,
        }
    }
    own(client, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_bucket_is_the_address_as_display_writes_it() {
        let mut rng = rand::rng();
        let drawn =
            (0..10_000).map(|_| std::net::Ipv4Addr::from(rand::Rng::random::<u32>(&mut rng)));
        let edges = [0u32, 1, 9, 10, 99, 100, 255, 256, 0x0a00_0001, u32::MAX]
            .map(std::net::Ipv4Addr::from);
        for v4 in drawn.chain(edges) {
            assert_eq!(bucket_of(IpAddr::V4(v4), 64), v4.to_string());
        }
    }

    fn req(peer: [u8; 4], forwarded: &[&str]) -> Request {
        let mut b = axum::http::Request::builder().uri("/v1/meta");
        for f in forwarded {
            b = b.header("x-forwarded-for", *f);
        }
        let mut r = b.body(axum::body::Body::empty()).unwrap();
        r.extensions_mut()
            .insert(ConnectInfo(SocketAddr::from((peer, 40_000))));
        r
    }

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|n| parse_proxy(n).unwrap()).collect()
    }

    #[test]
    fn forwarded_for_counts_only_from_a_configured_proxy() {
        let lb = nets(&["10.0.0.2"]);
        // From the load balancer: the entry it appended, never one the client wrote.
        let through = req([10, 0, 0, 2], &["6.6.6.6, 198.51.100.1"]);
        assert_eq!(client_of(&through, &lb, 64).bucket, "198.51.100.1");
        assert!(client_of(&through, &lb, 64).via_proxy);
        // Straight to the replica, naming any address it likes: its own socket address.
        let direct = req([203, 0, 113, 9], &["198.51.100.1"]);
        assert_eq!(client_of(&direct, &lb, 64).bucket, "203.0.113.9");
        assert!(!client_of(&direct, &lb, 64).via_proxy);
        // No proxy configured: the header means nothing.
        assert_eq!(client_of(&through, &[], 64).bucket, "10.0.0.2");
    }

    #[test]
    fn behind_a_chain_of_our_proxies_the_first_entry_not_ours_is_the_client() {
        let ours = nets(&["10.0.0.0/24", "192.0.2.0/28"]);
        // CDN edge 192.0.2.3 appended the client, the load balancer appended the edge.
        let r = req([10, 0, 0, 2], &["6.6.6.6, 198.51.100.1, 192.0.2.3"]);
        assert_eq!(client_of(&r, &ours, 64).bucket, "198.51.100.1");
        // Several header fields are one list.
        let r = req([10, 0, 0, 2], &["6.6.6.6", "198.51.100.1, 192.0.2.3"]);
        assert_eq!(client_of(&r, &ours, 64).bucket, "198.51.100.1");
        // An entry that is no address stops the walk at the last proxy seen.
        let r = req([10, 0, 0, 2], &["nonsense, 192.0.2.3"]);
        assert_eq!(client_of(&r, &ours, 64).bucket, "192.0.2.3");
        // No header at all: the proxy itself.
        assert_eq!(
            client_of(&req([10, 0, 0, 2], &[]), &ours, 64).bucket,
            "10.0.0.2"
        );
    }

    #[test]
    fn an_ipv6_client_is_its_prefix_in_every_bucket() {
        let ours = nets(&["10.0.0.2"]);
        let a = req([10, 0, 0, 2], &["2001:db8:1:2:aaaa::1"]);
        let b = req([10, 0, 0, 2], &["2001:db8:1:2:ffff:1:2:3"]);
        assert_eq!(client_of(&a, &ours, 64).bucket, "2001:db8:1:2::/64");
        assert_eq!(client_of(&a, &ours, 64), client_of(&b, &ours, 64));
        assert_eq!(client_of(&a, &ours, 48).bucket, "2001:db8:1::/48");
        assert_eq!(client_of(&a, &ours, 128).bucket, "2001:db8:1:2:aaaa::1/128");
        // IPv4 on a dual-stack socket is the IPv4 address.
        assert_eq!(
            bucket_of("::ffff:198.51.100.7".parse().unwrap(), 64),
            "198.51.100.7"
        );
    }

    #[test]
    fn a_proxy_is_named_by_address_or_network_never_by_count() {
        assert_eq!(parse_proxy("10.0.0.5").unwrap().to_string(), "10.0.0.5/32");
        assert_eq!(parse_proxy("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_proxy("::1").unwrap().to_string(), "::1/128");
        let e = parse_proxy("1").unwrap_err();
        assert!(e.contains("not by count"), "{e}");
    }
}
