"""The README and docs/: every relative link resolves, every setting is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scrapy_politeness.settings import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m) for m in re.findall(r"^#+\s+(.*)$", text, flags=re.M)}


def _links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300
    assert lines[2:6] == ["```sh", lines[3], lines[4], "```"]
    assert lines[3].startswith("make demo")
    assert lines[4].startswith("make test")


def test_every_setting_is_in_the_settings_reference() -> None:
    text = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    missing = [name for name in DEFAULTS if f"| `{name}` |" not in text]
    assert not missing, f"not in docs/reference/settings.md: {missing}"


def test_no_words_that_mean_nothing_to_a_user() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8").lower()
        for word in ("reference design", "the seed"):
            assert word not in text, f"{page.relative_to(ROOT)} says {word!r}"
