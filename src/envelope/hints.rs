//! Hints added to a failed attempt's errors when its words point at a cause subpane knows.
//!
//! A sandboxed program with `--network none` (the default) fails its connections in its own
//! words ("Connection error.", `ECONNREFUSED`, "Could not resolve host"), often after
//! retrying for a while; nothing in them says that the sandbox has no network.

use crate::spec::Network;

/// Phrases of a connection that failed, lower case, as agent CLIs and common tools say it.
const CONNECT_FAILED: &[&str] = &[
    "connection error",
    "connection refused",
    "econnrefused",
    "enotfound",
    "eai_again",
    "getaddrinfo",
    "network is unreachable",
    "enetunreach",
    "no route to host",
    "could not resolve",
    "temporary failure in name resolution",
    "name or service not known",
    "failed to lookup address",
    "dns error",
    "failed to connect",
    "unable to connect",
    "fetch failed",
    "error sending request",
];

/// Whether `text` says a connection failed.
pub fn says_connection_failed(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    CONNECT_FAILED.iter().any(|p| t.contains(p))
}

/// The hint for a sandboxed attempt that failed under `network` and said `texts` (its errors
/// and the end of its stderr): the policy, and how to allow a host. `None` when the texts
/// say nothing of a failed connection, or the sandbox gave the host's network.
pub fn network_hint<'a>(
    network: &Network,
    texts: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    if matches!(network, Network::Full) || !texts.into_iter().any(says_connection_failed) {
        return None;
    }
    Some(match network {
        Network::Allow(hosts) => {
            let list: Vec<String> = hosts.iter().cloned().map(String::from).collect();
            format!(
                "the program failed to connect, and its sandbox allows only --network allow:{} (network.jsonl in the attempt directory lists what the proxy refused): add the host it needs to the list",
                list.join(",")
            )
        }
        _ => "the program failed to connect, and its sandbox has no network (--network none, the default): allow the hosts it needs with --network allow:HOST,… (e.g. allow:api.anthropic.com), or give it the host's network with --network full".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_connection_in_a_sandbox_without_network_gets_the_hint() {
        let none = Network::None;
        let h = network_hint(&none, ["Connection error."]).unwrap();
        assert!(
            h.contains("--network none") && h.contains("--network allow:HOST"),
            "{h}"
        );
        assert!(network_hint(&none, ["x", "connect ECONNREFUSED 127.0.0.1:443"]).is_some());
        assert!(network_hint(&none, ["exit 3", "assertion failed"]).is_none());
        assert!(network_hint(&Network::Full, ["Connection error."]).is_none());
        let allow = Network::parse("allow:api.example.com").unwrap();
        let h = network_hint(&allow, ["getaddrinfo ENOTFOUND x.org"]).unwrap();
        assert!(
            h.contains("allow:api.example.com") && h.contains("network.jsonl"),
            "{h}"
        );
    }
}
