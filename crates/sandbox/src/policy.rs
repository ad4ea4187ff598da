//! Network facts every backend shares: the cloud-metadata names and addresses that workspaces
//! must not reach, and the blackhole commands that block them.

use std::net::IpAddr;

/// Metadata host names, pinned to `0.0.0.0` in every workspace's hosts file.
pub const METADATA_HOSTNAMES: &[&str] = &[
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Metadata addresses: EC2/GCP/Azure IMDS, the ECS task endpoint, Alibaba, and EC2's IPv6 IMDS.
pub const METADATA_ADDRESSES: &[&str] = &[
    "169.254.169.254",
    "169.254.170.2",
    "100.100.100.200",
    "fd00:ec2::254",
];

/// Whether `ip` is a cloud-metadata address (or inside the IPv4 link-local range that holds most
/// of them).
#[must_use]
pub fn is_metadata_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local() || v4.octets() == [100, 100, 100, 200],
        IpAddr::V6(v6) => v6.segments() == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254],
    }
}

/// The `ip route` commands that blackhole every metadata address inside a network namespace.
/// Run by a short-lived sidecar holding `NET_ADMIN` in the workspace's namespace — never in the
/// host's.
#[must_use]
pub fn blackhole_commands() -> Vec<Vec<String>> {
    METADATA_ADDRESSES
        .iter()
        .map(|addr| {
            let family = if addr.contains(':') { "-6" } else { "-4" };
            let prefix = if addr.contains(':') { "128" } else { "32" };
            [
                "ip",
                family,
                "route",
                "replace",
                "blackhole",
                &format!("{addr}/{prefix}"),
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
        })
        .collect()
}

/// One shell script running [`blackhole_commands`]; IPv6 failures (no IPv6 in the namespace) do
/// not fail it, IPv4 ones do.
#[must_use]
pub fn blackhole_script() -> String {
    let mut script = String::from("set -e\n");
    for cmd in blackhole_commands() {
        let line = crate::quote::shell_join(&cmd);
        if cmd.iter().any(|a| a == "-6") {
            script.push_str(&line);
            script.push_str(" 2>/dev/null || true\n");
        } else {
            script.push_str(&line);
            script.push('\n');
        }
    }
    script
}
