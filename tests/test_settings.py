"""PolitenessSettings.from_settings: defaults, valid forms, and helpful errors."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest
from scrapy.settings import Settings

from scrapy_politeness.policy import Config
from scrapy_politeness.settings import DEFAULTS, PolitenessSettings


def load(**values: Any) -> PolitenessSettings:
    return PolitenessSettings.from_settings(values)


@pytest.mark.parametrize("source", [{}, Settings()], ids=["dict", "scrapy-settings"])
def test_defaults(source: Any) -> None:
    s = PolitenessSettings.from_settings(source)
    assert s.enabled is True
    assert s.config == Config(default=1.0, floor=0.25, ceiling=60.0, ip_floor=0.25,
                              backoff=2.0, soft_widen=1.25, narrow=0.05, latency_rise=1.5,
                              recovery="fast")
    assert dict(s.hosts) == {}
    assert s.dead_after == 5
    assert s.max_crawl_delay == 60.0
    assert s.crawl_delay_over_max == "skip"
    assert s.max_retry_after == 600.0
    assert s.grouping == "host"
    assert s.ip_exempt == ()
    assert s.send_margin == 0.01
    assert s.idle_ttl == 300.0
    assert s.dns_nameservers == ()
    assert s.dns_timeout == 5.0
    assert (s.dns_min_ttl, s.dns_max_ttl, s.dns_negative_ttl) == (5.0, 3600.0, 30.0)
    assert s.dns_pin is True
    assert s.dns_hosts_file == "/etc/hosts"
    assert s.gc_freeze is False  # the collector is the host process's: only when asked
    assert s.config_for("anything.com") is s.config


def test_defaults_table_matches_config_defaults() -> None:
    c = Config()
    assert (DEFAULTS["POLITENESS_DEFAULT"], DEFAULTS["POLITENESS_FLOOR"],
            DEFAULTS["POLITENESS_CEILING"], DEFAULTS["POLITENESS_IP_FLOOR"],
            DEFAULTS["POLITENESS_BACKOFF"], DEFAULTS["POLITENESS_SOFT_WIDEN"],
            DEFAULTS["POLITENESS_NARROW"], DEFAULTS["POLITENESS_LATENCY_RISE"]) == (
        c.default, c.floor, c.ceiling, c.ip_floor, c.backoff, c.soft_widen, c.narrow,
        c.latency_rise)


def test_scrapy_settings_object_with_values() -> None:
    st = Settings({"POLITENESS_FLOOR": "0.5", "POLITENESS_BACKOFF": 3,
                   "POLITENESS_HOSTS": {"A.com": {"floor": 2}}})
    s = PolitenessSettings.from_settings(st)
    assert s.config.floor == 0.5
    assert s.config.backoff == 3.0
    assert s.config_for("a.com").floor == 2.0


def test_command_line_strings_are_numbers() -> None:
    # scrapy crawl -s POLITENESS_FLOOR=0.5 -s POLITENESS_DEAD_AFTER=3 ... gives strings.
    s = load(POLITENESS_FLOOR="0.5", POLITENESS_DEFAULT=" 2 ", POLITENESS_DEAD_AFTER="3",
             POLITENESS_ENABLED="false", POLITENESS_DNS_PIN="0",
             POLITENESS_DNS_NAMESERVERS="127.0.0.1, [::1]:5353",
             POLITENESS_IP_EXEMPT="127.0.0.0/8 127.0.8.1")
    assert s.config.floor == 0.5
    assert s.config.default == 2.0
    assert s.dead_after == 3
    assert isinstance(s.dead_after, int)
    assert s.enabled is False
    assert s.dns_pin is False
    assert s.dns_nameservers == (("127.0.0.1", 53), ("::1", 5353))
    assert s.ip_exempt == (ipaddress.ip_network("127.0.0.0/8"),
                           ipaddress.ip_network("127.0.8.1/32"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), (1, True), (0, False), ("True", True), ("1", True),
     ("FALSE", False), (" 0 ", False)],
)
def test_enabled_forms(value: Any, expected: bool) -> None:
    assert load(POLITENESS_ENABLED=value).enabled is expected


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("127.0.0.1", ("127.0.0.1", 53)),
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("[::1]:53", ("::1", 53)),
        ("[::1]", ("::1", 53)),
        ("::1", ("::1", 53)),
        ("2001:db8::53", ("2001:db8::53", 53)),
        (" 8.8.8.8 ", ("8.8.8.8", 53)),
    ],
)
def test_nameserver_forms(entry: str, expected: tuple[str, int]) -> None:
    assert load(POLITENESS_DNS_NAMESERVERS=[entry]).dns_nameservers == (expected,)


def test_host_override_with_only_floor_raises_default() -> None:
    s = load(POLITENESS_HOSTS={"slow.com": {"floor": 5}})
    c = s.config_for("slow.com")
    assert (c.floor, c.default, c.ceiling) == (5.0, 5.0, 60.0)
    assert c.backoff == 2.0  # the rest inherited from the global config
    assert s.config_for("other.com") is s.config


def test_host_override_with_only_ceiling_lowers_default() -> None:
    c = load(POLITENESS_HOSTS={"a.com": {"ceiling": 0.5}}).config_for("a.com")
    assert (c.floor, c.default, c.ceiling) == (0.25, 0.5, 0.5)


def test_host_override_inherits_global_values() -> None:
    s = load(POLITENESS_DEFAULT=2.0, POLITENESS_NARROW=0.1,
             POLITENESS_HOSTS={"a.com": {"ceiling": 10}})
    assert s.config_for("a.com") == Config(default=2.0, ceiling=10.0, narrow=0.1,
                                           recovery="fast")


def test_host_override_keys_are_normalised() -> None:
    s = load(POLITENESS_HOSTS={"WWW.Example.COM.": {"floor": 2.0},
                               "Bücher.DE": {"ceiling": 30}})
    assert set(s.hosts) == {"www.example.com", "xn--bcher-kva.de"}
    assert s.config_for("www.example.com").floor == 2.0
    assert s.config_for("xn--bcher-kva.de").ceiling == 30.0


def test_misc_valid_values() -> None:
    s = load(POLITENESS_HOST_GROUPING="domain", POLITENESS_CRAWL_DELAY_OVER_MAX="honour",
             POLITENESS_MAX_CRAWL_DELAY=None, POLITENESS_DNS_HOSTS_FILE="",
             POLITENESS_IP_EXEMPT=["127.0.0.0/8", "::1"], POLITENESS_DEAD_AFTER=2.0)
    assert s.grouping == "domain"
    assert s.crawl_delay_over_max == "honour"
    assert s.max_crawl_delay is None
    assert s.dns_hosts_file is None
    assert len(s.ip_exempt) == 2
    assert s.dead_after == 2
    assert load(POLITENESS_CRAWL_DELAY_OVER_MAX="cap").crawl_delay_over_max == "cap"


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("POLITENESS_BACKOFF", 0.5, "0.5"),
        ("POLITENESS_SOFT_WIDEN", "0.9", "0.9"),
        ("POLITENESS_LATENCY_RISE", 0.5, "0.5"),
        ("POLITENESS_FLOOR", 2.0, "2.0"),  # floor > default
        ("POLITENESS_DEFAULT", 100.0, "100.0"),  # default > ceiling
        ("POLITENESS_CEILING", "nan", "nan"),
        ("POLITENESS_CEILING", "inf", "inf"),
        ("POLITENESS_CEILING", "lots", "lots"),
        ("POLITENESS_NARROW", -0.1, "-0.1"),
        ("POLITENESS_IP_FLOOR", True, "True"),
        ("POLITENESS_FLOOR", [1], "[1]"),
        ("POLITENESS_DEAD_AFTER", 0, "0"),
        ("POLITENESS_DEAD_AFTER", 2.5, "2.5"),
        ("POLITENESS_DEAD_AFTER", "2.5", "2.5"),
        ("POLITENESS_SEND_MARGIN", -1, "-1"),
        ("POLITENESS_IDLE_TTL", 0.5, "0.5"),
        ("POLITENESS_MAX_RETRY_AFTER", "nan", "nan"),
        ("POLITENESS_MAX_CRAWL_DELAY", -1, "-1"),
        ("POLITENESS_DNS_TIMEOUT", 0, "0"),
        ("POLITENESS_DNS_NAMESERVERS", ["nope"], "nope"),
        ("POLITENESS_DNS_NAMESERVERS", ["127.0.0.1:99999"], "127.0.0.1:99999"),
        ("POLITENESS_DNS_NAMESERVERS", ["127.0.0.1:0"], "127.0.0.1:0"),
        ("POLITENESS_DNS_NAMESERVERS", ["127.0.0.1:"], "127.0.0.1:"),
        ("POLITENESS_DNS_NAMESERVERS", ["[::1]:x"], "[::1]:x"),
        ("POLITENESS_DNS_NAMESERVERS", ["[::1]junk"], "[::1]junk"),
        ("POLITENESS_DNS_NAMESERVERS", ["[::1"], "[::1"),
        ("POLITENESS_DNS_NAMESERVERS", ["[::1]:"], "[::1]:"),
        ("POLITENESS_DNS_NAMESERVERS", ["[nope]:53"], "[nope]:53"),
        ("POLITENESS_DNS_NAMESERVERS", ["dns.google"], "dns.google"),
        ("POLITENESS_DNS_NAMESERVERS", [53], "53"),
        ("POLITENESS_IP_EXEMPT", ["not-a-net"], "not-a-net"),
        ("POLITENESS_IP_EXEMPT", ["127.0.9.0/33"], "127.0.9.0/33"),
        ("POLITENESS_HOST_GROUPING", "x", "x"),
        ("POLITENESS_CRAWL_DELAY_OVER_MAX", "x", "x"),
        ("POLITENESS_HOSTS", {"a.com": {"bogus": 1}}, "bogus"),
        ("POLITENESS_HOSTS", {"a.com": {"floor": "slow"}}, "slow"),
        ("POLITENESS_HOSTS", {"a.com": {"floor": 100}}, "100"),
        ("POLITENESS_HOSTS", {"a.com": 5}, "5"),
        ("POLITENESS_HOSTS", "a.com", "a.com"),
        ("POLITENESS_ENABLED", "maybe", "maybe"),
        ("POLITENESS_ENABLED", 2, "2"),
        ("POLITENESS_DNS_PIN", "yes please", "yes please"),
        ("POLITENESS_DNS_HOSTS_FILE", 42, "42"),
        ("POLITENESS_RECOVERY", "aimd", "aimd"),
        ("POLITENESS_RECOVERY", 3, "3"),
        ("POLITENESS_HOSTS", {"a.com": {"recovery": "slow"}}, "slow"),
    ],
)
def test_bad_value_names_setting_and_value(name: str, value: Any, shown: str) -> None:
    with pytest.raises(ValueError, match=name) as info:
        load(**{name: value})
    assert shown in str(info.value)


def test_host_override_error_names_the_host() -> None:
    with pytest.raises(ValueError, match=r"POLITENESS_HOSTS\['a.com'\]") as info:
        load(POLITENESS_HOSTS={"a.com": {"bogus": 1}})
    assert "bogus" in str(info.value)
    assert "floor" in str(info.value)  # lists the allowed keys


def test_host_override_backoff_style_error_is_translated() -> None:
    with pytest.raises(ValueError, match="POLITENESS_BACKOFF must be >= 1") as info:
        load(POLITENESS_BACKOFF=0.5)
    assert "Config." not in str(info.value)


def test_dns_ttl_order() -> None:
    with pytest.raises(ValueError, match="POLITENESS_DNS_MAX_TTL") as info:
        load(POLITENESS_DNS_MIN_TTL=100, POLITENESS_DNS_MAX_TTL=10)
    assert "100" in str(info.value)
    assert "10" in str(info.value)


def test_none_means_default() -> None:
    s = load(POLITENESS_FLOOR=None, POLITENESS_HOSTS=None, POLITENESS_ENABLED=None)
    assert s.config.floor == 0.25
    assert s.enabled is True
    assert dict(s.hosts) == {}


def test_recovery_setting_and_per_host_override() -> None:
    s = load(POLITENESS_RECOVERY="additive",
             POLITENESS_HOSTS={"api.example": {"recovery": "fast", "floor": 0.5}})
    assert s.config.recovery == "additive"
    assert s.config_for("api.example").recovery == "fast"
    assert s.config_for("api.example").floor == 0.5
    assert load(POLITENESS_HOSTS={"a.com": {"floor": 0.5}}).config_for("a.com").recovery == "fast"


@pytest.mark.parametrize(("name", "value", "message"), [
    ("POLITENESS_ON_CEILING", "drop", "POLITENESS_ON_CEILING must be one of"),
    ("POLITENESS_SUSPEND_COOLDOWN", 0, "POLITENESS_SUSPEND_COOLDOWN must be >= 0.001, got 0"),
    ("POLITENESS_SUSPEND_MAX_COOLDOWN", "soon", "POLITENESS_SUSPEND_MAX_COOLDOWN must be a number"),
    ("POLITENESS_WAIT_FOR_SUSPENDED", "maybe", "POLITENESS_WAIT_FOR_SUSPENDED must be True or"),
])
def test_bad_suspension_settings_name_the_setting(name: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PolitenessSettings.from_settings({name: value})


def test_suspension_settings_defaults() -> None:
    s = PolitenessSettings.from_settings({})
    assert (s.on_ceiling, s.suspend_cooldown, s.suspend_max_cooldown, s.wait_for_suspended) == (
        "suspend", None, 3600.0, False)
