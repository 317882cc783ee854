"""The Lua scripts' sources, each after the fragments it shares with the others.

Redis runs each script alone (no modules), so shared code is concatenated in
front of it: the host hash layout and clamp (``_host.lua``), and the one rule
for "may it go now" and "spend both" (``_eligibility.lua``, the mirror of
``policy/eligibility.py``) come first in every script.
"""

from __future__ import annotations

from importlib.resources import files

__all__ = ["lua_source"]

_SHARED = ("_host.lua", "_eligibility.lua")


def lua_source(name: str, *fragments: str) -> str:
    """Script ``name``'s source: the shared fragments, then ``fragments``, then it."""
    lua = files("scrapy_politeness.distributed").joinpath("lua")
    return "".join(lua.joinpath(part).read_text(encoding="utf-8")
                   for part in (*_SHARED, *fragments, name))
