"""The benchmark's scenarios: farm spec, URL list, target interval, IP floor, T*.

Every scenario states its target interval (the host spacing asked of every
configuration) and its IP floor. The politeness contract judged on the server
side: consecutive starts of one host at least ``interval`` apart, consecutive
starts on one IP at least ``max(ip_floor, interval)`` apart, and no start of a
host inside a Retry-After window it was given.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DOMAIN = "farm.test"


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    spec: dict[str, Any]
    urls: list[tuple[str, str]]  # (host, path), in the order the spider yields them
    interval: float
    ip_floor: float
    concurrent_requests: int = 16
    extra: dict[str, Any] = field(default_factory=dict)  # settings for every config
    host_intervals: dict[str, float] = field(default_factory=dict)  # hosts slower than interval
    robots_delays: bool = False  # the plugin learns host_intervals from robots.txt Crawl-delay
    configs: tuple[str, ...] = ()  # the configurations to run; () means all of them
    also: tuple[str, ...] = ()  # run besides all of them (not with ``configs``)
    start_interval: float | None = None  # the plugin's POLITENESS_DEFAULT (None: interval)

    def interval_of(self, host: str) -> float:
        return self.host_intervals.get(host, self.interval)

    @property
    def coupled(self) -> bool:
        """Whether the IP rule is the coupled model's (``POLITENESS_IP_MODEL``)."""
        return self.extra.get("POLITENESS_IP_MODEL", "decoupled") == "coupled"

    def ip_spacing_of(self, ip: str) -> float:
        """The spacing the IP rule asks between two starts on ``ip``: the IP floor
        (decoupled, the default: an IP keeps its own interval), or coupled
        max(ip_floor, the largest interval of a host on ``ip``)."""
        if not self.coupled:
            return self.ip_floor
        hosts = [h for h, i in self.host_ip().items() if i == ip]
        return max([self.ip_floor, *(self.interval_of(h) for h in hosts)])

    @property
    def ip_spacing(self) -> float:
        return max(self.ip_floor, self.interval) if self.coupled else self.ip_floor

    def host_ip(self) -> dict[str, str]:
        return {h: raw["ip"] for h, raw in self.spec["hosts"].items()}

    def rate_limits(self) -> dict[str, tuple[float, float]]:
        """Host -> (rate_interval, retry_after) for the farm's rate-limited hosts."""
        return {h: (float(raw.get("rate_interval", 1.0)), float(raw.get("retry_after", 1)))
                for h, raw in self.spec["hosts"].items() if raw.get("kind") == "rate_limited"}

    def lower_bound(self) -> tuple[float, str]:
        """T*: the shortest wall time any polite crawl of these URLs can take.

        Max over every host of (requests - 1) x interval, over every IP of
        (requests - 1) x max(ip_floor, interval), and for a rate-limited host of
        (requests - 1) x its server-side rate interval. Requests are counted
        from the URL list (plus one robots.txt per host under ROBOTSTXT_OBEY),
        so retries do not inflate the bound. Returns the
        bound and what sets it.
        """
        ips = self.host_ip()
        per_host = Counter(h for h, _ in self.urls)
        if self.extra.get("ROBOTSTXT_OBEY"):  # each host's robots.txt is one more start
            per_host.update(per_host.keys())
        per_ip = Counter(ips[h] for h in per_host.elements())
        best = (0.0, "-")
        for host, n in per_host.items():
            best = max(best, ((n - 1) * self.interval_of(host), f"host {host}"))
        for ip, n in per_ip.items():
            best = max(best, ((n - 1) * self.ip_spacing_of(ip), f"IP {ip}"))
        for host, raw in self.spec["hosts"].items():
            if raw.get("kind") == "rate_limited":
                best = max(best, (_bucket_bound(raw, per_host[host]), f"rate of {host}"))
        return best

    def rate_change(self) -> dict[str, int]:
        """Host -> served requests after which its rate changes (limit-drop hosts)."""
        return {h: int(raw["rate_change_after"]) for h, raw in self.spec["hosts"].items()
                if raw.get("kind") == "rate_limited" and raw.get("rate_change_after")}


