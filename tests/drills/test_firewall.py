"""The partition drill's nftables rules as text (pure): what they drop, that a second load
replaces the first, and the inputs they refuse. Loading them into a real namespace is
tests/hosts/test_testnet_shape.py's partition drill."""

from __future__ import annotations

import pytest

from ops_tools.drills import firewall
from ops_tools.errors import InputError


def test_the_rules_drop_p2p_both_ways_and_replace_an_earlier_table():
    text = firewall.ruleset("authority-1", 30333, [("10.77.3.2", 30333), ("10.77.3.4", 30334)])
    name = "net_drill_authority_1"
    # Declared, deleted and declared again in one transaction: a second load leaves one table.
    assert text.startswith(f"table inet {name}\ndelete table inet {name}\ntable inet {name} {{")
    for rule in ("ip saddr 10.77.3.2 tcp sport 30333 drop",
                 "ip saddr 10.77.3.2 tcp dport 30333 drop",
                 "ip daddr 10.77.3.2 tcp dport 30333 drop",
                 "ip daddr 10.77.3.2 tcp sport 30333 drop",
                 "ip saddr 10.77.3.4 tcp sport 30334 drop",
                 "ip daddr 10.77.3.4 tcp dport 30334 drop"):
        assert rule in text
    assert text.count("type filter hook input priority -10; policy accept;") == 1
    assert text.count("type filter hook output priority -10; policy accept;") == 1
    # Nothing but the p2p ports: SSH, RPC and the metrics the monitoring scrapes pass.
    drops = [line for line in text.splitlines() if "drop" in line]
    assert len(drops) == 8 and all(" tcp sport " in d or " tcp dport " in d for d in drops)


def test_ipv6_peers_get_ip6_rules():
    text = firewall.ruleset("a", 30333, [("fd00::2", 30333)])
    assert "ip6 saddr fd00::2 tcp sport 30333 drop" in text


def test_remove_is_idempotent_and_names_only_the_drills_table():
    line = firewall.remove_command("rpc-0")
    assert "table inet net_drill_rpc_0\ndelete table inet net_drill_rpc_0\n" in line
    assert firewall.present_command("rpc-0") == "nft list table inet net_drill_rpc_0"


def test_a_host_name_cannot_reach_the_script():
    assert firewall.table("a; flush ruleset") == "net_drill_a__flush_ruleset"


@pytest.mark.parametrize("address", ["10.0.0.1 drop; flush ruleset", "authority-0", ""])
def test_an_address_that_is_not_an_ip_is_refused(address):
    with pytest.raises(InputError, match="is not an IP address"):
        firewall.ruleset("a", 30333, [(address, 30333)])


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_out_of_range_is_refused(port):
    with pytest.raises(InputError, match="is not a TCP port"):
        firewall.ruleset("a", 30333, [("10.0.0.1", port)])
    with pytest.raises(InputError, match="is not a TCP port"):
        firewall.ruleset("a", port, [("10.0.0.1", 30333)])


def test_the_number_of_peers_is_bounded():
    with pytest.raises(InputError, match="names 0 peers"):
        firewall.ruleset("a", 30333, [])
    many = [(f"10.0.{i // 250}.{i % 250 + 1}", 30333) for i in range(firewall.MAX_PEERS + 1)]
    with pytest.raises(InputError, match=f"names {firewall.MAX_PEERS + 1} peers"):
        firewall.ruleset("a", 30333, many)


def test_the_cut_authority_drops_p2p_with_any_address():
    """The cut authority's own table names no address: a node outside the inventory (an
    operator's full node on the usual port) cannot relay its votes; SSH, RPC and metrics pass."""
    text = firewall.ruleset("authority-1", 30333, [("10.77.3.2", 30333), ("10.77.3.4", 30334)],
                            anyone=True)
    assert "saddr" not in text and "daddr" not in text
    for rule in ("tcp sport 30333 drop", "tcp sport 30334 drop", "tcp dport 30333 drop",
                 "tcp dport 30334 drop"):
        assert rule in text
    assert "22" not in text and "9944" not in text and "9615" not in text
    with pytest.raises(InputError, match="not an IP address"):
        firewall.ruleset("a", 30333, [("rpc-0", 30333)], anyone=True)
