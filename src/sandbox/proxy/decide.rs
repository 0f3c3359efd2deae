//! The proxy's decision: may this request reach this host, and at which addresses?
//!
//! ```text
//!  Host (parsed strictly) ──► a pattern matches? ── no ──► Deny(NotListed)   (never resolved)
//!                                   │ yes
//!               IP literal: itself; name: resolve once ──► no address ──► Unresolved
//!                                   │
//!        every address public, or a matching pattern names_local()? ── no ──► Deny(Local)
//!                                   │ yes
//!                            Allow(addresses)   ← the connection goes to one of exactly these
//! ```
//!
//! Pure given its resolver, so every rule has a unit test without a network.
//!
//! Common pitfalls:
//! * Resolving before matching leaks the name to DNS: a refused name is never looked up.
//! * Resolving twice (once to check, once to connect) lets a DNS answer change in between
//!   (rebinding): the caller connects to the addresses returned here, never to the name.
//! * `::ffff:127.0.0.1` is 127.0.0.1: addresses are compared and classified in their
//!   canonical (IPv4) form.
//! * One private address among public ones refuses the name: a name that answers both is a
//!   rebinding attempt more often than a real service.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::spec::HostPattern;

/// The host of a request, already parsed strictly (see `request::parse_host`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, lower case, without a trailing dot.
    Name(String),
    /// An IP literal, canonical (an IPv4-mapped IPv6 address is its IPv4 address).
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// What the proxy does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Connect to the first of these that answers; each one was checked.
    Allow(Vec<IpAddr>),
    /// The policy refuses the host.
    Deny(Refusal),
    /// The policy allows the name, but it has no address.
    Unresolved(String),
}

/// Why the policy refuses a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No pattern matches it.
    NotListed,
    /// It resolves to a non-public address, and no matching pattern names a local host.
    Local { address: IpAddr, class: AddrClass },
}

impl Refusal {
    /// The short reason recorded in `network.jsonl`.
    pub fn reason(&self) -> String {
        match self {
            Refusal::NotListed => "not listed".to_owned(),
            Refusal::Local { address, class } => format!("resolves to {address}, {class}"),
        }
    }

    /// The text of the 403 answer: the host, the rule, and the policy.
    pub fn explain(&self, host: &Host, allow: &[HostPattern]) -> String {
        let policy = policy_text(allow);
        match self {
            Refusal::NotListed => format!(
                "subpane: {host} is not allowed by this sandbox's network policy (allow: {policy})"
            ),
            Refusal::Local { address, class } => format!(
                "subpane: {host} resolves to {address}, {class}, which this sandbox's network \
                 policy refuses unless it lists that address or localhost (allow: {policy})"
            ),
        }
    }
}

/// The allow list as the user wrote it: `api.example.com, *.example.org, 127.0.0.1`.
pub fn policy_text(allow: &[HostPattern]) -> String {
    let v: Vec<String> = allow.iter().map(|p| String::from(p.clone())).collect();
    v.join(", ")
}

/// The kinds of address a name must not resolve to unless a local host is listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrClass {
    Loopback,
    /// RFC 1918, fc00::/7 and the old site-local fec0::/10.
    Private,
    LinkLocal,
    /// 0.0.0.0/8 and `::`: "this host" to the kernel.
    Unspecified,
    Multicast,
    Broadcast,
    /// 240.0.0.0/4 and the deprecated IPv4-compatible `::a.b.c.d`.
    Reserved,
    /// 100.64.0.0/10, the carrier-grade NAT range (RFC 6598).
    Shared,
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddrClass::Loopback => "a loopback address",
            AddrClass::Private => "a private address",
            AddrClass::LinkLocal => "a link-local address",
            AddrClass::Unspecified => "an unspecified address",
            AddrClass::Multicast => "a multicast address",
            AddrClass::Broadcast => "the broadcast address",
            AddrClass::Reserved => "a reserved address",
            AddrClass::Shared => "a shared (carrier-grade NAT) address",
        })
    }
}

/// The class of a non-public address, `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<AddrClass> {
    match ip.to_canonical() {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => classify_v6(a),
    }
}