def _bucket_bound(raw: dict[str, Any], n: int) -> float:
    """(n - burst) tokens at the server's rate; with a drop, the first part at the old rate."""
    rate = float(raw.get("rate_interval", 1.0))
    burst = float(raw.get("burst", 1.0))
    k = int(raw.get("rate_change_after", 0))
    if 0 < k < n:
        return max(0.0, k - burst) * rate + (n - k) * float(raw.get("rate_interval_after", 1.0))
    return max(0.0, n - burst) * rate


def _pages(n: int) -> list[str]:
    return [f"/p/{i}" for i in range(n)]


def broad(quick: bool) -> Scenario:
    n_hosts, n_ips, per_host = (8, 2, 2) if quick else (24, 4, 6)
    ips = [f"127.0.0.{2 + i}" for i in range(n_ips)]
    hosts = {f"b{i:02d}.{DOMAIN}": {"ip": ips[i % n_ips], "kind": "normal", "pages": per_host}
             for i in range(n_hosts)}
    urls = [(h, p) for p in _pages(per_host) for h in hosts]
    return Scenario("broad", f"{n_hosts} hosts on {n_ips} IPs, {per_host} URLs each",
                    {"ips": ips, "hosts": hosts}, urls, interval=0.5, ip_floor=0.25)


def shared_ip(quick: bool) -> Scenario:
    n_hosts, per_host = (6, 2) if quick else (16, 4)
    hosts = {f"v{i:02d}.{DOMAIN}": {"ip": "127.0.0.2", "kind": "normal", "pages": per_host}
             for i in range(n_hosts)}
    urls = [(h, p) for p in _pages(per_host) for h in hosts]
    return Scenario("shared-ip", f"{n_hosts} vhosts on 127.0.0.2, {per_host} URLs each",
                    {"ips": ["127.0.0.2"], "hosts": hosts}, urls, interval=0.25, ip_floor=0.25)


def head_of_line(quick: bool) -> Scenario:
    big, n_small, per_small = (10, 4, 2) if quick else (40, 12, 3)
    small_ips = [f"127.0.0.{3 + i}" for i in range(n_small)]
    hosts: dict[str, Any] = {f"big.{DOMAIN}": {"ip": "127.0.0.2", "kind": "normal",
                                               "pages": big}}
    for i, ip in enumerate(small_ips):
        hosts[f"s{i:02d}.{DOMAIN}"] = {"ip": ip, "kind": "normal", "pages": per_small}
    urls = [(f"big.{DOMAIN}", p) for p in _pages(big)]
    urls += [(h, p) for h in hosts if h != f"big.{DOMAIN}" for p in _pages(per_small)]
    return Scenario("head-of-line",
                    f"big host ({big} URLs, yielded first) then {n_small} hosts x {per_small} "
                    "URLs, one IP each",
                    {"ips": ["127.0.0.2", *small_ips], "hosts": hosts}, urls,
                    interval=0.5, ip_floor=0.5, concurrent_requests=8)


def rate_limited(quick: bool) -> Scenario:
    n = 6 if quick else 20
    host = f"limited.{DOMAIN}"
    spec = {"ips": ["127.0.0.2"], "hosts": {host: {
        "ip": "127.0.0.2", "kind": "rate_limited", "rate_interval": 1.0, "retry_after": 2,
        "pages": n}}}
    return Scenario("rate-limited",
                    f"{n} URLs of a host answering 429 (Retry-After: 2) to requests less than "
                    f"1.0 s after its last 200", spec, [(host, p) for p in _pages(n)],
                    interval=0.5, ip_floor=0.25)


