"""Webhook URL vetting: every non-public address form is refused, resolved by the real resolver."""

from __future__ import annotations

import ipaddress

import pytest

from observatory.alerts.ssrf import UnsafeURL, address_problem, vet_url

# (URL, words the refusal must contain). Numeric spellings go through the system's getaddrinfo,
# so they mean exactly what a connect() would make of them; none needs DNS.
REFUSED = [
    ("http://127.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://0x7f.0.0.1/", "loopback"),
    ("http://localhost/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "IPv4-mapped"),
    ("http://[::ffff:8.8.8.8]/", "IPv4-mapped"),
    ("http://[::ffff:7f00:1]/", "IPv4-mapped"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://[fd00:ec2::254]/", "metadata"),
    ("http://100.100.100.200/", "metadata"),
    ("http://169.254.1.1/", "link-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://10.1.2.3/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://172.31.255.254/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://0xa000001/", "private"),
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("http://100.127.255.254/", "carrier-grade NAT"),
    ("http://0.0.0.0/", "this network"),
    ("http://0/", "this network"),
    ("http://0.1.2.3/", "this network"),
    ("http://[::]/", "unspecified"),
    ("http://[fc00::1]/", "unique local"),
    ("http://[fd12:3456::1]/", "unique local"),
    ("http://[64:ff9b::7f00:1]/", "NAT64"),
    ("http://[64:ff9b:1::a00:1]/", "NAT64"),
    ("http://[2002:7f00:1::1]/", "6to4"),
    ("http://[2001:0:4136:e378::1]/", "Teredo"),
    ("http://224.0.0.1/", "multicast"),
    ("http://239.255.255.250/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://255.255.255.255/", "reserved"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://192.0.0.8/", "IETF"),
    ("http://192.0.2.1/", "documentation"),  # TEST-NET-1
    ("http://198.51.100.7/", "documentation"),  # TEST-NET-2
    ("http://203.0.113.9/", "documentation"),  # TEST-NET-3
    ("http://[2001:db8::1]/", "documentation"),
    # Issue 21: forms an older check (and Python's ipaddress) let through.
    ("http://[::ffff:0:a9fe:a9fe]/", "IPv4-translated"),  # 169.254.169.254, RFC 2765 spelling
    ("http://[::ffff:0:7f00:1]/", "IPv4-translated"),
    ("http://[::ffff:0:808:808]/", "IPv4-translated"),  # refused even when the IPv4 is public
    ("http://[::ffff:169.254.169.254]/", "IPv4-mapped"),
    ("http://[::a9fe:a9fe]/", "IPv4-compatible"),
    ("http://[::1:0:0:1]/", "reserved IPv6"),  # the rest of ::/8
    ("http://[64:ff9b::a9fe:a9fe]/", "NAT64 address mapping to 169.254.169.254"),
    ("http://[64:ff9b::a00:1]/", "NAT64 address mapping to 10.0.0.1"),
    ("http://[64:ff9b::c0a8:101]/", "NAT64 address mapping to 192.168.1.1"),
    ("http://[5f00::1]/", "SRv6"),  # RFC 9602 (2024)
    ("http://[5f00:1234:5678::1]/", "SRv6"),
    ("http://[3fff::1]/", "documentation"),  # RFC 9637 (2024)
    ("http://[3fff:fff:ffff::1]/", "documentation"),
    ("http://[100:0:0:1::1]/", "dummy"),  # RFC 9780
    ("http://[2001:2::1]/", "benchmarking"),
    ("http://[2001:10::1]/", "ORCHID"),
    ("http://192.88.99.1/", "6to4 relay"),
]


@pytest.mark.parametrize(("url", "reason"), REFUSED)
def test_non_public_addresses_are_refused(url, reason):
    with pytest.raises(UnsafeURL) as info:
        vet_url(url, allow_http=True, allowed_ports=None)
    assert reason.lower() in str(info.value).lower()


@pytest.mark.parametrize(("url", "reason"), [u for u in REFUSED if "loopback" not in u[1]])
def test_only_loopback_is_opened_by_the_test_switch(url, reason):
    with pytest.raises(UnsafeURL) as info:
        vet_url(url, allow_http=True, allowed_ports=None, allow_loopback=True)
    assert reason.lower() in str(info.value).lower()


@pytest.mark.parametrize("url", ["http://127.0.0.1:8123/hook", "http://127.1:9/x", "http://[::1]:7/",
                                 "http://0x7f000001/"])
def test_loopback_passes_with_the_switch_on_any_port(url):
    vetted = vet_url(url, allow_http=True, allow_loopback=True)
    assert all(ipaddress.ip_address(a).is_loopback for a in vetted.addresses)


def test_public_address_passes_and_is_pinned():
    vetted = vet_url("https://8.8.8.8/hooks/a?b=1")
    assert vetted.addresses == ("8.8.8.8",)
    assert vetted.pinned_url("8.8.8.8") == "https://8.8.8.8:443/hooks/a?b=1"
    assert vetted.host_header == "8.8.8.8"


def test_hostname_pinned_to_its_vetted_address_with_original_host_header():
    vetted = vet_url("https://hooks.example.org:8443/x", resolver=lambda host, port: ["93.184.215.14"])
    assert vetted.pinned_url(vetted.addresses[0]) == "https://93.184.215.14:8443/x"
    assert vetted.host_header == "hooks.example.org:8443"
    v6 = vet_url("https://hooks.example.org/", resolver=lambda host, port: ["2606:4700::6810:84e5"])
    assert v6.pinned_url(v6.addresses[0]) == "https://[2606:4700::6810:84e5]:443/"


def test_any_private_answer_refuses_the_whole_name():
    # A name with one public and one private address (or a rebinding-style answer) is refused.
    with pytest.raises(UnsafeURL, match="10.0.0.5"):
        vet_url("https://mixed.example.org/", resolver=lambda host, port: ["93.184.215.14", "10.0.0.5"])


def test_unresolvable_name_is_refused_without_network():
    def fail(host, port):
        raise OSError("Name or service not known")

    with pytest.raises(UnsafeURL, match="does not resolve"):
        vet_url("https://nowhere.invalid/", resolver=fail)


@pytest.mark.parametrize(("url", "words"), [
    ("https://user@8.8.8.8/", "credentials"),
    ("https://user:pw@8.8.8.8/", "credentials"),
    ("https://8.8.8.8@127.0.0.1/", "credentials"),
    ("ftp://8.8.8.8/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://8.8.8.8/", "scheme"),
    ("//8.8.8.8/", "scheme"),
    ("http://8.8.8.8/", "plain http"),
    ("https://8.8.8.8:22/", "port 22"),
    ("https://8.8.8.8:99999/", "cannot be parsed"),
    ("https:///path", "no host"),
    ("https://8.8.8.8/a b", "whitespace"),
    ("https://8.8.8.8/\r\nHost: evil", "whitespace"),
    ("", "empty"),
    ("https://8.8.8.8/" + "a" * 2100, "longer than"),
    ("https://[fe80::1%25eth0]/", "scoped"),
])
def test_malformed_or_disallowed_urls(url, words):
    with pytest.raises(UnsafeURL) as info:
        vet_url(url)
    assert words in str(info.value)


def test_nat64_of_a_public_address_passes_and_the_newer_ranges_stop_at_their_edges():
    # 64:ff9b::8.8.8.8 reaches 8.8.8.8 through a translator: as public as the address it embeds.
    assert address_problem(ipaddress.ip_address("64:ff9b::808:808")) is None
    # The switch for loopback tests never opens loopback reached through NAT64.
    assert "loopback" in address_problem(ipaddress.ip_address("64:ff9b::7f00:1"), allow_loopback=True)
    # Just outside 3fff::/20 and 5f00::/16: ordinary global unicast, left to is_global.
    assert "documentation" not in (address_problem(ipaddress.ip_address("3fff:1000::1")) or "")
    assert "SRv6" not in (address_problem(ipaddress.ip_address("5f01::1")) or "")


def test_address_problem_direct():
    assert address_problem(ipaddress.ip_address("1.1.1.1")) is None
    assert address_problem(ipaddress.ip_address("2606:4700:4700::1111")) is None
    assert "loopback" in address_problem(ipaddress.ip_address("127.0.0.2"))
    assert address_problem(ipaddress.ip_address("127.0.0.2"), allow_loopback=True) is None
    assert "private" in address_problem(ipaddress.ip_address("10.0.0.1"), allow_loopback=True)
