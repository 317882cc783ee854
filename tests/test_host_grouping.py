"""POLITENESS_HOSTS under POLITENESS_HOST_GROUPING = "domain": an override
named for a subdomain applies to its group (the only bucket there is)."""

from __future__ import annotations

import pytest
from scrapy.utils.test import get_crawler

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.settings import PolitenessSettings


def test_a_subdomain_override_applies_to_its_group() -> None:
    crawler = get_crawler(settings_dict={
        "POLITENESS_HOST_GROUPING": "domain", "POLITENESS_DNS_HOSTS_FILE": "",
        "POLITENESS_HOSTS": {"www.Example.co.uk": {"floor": 5.0}},
    })
    mw = PolitenessMiddleware.from_crawler(crawler)
    for host in ("www.example.co.uk", "img.example.co.uk", "example.co.uk"):
        key = mw.keys.key(host)
        assert key == "example.co.uk"
        assert mw.settings.config_for(key).floor == 5.0
        assert mw.hosts.get(key).config.floor == 5.0
    assert mw.settings.config_for(mw.keys.key("other.co.uk")).floor == 0.25


def test_two_differing_overrides_for_one_group_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"POLITENESS_HOSTS\['a.example.com'\] and "
                                         r"POLITENESS_HOSTS\['b.example.com'\] differ"):
        PolitenessSettings.from_settings({
            "POLITENESS_HOST_GROUPING": "domain",
            "POLITENESS_HOSTS": {"a.example.com": {"floor": 5.0}, "b.example.com": {"floor": 6.0}},
        })


def test_equal_overrides_for_one_group_and_host_grouping_keep_their_keys() -> None:
    same = PolitenessSettings.from_settings({
        "POLITENESS_HOST_GROUPING": "domain",
        "POLITENESS_HOSTS": {"a.example.com": {"floor": 5.0}, "b.example.com": {"floor": 5.0}},
    })
    assert set(same.hosts) == {"example.com"}
    by_host = PolitenessSettings.from_settings({
        "POLITENESS_HOSTS": {"a.example.com": {"floor": 5.0}}})
    assert set(by_host.hosts) == {"a.example.com"}