def slow_head(quick: bool) -> Scenario:
    """Head-of-line blocking by a slow host: its waiting requests hold the slots.

    Scrapy's default queue balances by requests inside downloader slots; a
    request waiting in the gate is not in one, so the slow host always looks
    idle and keeps being handed requests that then sit in the gate.
    """
    n_slow, n_fast, per_fast = (3, 3, 8) if quick else (5, 8, 40)
    fast_ips = [f"127.0.0.{3 + i}" for i in range(n_fast)]
    hosts: dict[str, Any] = {f"slow.{DOMAIN}": {"ip": "127.0.0.2", "kind": "normal",
                                                "pages": n_slow}}
    for i, ip in enumerate(fast_ips):
        hosts[f"f{i:02d}.{DOMAIN}"] = {"ip": ip, "kind": "normal", "pages": per_fast}
    urls = [(f"slow.{DOMAIN}", p) for p in _pages(n_slow)]
    urls += [(h, p) for p in _pages(per_fast) for h in hosts if h != f"slow.{DOMAIN}"]
    return Scenario("slow-head",
                    f"slow host ({n_slow} URLs, 3 s interval, yielded first) then {n_fast} "
                    f"hosts x {per_fast} URLs at 0.5 s, one IP each",
                    {"ips": ["127.0.0.2", *fast_ips], "hosts": hosts}, urls,
                    interval=0.5, ip_floor=0.5, concurrent_requests=8,
                    host_intervals={f"slow.{DOMAIN}": 3.0})


def crawl_delay_head(quick: bool) -> Scenario:
    """Hosts whose robots.txt asks a long Crawl-delay, yielded before many fast hosts.

    With waiters in the gate, the slow hosts' requests hold the downloader's
    slots for the first seconds; waiting in the scheduler, the fast hosts run
    at their limit from the first second.
    """
    n_slow, per_slow, n_fast, per_fast = (2, 3, 6, 12) if quick else (4, 6, 20, 60)
    delay = 2.5
    slow_ips = [f"127.0.0.{2 + i}" for i in range(n_slow)]
    fast_ips = [f"127.0.0.{2 + n_slow + i}" for i in range(n_fast)]
    hosts: dict[str, Any] = {
        f"cd{i}.{DOMAIN}": {"ip": ip, "kind": "normal", "pages": per_slow,
                            "crawl_delay": delay} for i, ip in enumerate(slow_ips)}
    for i, ip in enumerate(fast_ips):
        hosts[f"f{i:02d}.{DOMAIN}"] = {"ip": ip, "kind": "normal", "pages": per_fast}
    slow = [h for h in hosts if h.startswith("cd")]
    urls = [(h, p) for h in slow for p in _pages(per_slow)]
    urls += [(h, p) for p in _pages(per_fast) for h in hosts if h not in slow]
    return Scenario("crawl-delay-head",
                    f"{n_slow} hosts whose robots.txt asks Crawl-delay {delay:g} s "
                    f"({per_slow} URLs each, yielded first), then {n_fast} hosts x {per_fast} "
                    "URLs at 0.3 s; one IP each; ROBOTSTXT_OBEY",
                    {"ips": [*slow_ips, *fast_ips], "hosts": hosts}, urls,
                    interval=0.3, ip_floor=0.3, concurrent_requests=16,
                    extra={"ROBOTSTXT_OBEY": True},
                    host_intervals=dict.fromkeys(slow, delay), robots_delays=True)


def many_hosts(quick: bool) -> Scenario:
    """Many hosts at a high rate: the per-host cost of DNS, gate and queue state."""
    n_hosts, n_ips, per_host = (300, 10, 2) if quick else (1500, 30, 2)
    ips = [f"127.0.0.{2 + i}" for i in range(n_ips)]
    hosts = {f"m{i:04d}.{DOMAIN}": {"ip": ips[i % n_ips], "kind": "normal", "pages": per_host}
             for i in range(n_hosts)}
    urls = [(h, p) for p in _pages(per_host) for h in hosts]
    return Scenario("many-hosts", f"{n_hosts} hosts on {n_ips} IPs, {per_host} URLs each",
                    {"ips": ips, "hosts": hosts}, urls, interval=0.1, ip_floor=0.1,
                    concurrent_requests=64, also=("delay-per-ip",))


