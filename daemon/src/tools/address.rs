//! Which addresses `web_fetch` may not reach by default (SPEC §8.2):
//! private, loopback, link-local, unspecified, broadcast, multicast,
//! documentation, carrier-grade NAT and benchmarking IPv4 ranges; IPv6
//! loopback, unspecified, multicast, unique-local, link-local and the
//! deprecated site-local range.
//!
//! An IPv6 address that carries an IPv4 address is also judged by that
//! IPv4 address, because a packet sent to it ends up at (is translated or
//! tunnelled to) the IPv4 host: `http://[::127.0.0.1]/` must be refused as
//! `http://127.0.0.1/` is. The forms read:
//!
//! - IPv4-mapped `::ffff:a.b.c.d` and IPv4-translated (SIIT)
//!   `::ffff:0:a.b.c.d`;
//! - IPv4-compatible `::a.b.c.d` (deprecated, but a stack with automatic
//!   tunnels still sends it over IPv4);
//! - NAT64 with the well-known prefix `64:ff9b::/96` (RFC 6052: the IPv4
//!   address is the last 32 bits, the only length this prefix is used with);
//! - 6to4 `2002::/16`: the IPv4 address of the site's tunnel end in bits
//!   16..48;
//! - Teredo `2001:0::/32`: both the server (bits 32..64) and the client
//!   (the last 32 bits, inverted) receive the traffic, so both are judged;
//! - ISATAP: an interface identifier `0:5efe:a.b.c.d` (or `200:5efe:…`,
//!   the globally unique variant) under any prefix names the host's IPv4
//!   tunnel end. A public address that happens to end like that is judged
//!   by those bits too; refusing it is the safe mistake.
//!
//! The local-use NAT64 prefix `64:ff9b:1::/48` (RFC 8215) is refused
//! whole: it leads to a translator inside this network, and where the
//! IPv4 address sits depends on a prefix length (/48 to /96) only that
//! network knows, so it cannot be read reliably. For the same reason the
//! network-specific NAT64 prefixes an operator may pick from its own
//! address space cannot be recognised at all; they look like public
//! addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether a fetch may not reach `ip` by default.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_is_private(v4),
        IpAddr::V6(v6) => v6_is_private(v6) || embedded_v4(v6).into_iter().any(v4_is_private),
    }
}

fn v4_is_private(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_private()
        || v4.is_loopback()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || o[0] == 0
        // 100.64.0.0/10, carrier-grade NAT
        || (o[0] == 100 && (o[1] & 0xc0) == 64)
        // 198.18.0.0/15, benchmarking
        || (o[0] == 198 && (o[1] & 0xfe) == 18)
        // 192.0.0.0/24, protocol assignments (DS-Lite, NAT64 discovery)
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        // 240.0.0.0/4, reserved
        || o[0] >= 240
}

fn v6_is_private(v6: Ipv6Addr) -> bool {
    let s = v6.segments();
    v6.is_loopback()
        || v6.is_unspecified()
        || v6.is_multicast()
        // fc00::/7 unique local
        || (s[0] & 0xfe00) == 0xfc00
        // fe80::/10 link local, fec0::/10 site local (deprecated)
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // 64:ff9b:1::/48, local-use NAT64
        || (s[0], s[1], s[2]) == (0x64, 0xff9b, 1)
}

/// The IPv4 addresses `v6` carries, by its form (see the module's notes).
fn embedded_v4(v6: Ipv6Addr) -> Vec<Ipv4Addr> {
    let join = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    let s = v6.segments();
    let mut out = Vec::new();
    match s {
        // ::a.b.c.d (compatible), ::ffff:a.b.c.d (mapped),
        // ::ffff:0:a.b.c.d (translated), 64:ff9b::a.b.c.d (NAT64)
        [0, 0, 0, 0, 0, 0 | 0xffff, hi, lo]
        | [0, 0, 0, 0, 0xffff, 0, hi, lo]
        | [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => out.push(join(hi, lo)),
        // 6to4
        [0x2002, hi, lo, ..] => out.push(join(hi, lo)),
        // Teredo: server, then the client, stored inverted
        [0x2001, 0, server_hi, server_lo, _, _, client_hi, client_lo] => {
            out.push(join(server_hi, server_lo));
            out.push(join(!client_hi, !client_lo));
        }
        _ => {}
    }
    // ISATAP, under any prefix: the 'u' bit (0x0200) may be set.
    if (s[4] & 0xfdff) == 0 && s[5] == 0x5efe {
        out.push(join(s[6], s[7]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(ip: &str) -> bool {
        is_private(ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}")))
    }

    #[test]
    fn private_and_public_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "192.0.0.8",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "fec0::1",
        ] {
            assert!(judged(ip), "{ip}");
        }
        for ip in ["1.1.1.1", "93.184.216.34", "2606:4700::1111", "100.128.0.1"] {
            assert!(!judged(ip), "{ip}");
        }
    }

    /// Each IPv6 form that carries an IPv4 address: refused when that
    /// address is private, allowed when it is public.
    #[test]
    fn ipv6_forms_are_judged_by_the_ipv4_address_they_carry() {
        // (form, carrying a private address, carrying a public one)
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "IPv4-mapped",
                &["::ffff:127.0.0.1", "::ffff:10.0.0.1"],
                &["::ffff:1.1.1.1"],
            ),
            (
                "IPv4-compatible",
                &["::127.0.0.1", "::10.0.0.1", "::169.254.169.254"],
                &["::1.1.1.1"],
            ),
            (
                "IPv4-translated (SIIT)",
                &["::ffff:0:127.0.0.1", "::ffff:0:192.168.0.1"],
                &["::ffff:0:1.1.1.1"],
            ),
            (
                "NAT64, well-known prefix",
                &["64:ff9b::7f00:1", "64:ff9b::192.168.1.1"],
                &["64:ff9b::101:101", "64:ff9b::93.184.216.34"],
            ),
            (
                "6to4",
                &["2002:7f00:1::1", "2002:c0a8:101:5::1", "2002:a9fe:a9fe::"],
                &["2002:101:101::1"],
            ),
            (
                // The client 127.0.0.1 is stored as 80ff:fffe; the server
                // is 65.54.227.120.
                "Teredo, client",
                &["2001:0:4136:e378:8000:63bf:80ff:fffe"],
                &["2001:0:4136:e378:8000:63bf:fefe:fefe"],
            ),
            (
                // The server is 10.0.0.1; the client 1.1.1.1.
                "Teredo, server",
                &["2001:0:a00:1:8000:63bf:fefe:fefe"],
                &[],
            ),
            (
                "ISATAP",
                &[
                    "2606:4700:1:2:0:5efe:a00:1",
                    "2606:4700:1:2:200:5efe:7f00:1",
                ],
                &["2606:4700:1:2:0:5efe:101:101"],
            ),
        ];
        for (form, private, public) in cases {
            for ip in *private {
                assert!(judged(ip), "{form}: {ip} was allowed");
            }
            for ip in *public {
                assert!(!judged(ip), "{form}: {ip} was refused");
            }
        }
    }

    #[test]
    fn the_local_use_nat64_prefix_is_refused_whole() {
        for ip in [
            "64:ff9b:1::7f00:1",
            "64:ff9b:1::101:101",
            "64:ff9b:1:abcd:ef01:2345:6789:abcd",
        ] {
            assert!(judged(ip), "{ip}");
        }
        assert!(!judged("64:ff9b:2::101:101"), "outside the /48");
    }
}
