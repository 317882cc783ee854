"""One Lua rule for "may it go now": the scripts share ``_eligibility.lua``.

Redis runs each script alone, so the shared rule is text concatenated in front
of every script; these tests read the sources (no server): the rule's
arithmetic lives in the fragment only, and every script is loaded behind it.
Whether the scripts then behave as the Python does is the contract tests' job
(``test_frontier_lua.py``, ``test_redis_backend.py``, ``test_properties.py``).
"""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from scrapy_politeness.distributed import redis_backend
from scrapy_politeness.distributed.frontier import FRONTIER_SCRIPTS, frontier_script

LUA = files("scrapy_politeness.distributed").joinpath("lua")
SCRIPTS = sorted(p.name for p in LUA.iterdir() if p.name.endswith(".lua")
                 and not p.name.startswith("_"))
FRAGMENT = LUA.joinpath("_eligibility.lua").read_text(encoding="utf-8")

# The rule's arithmetic: an instant padded by the margin, the host's next start,
# an IP key moved, a key's lifetime extended.
RULE = {
    "an instant plus the margin": re.compile(r"\+ margin\b"),
    "last start plus interval": re.compile(r"last_start \+ interval"),
    "an IP instant written (SET key fmt(...))": re.compile(r"'SET', [^,]+, fmt\("),
    "a lifetime extended (PEXPIRE)": re.compile(r"'PEXPIRE'"),
    "the server clock (TIME)": re.compile(r"'TIME'"),
}


def _code(text: str) -> str:
    """The source without its comments."""
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize("name", SCRIPTS)
def test_no_script_writes_the_rule_again(name: str) -> None:
    code = _code(LUA.joinpath(name).read_text(encoding="utf-8"))
    again = [what for what, pattern in RULE.items() if pattern.search(code)]
    assert not again, f"{name} repeats {again}: use _eligibility.lua's functions"


def test_the_fragment_holds_the_rule() -> None:
    code = _code(FRAGMENT)
    assert all(pattern.search(code) for pattern in RULE.values())


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_is_loaded_behind_the_fragment(name: str) -> None:
    if name.startswith("frontier_"):  # as the frontier queue registers them
        short = name.removeprefix("frontier_").removesuffix(".lua")
        assert short in FRONTIER_SCRIPTS, f"{name} is never loaded"
        source = frontier_script(short)
    else:  # as the Redis backend loads them
        assert name.removesuffix(".lua") in redis_backend._SCRIPTS, f"{name} is never loaded"
        source = redis_backend._script(name)
    assert FRAGMENT in source
    assert source.index(FRAGMENT) < source.index(LUA.joinpath(name).read_text(encoding="utf-8"))


def test_the_scripts_that_book_a_start_use_the_rule() -> None:
    """reserve, the frontier's pop and the wait before a booked send decide by it."""
    for name, calls in (("reserve.lua", ("host_ready(", "held_until(", "spend_host(", "spend_ip(")),
                        ("frontier_pop.lua", ("host_ready(", "held_until(", "spend_host(",
                                              "spend_ip(")),
                        ("wait_before_send.lua", ("held_until(",))):
        code = _code(LUA.joinpath(name).read_text(encoding="utf-8"))
        assert all(call in code for call in calls), name