def bucket(rate: int, retry_after: int, form: str, quick: bool) -> Scenario:
    """A token bucket of ``rate`` requests/s (burst 1) answering 429 + Retry-After.

    The plugin starts at its default interval (1 s) and its floor (0.25 s) is
    the judged host spacing; the server's pace is for it to find.
    """
    pages = 20 if quick else (60 if rate == 1 else 100)
    host = f"bucket.{DOMAIN}"
    spec = {"ips": ["127.0.0.2"], "hosts": {host: {
        "ip": "127.0.0.2", "kind": "rate_limited", "rate_interval": 1 / rate, "burst": 1,
        "retry_after": retry_after, "retry_after_form": form, "pages": pages}}}
    shown = "HTTP-date" if form == "date" else "seconds"
    name = f"bucket-r{rate}-ra{retry_after}-{form[0]}"
    return Scenario(name,
                    f"{pages} URLs of a token bucket of {rate}/s (burst 1) answering 429 + "
                    f"Retry-After {retry_after} s ({shown}); the plugin starts at 1 s",
                    spec, [(host, p) for p in _pages(pages)], interval=0.25, ip_floor=0.25,
                    configs=RATE_CONFIGS if name in COMPARE_SEED else GRID_CONFIGS,
                    start_interval=1.0)


def limit_drop(quick: bool) -> Scenario:
    """A bucket of 4/s that drops to 1/s after 40 served pages (100 URLs)."""
    pages, change = (30, 12) if quick else (100, 40)
    host = f"drop.{DOMAIN}"
    spec = {"ips": ["127.0.0.2"], "hosts": {host: {
        "ip": "127.0.0.2", "kind": "rate_limited", "rate_interval": 0.25, "burst": 1,
        "rate_change_after": change, "rate_interval_after": 1.0, "retry_after": 2,
        "pages": pages}}}
    return Scenario("limit-drop",
                    f"{pages} URLs of a token bucket of 4/s that drops to 1/s after {change} "
                    "served (429 + Retry-After 2 s); the plugin starts at 1 s",
                    spec, [(host, p) for p in _pages(pages)], interval=0.25, ip_floor=0.25,
                    configs=RATE_CONFIGS, start_interval=1.0)


def reissue(quick: bool) -> Scenario:
    """A middleware above the plugin answering every 3rd response with a new Request.

    Each such answer used to leak one of its host's in-flight slots (the plugin
    freed them in its own ``process_response`` only) until the host wedged.
    Side by side with the same crawl without it; each re-issued URL is one
    more fetch of its host, so the table's T* (from the URL list) is below
    what the re-issuing crawl can reach: the note under it gives the bound of
    the requests the server saw.
    """
    n_hosts, per_host = (6, 6) if quick else (18, 10)
    ips = [f"127.0.0.{2 + i}" for i in range(n_hosts)]
    hosts = {f"r{i:02d}.{DOMAIN}": {"ip": ip, "kind": "normal", "pages": per_host}
             for i, ip in enumerate(ips)}
    urls = [(h, p) for p in _pages(per_host) for h in hosts]
    return Scenario("reissue-960",
                    f"{n_hosts} hosts x {per_host} URLs, one IP each, "
                    "CONCURRENT_REQUESTS_PER_DOMAIN=2; a middleware at 960 "
                    "re-issues every 3rd response (config plugin+reissue-960)",
                    {"ips": ips, "hosts": hosts}, urls, interval=0.5, ip_floor=0.25,
                    extra={"CONCURRENT_REQUESTS_PER_DOMAIN": 2},
                    configs=("plugin", "plugin+reissue-960"))