fn classify_v4(a: Ipv4Addr) -> Option<AddrClass> {
    let [o0, o1, ..] = a.octets();
    Some(match (o0, o1) {
        (0, _) => AddrClass::Unspecified,
        (127, _) => AddrClass::Loopback,
        (10, _) | (192, 168) => AddrClass::Private,
        (172, b) if b & 0xf0 == 16 => AddrClass::Private,
        (169, 254) => AddrClass::LinkLocal,
        (100, b) if b & 0xc0 == 64 => AddrClass::Shared,
        (224..=239, _) => AddrClass::Multicast,
        _ if a.is_broadcast() => AddrClass::Broadcast,
        (240.., _) => AddrClass::Reserved,
        _ => return None,
    })
}

fn classify_v6(a: Ipv6Addr) -> Option<AddrClass> {
    let s = a.segments();
    // An IPv4 address carried inside IPv6 reaches that IPv4 address: NAT64 (64:ff9b::/96)
    // and 6to4 (2002::/16) are judged by the address they carry.
    let carried = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return classify_v4(carried(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return classify_v4(carried(s[1], s[2]));
    }
    Some(match s {
        _ if a.is_unspecified() => AddrClass::Unspecified,
        _ if a.is_loopback() => AddrClass::Loopback,
        [0, 0, 0, 0, 0, 0, _, _] => AddrClass::Reserved,
        [x, ..] if x & 0xfe00 == 0xfc00 => AddrClass::Private,
        [x, ..] if x & 0xffc0 == 0xfe80 => AddrClass::LinkLocal,
        [x, ..] if x & 0xffc0 == 0xfec0 => AddrClass::Private,
        [x, ..] if x & 0xff00 == 0xff00 => AddrClass::Multicast,
        _ => return None,
    })
}

/// Decides a request for `host:port`. `resolve` is called only for a name that a pattern
/// matches, and at most once.
pub fn decide(
    host: &Host,
    port: u16,
    allow: &[HostPattern],
    resolve: impl FnOnce(&str, u16) -> io::Result<Vec<IpAddr>>,
) -> Decision {
    let matching: Vec<&HostPattern> = allow.iter().filter(|p| matches(p, host)).collect();
    if matching.is_empty() {
        return Decision::Deny(Refusal::NotListed);
    }
    let addresses = match host {
        Host::Ip(ip) => vec![ip.to_canonical()],
        Host::Name(name) => match resolve(name, port) {
            Ok(v) if v.is_empty() => return Decision::Unresolved("no address".to_owned()),
            Ok(v) => v.into_iter().map(|a| a.to_canonical()).collect(),
            Err(e) => return Decision::Unresolved(e.to_string()),
        },
    };
    if !matching.iter().any(|p| p.names_local()) {
        for &address in &addresses {
            if let Some(class) = classify(address) {
                return Decision::Deny(Refusal::Local { address, class });
            }
        }
    }
    let mut unique: Vec<IpAddr> = Vec::with_capacity(addresses.len());
    for a in addresses {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    Decision::Allow(unique)
}

/// Whether `pattern` allows `host`: names by name, IP literals as addresses.
fn matches(pattern: &HostPattern, host: &Host) -> bool {
    match (pattern, host) {
        (HostPattern::Ip(p), Host::Ip(h)) => p.to_canonical() == h.to_canonical(),
        (HostPattern::Ip(_), Host::Name(_)) | (_, Host::Ip(_)) => false,
        (p, Host::Name(n)) => p.matches(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pats(list: &[&str]) -> Vec<HostPattern> {
        list.iter()
            .map(|p| HostPattern::parse(p).unwrap())
            .collect()
    }
    fn name(n: &str) -> Host {
        Host::Name(n.to_owned())
    }
    fn ip(s: &str) -> Host {
        Host::Ip(s.parse::<IpAddr>().unwrap().to_canonical())
    }
    fn a(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    /// A resolver that answers `addrs` and counts its calls.
    fn answers(addrs: &[&str]) -> impl FnOnce(&str, u16) -> io::Result<Vec<IpAddr>> {
        let v: Vec<IpAddr> = addrs.iter().map(|s| a(s)).collect();
        move |_, _| Ok(v)
    }
    fn never(_: &str, _: u16) -> io::Result<Vec<IpAddr>> {
        panic!("a name no pattern allows must not be resolved")
    }

    #[test]
    fn a_listed_name_is_allowed_at_its_public_addresses() {
        let d = decide(
            &name("api.example.com"),
            443,
            &pats(&["api.example.com"]),
            answers(&["93.184.216.34", "2606:2800:220:1::1"]),
        );
        assert_eq!(
            d,
            Decision::Allow(vec![a("93.184.216.34"), a("2606:2800:220:1::1")])
        );
    }

    #[test]
    fn an_unlisted_name_is_refused_without_a_lookup() {
        let allow = pats(&["api.example.com", "127.0.0.1"]);
        for host in [
            "github.com",
            "example.com",
            "evil.api.example.com",
            "localhost",
        ] {
            assert_eq!(
                decide(&name(host), 443, &allow, never),
                Decision::Deny(Refusal::NotListed),
                "{host}"
            );
        }
    }

    #[test]
    fn wildcards_cover_names_strictly_below_their_domain() {
        let allow = pats(&["*.example.com"]);
        let public = || answers(&["93.184.216.34"]);
        assert!(matches!(
            decide(&name("a.example.com"), 443, &allow, public()),
            Decision::Allow(_)
        ));
        assert!(matches!(
            decide(&name("evil.com.example.com"), 443, &allow, public()),
            Decision::Allow(_)
        ));
        for host in ["example.com", "example.com.evil.com", "badexample.com"] {
            assert_eq!(
                decide(&name(host), 443, &allow, never),
                Decision::Deny(Refusal::NotListed),
                "{host}"
            );
        }
        let exact = pats(&["example.com"]);
        assert_eq!(
            decide(&name("a.example.com"), 443, &exact, never),
            Decision::Deny(Refusal::NotListed)
        );
    }

    #[test]
    fn a_name_resolving_to_loopback_is_refused_unless_a_local_host_is_listed() {
        let d = decide(
            &name("evil.example.com"),
            80,
            &pats(&["evil.example.com"]),
            answers(&["127.0.0.1"]),
        );
        assert_eq!(
            d,
            Decision::Deny(Refusal::Local {
                address: a("127.0.0.1"),
                class: AddrClass::Loopback
            })
        );
        // Listing 127.0.0.1 does not make another name's loopback answer acceptable: only the
        // pattern that matched the host counts.
        let d = decide(
            &name("evil.example.com"),
            80,
            &pats(&["evil.example.com", "127.0.0.1"]),
            answers(&["127.0.0.1"]),
        );
        assert!(matches!(d, Decision::Deny(Refusal::Local { .. })));
        let d = decide(
            &name("localhost"),
            80,
            &pats(&["localhost"]),
            answers(&["127.0.0.1", "::1"]),
        );
        assert_eq!(d, Decision::Allow(vec![a("127.0.0.1"), a("::1")]));
    }

    #[test]
    fn one_private_answer_among_public_ones_refuses_the_name() {
        let d = decide(
            &name("rebind.example.com"),
            443,
            &pats(&["rebind.example.com"]),
            answers(&["93.184.216.34", "10.0.0.7"]),
        );
        assert!(matches!(
            d,
            Decision::Deny(Refusal::Local {
                class: AddrClass::Private,
                ..
            })
        ));
    }

    #[test]
    fn ipv4_mapped_answers_are_judged_as_ipv4() {
        let d = decide(
            &name("m.example.com"),
            443,
            &pats(&["m.example.com"]),
            answers(&["::ffff:127.0.0.1"]),
        );
        assert_eq!(
            d,
            Decision::Deny(Refusal::Local {
                address: a("127.0.0.1"),
                class: AddrClass::Loopback
            })
        );
        let d = decide(
            &name("m.example.com"),
            443,
            &pats(&["m.example.com"]),
            answers(&["::ffff:93.184.216.34"]),
        );
        assert_eq!(d, Decision::Allow(vec![a("93.184.216.34")]));
    }

    #[test]
    fn ip_literals_are_compared_as_addresses() {
        let allow = pats(&["127.0.0.1", "[::1]", "10.1.2.3"]);
        for (host, to) in [
            ("127.0.0.1", "127.0.0.1"),
            ("::ffff:127.0.0.1", "127.0.0.1"),
            ("::1", "::1"),
            ("0:0:0:0:0:0:0:1", "::1"),
            ("10.1.2.3", "10.1.2.3"),
        ] {
            assert_eq!(
                decide(&ip(host), 8080, &allow, never),
                Decision::Allow(vec![a(to)]),
                "{host}"
            );
        }
        for host in ["127.0.0.2", "::2", "93.184.216.34"] {
            assert_eq!(
                decide(&ip(host), 80, &allow, never),
                Decision::Deny(Refusal::NotListed),
                "{host}"
            );
        }
        // An address is never allowed by a name pattern, nor a name by an address.
        assert_eq!(
            decide(&ip("93.184.216.34"), 80, &pats(&["example.com"]), never),
            Decision::Deny(Refusal::NotListed)
        );
    }

    #[test]
    fn a_name_without_an_address_is_unresolved() {
        let allow = pats(&["gone.example.com"]);
        assert!(matches!(
            decide(&name("gone.example.com"), 443, &allow, answers(&[])),
            Decision::Unresolved(_)
        ));
        let d = decide(&name("gone.example.com"), 443, &allow, |_, _| {
            Err(io::Error::other("name not known"))
        });
        assert_eq!(d, Decision::Unresolved("name not known".into()));
    }

    #[test]
    fn every_non_public_range_is_classified() {
        use AddrClass::*;
        for (addr, class) in [
            ("0.0.0.0", Some(Unspecified)),
            ("0.1.2.3", Some(Unspecified)),
            ("127.0.0.1", Some(Loopback)),
            ("127.255.255.254", Some(Loopback)),
            ("10.0.0.1", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.32.0.1", None),
            ("172.15.255.255", None),
            ("192.168.1.1", Some(Private)),
            ("169.254.169.254", Some(LinkLocal)),
            ("100.64.0.1", Some(Shared)),
            ("100.127.255.255", Some(Shared)),
            ("100.128.0.1", None),
            ("100.63.255.255", None),
            ("224.0.0.1", Some(Multicast)),
            ("239.255.255.255", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("240.0.0.1", Some(Reserved)),
            ("8.8.8.8", None),
            ("::", Some(Unspecified)),
            ("::1", Some(Loopback)),
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("::ffff:10.0.0.1", Some(Private)),
            ("::ffff:100.64.0.1", Some(Shared)),
            ("::ffff:8.8.8.8", None),
            ("::127.0.0.1", Some(Reserved)),
            ("64:ff9b::127.0.0.1", Some(Loopback)),
            ("64:ff9b::8.8.8.8", None),
            ("2002:7f00:1::", Some(Loopback)),
            ("2002:c0a8:101::1", Some(Private)),
            ("fc00::1", Some(Private)),
            ("fd12:3456::1", Some(Private)),
            ("fe80::1", Some(LinkLocal)),
            ("febf::1", Some(LinkLocal)),
            ("fec0::1", Some(Private)),
            ("ff02::1", Some(Multicast)),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(classify(a(addr)), class, "{addr}");
        }
    }

    #[test]
    fn refusals_name_the_host_and_the_policy() {
        let allow = pats(&["api.example.com", "127.0.0.1", "*.example.org"]);
        let text = Refusal::NotListed.explain(&name("github.com"), &allow);
        assert_eq!(
            text,
            "subpane: github.com is not allowed by this sandbox's network policy \
             (allow: api.example.com, 127.0.0.1, *.example.org)"
        );
        let local = Refusal::Local {
            address: a("10.0.0.7"),
            class: AddrClass::Private,
        };
        assert_eq!(local.reason(), "resolves to 10.0.0.7, a private address");
        assert!(
            local
                .explain(&name("x.example.org"), &allow)
                .contains("x.example.org resolves to 10.0.0.7, a private address")
        );
    }
}