def conn_setup(setup: float, quick: bool) -> Scenario:
    """Vhosts sharing IPs on a network where a new connection costs ``setup`` s.

    The farm reads a new connection's first request ``setup`` after it came
    (TCP, then TLS, on a long path); kept-alive requests arrive at once.
    """
    n_hosts, per_host = (8, 4) if quick else (8, 10)
    ips = ["127.0.0.2", "127.0.0.3"]
    hosts = {f"c{i}.{DOMAIN}": {"ip": ips[i % 2], "kind": "normal", "pages": per_host,
                                "setup": setup} for i in range(n_hosts)}
    urls = [(h, p) for p in _pages(per_host) for h in hosts]
    return Scenario(f"conn-setup-{setup:g}",
                    f"{n_hosts} vhosts on 2 IPs x {per_host} URLs, connection set-up {setup:g} s",
                    {"ips": ips, "hosts": hosts}, urls, interval=0.5, ip_floor=0.25,
                    configs=("plugin", "delay"))


def dead_host(quick: bool) -> Scenario:
    """A healthy host beside one that only answers 503, dead at the default
    ceiling after its first answer: the crawl must close with the healthy one."""
    per_host = 8 if quick else 20
    hosts = {f"ok.{DOMAIN}": {"ip": "127.0.0.2", "kind": "normal", "pages": per_host},
             f"dead.{DOMAIN}": {"ip": "127.0.0.3", "kind": "always_503", "pages": per_host}}
    urls = [(h, p) for p in _pages(per_host) for h in hosts]
    return Scenario("dead-host", f"a healthy host and an always-503 one, {per_host} URLs each "
                    "(dead after its first 503: POLITENESS_BACKOFF 200, POLITENESS_DEAD_AFTER 1)",
                    {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": hosts}, urls,
                    interval=0.5, ip_floor=0.25, configs=("plugin",),
                    extra={"POLITENESS_BACKOFF": 200.0, "POLITENESS_DEAD_AFTER": 1,
                           "POLITENESS_ON_CEILING": "dead"})


# "plugin-bracket": the bracket search without the round-pace prior, the plugin's
# recovery before it (POLITENESS_RECOVERY = "bracket"), side by side with the default.
GRID_CONFIGS = ("plugin", "plugin-bracket", "autothrottle")
RATE_CONFIGS = ("plugin", "plugin-bracket", "plugin-additive", "autothrottle")
RATE_GRID = {f"bucket-r{r}-ra{ra}-{form[0]}": (r, ra, form)
             for r in (1, 2, 4) for ra in (1, 2, 5) for form in ("seconds", "date")}
# 3/s is no power of two of the 1 s start: a x0.75 (or x0.5) descent cannot land on it.
RATE_GRID["bucket-r3-ra2-s"] = (3, 2, "seconds")
COMPARE_SEED = ("bucket-r2-ra2-d",)  # cells also run with the seed's additive recovery
RATE_SUBSET = ("bucket-r1-ra5-s", "bucket-r2-ra2-d", "bucket-r2-ra5-s", "bucket-r4-ra1-d")


def _grid_cell(name: str) -> Any:
    r, ra, form = RATE_GRID[name]
    return lambda quick: bucket(r, ra, form, quick)


SCENARIOS = {"broad": broad, "shared-ip": shared_ip, "head-of-line": head_of_line,
             "slow-head": slow_head, "rate-limited": rate_limited,
             "crawl-delay-head": crawl_delay_head, "many-hosts": many_hosts,
             "limit-drop": limit_drop, "reissue-960": reissue,
             "conn-setup-0.3": lambda quick: conn_setup(0.3, quick),
             "conn-setup-0.7": lambda quick: conn_setup(0.7, quick),
             "dead-host": dead_host,
             **{name: _grid_cell(name) for name in RATE_GRID}}
# --only groups; a plain `python -m bench` runs the subset, not the whole grid.
GROUPS = {"rate-grid": tuple(RATE_GRID), "rate-subset": RATE_SUBSET,
          "rate-r2": tuple(n for n in RATE_GRID if n.startswith(("bucket-r2", "bucket-r3")))}
DEFAULT_SKIP = tuple(n for n in RATE_GRID if n not in RATE_SUBSET)
