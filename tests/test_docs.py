"""The README and docs/ as a user reads them.

Every relative link resolves, every setting is documented, every `pip install` works from a
checkout as written, and no page speaks of the project's own history (its rounds, issues, runs).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from scrapy_politeness.settings import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Pages other work adds; linked already so that the links are right the day they land.
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


def test_readme_says_install_and_enable_within_its_first_40_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300
    first = "\n".join(lines[:40])
    assert "\npip install /path/to/" in first
    assert 'ADDONS = {"scrapy_politeness.Addon": 300}' in first
    assert "make demo" in "\n".join(lines[40:])  # the contributors' commands come later


def test_the_pages_users_look_for_exist() -> None:
    for page in ("docs/usage/migrating-from-autothrottle.md", "docs/usage/troubleshooting.md"):
        assert (ROOT / page).is_file(), page
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog
    assert "keepachangelog.com" in changelog


def test_the_migration_page_lists_every_throttle_setting_the_plugin_warns_about() -> None:
    from scrapy_politeness.startup.throttles import REPLACED

    text = (ROOT / "docs" / "usage" / "migrating-from-autothrottle.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    missing = [name for name in [*REPLACED, "DOWNLOAD_SLOTS"]
               if not any(f"`{name}" in row for row in rows)]
    assert not missing, f"not in the migration page's table: {missing}"


def test_every_setting_is_in_the_settings_reference() -> None:
    text = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    missing = [name for name in DEFAULTS if f"| `{name}` |" not in text]
    assert not missing, f"not in docs/reference/settings.md: {missing}"


def test_no_words_that_mean_nothing_to_a_user() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8").lower()
        for word in ("reference design", "the seed"):
            assert word not in text, f"{page.relative_to(ROOT)} says {word!r}"


# The pages a user reads. History lives in CHANGELOG.md and bench/results-history.md;
# docs/benchmark.md is the contributors' method page, the story of each figure included.
USER_PAGES = [ROOT / "README.md", ROOT / "bench" / "results.md",
              *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "benchmark.md"),
              *sorted((ROOT / "example_project").rglob("*.md"))]
HISTORY = re.compile(
    r"(?<![-\w])(?:[Rr]ounds?|[Ii]ssues?) #?\d+"  # round 5, issue #12
    r"|\b[Rr]uns? [A-Z](?=[,.;:)]|\s+(?:and|in|of)\b)"  # run labels: run E, runs A and B
    r"|\b(?:[Tt]he|[Tt]his|[Tt]hat) issue\b"
    r"|\b[Ee]arlier (?:back-?offs?|versions?|releases?|code|runs?|figures?|designs?|models?"
    r"|controllers?|rules?|behaviou?r)\b"
    r"|\b[Pp]revious (?:versions?|releases?|code|models?|controllers?|designs?|back-?offs?"
    r"|rules?|behaviou?r|figures?)\b"
    r"|\b[Pp]redat(?:e|es|ed|ing)\b|\b(?:[Tt]he plugin|[Ii]t) used to\b"
    r"|\b(?:[Oo]ld|[Nn]ew) code\b|\b[Bb]efore the (?:fix|change)\b|\b[Bb]ranch [a-z]+\d+\w*"
    r"|\b[Oo]lder (?:versions?|releases?|code|models?|controllers?|designs?|rules?)\b"
    r"|\bthen in force\b")


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_project_history_in_user_docs(page: Path) -> None:
    """A user knows nothing of our rounds, issues or bench runs: say what the program does."""
    found = HISTORY.findall(page.read_text(encoding="utf-8"))
    assert not found, f"{page.relative_to(ROOT)} speaks of {found}"


def test_history_pattern_catches_what_it_should() -> None:
    for text in ("round 9", "Round 5", "rounds 5-6", "issue 9", "issue #12", "run I)", "runs E,",
                 "run F in bench", "Runs A and B", "the issue allows +1", "the earlier back-off",
                 "figures below predate the shorter wait", "a previous version", "Earlier runs",
                 "The plugin used to read", "the new code had", "branch r10b", "before the fix",
                 "measured under an older model", "the per-IP rule then in force"):
        assert HISTORY.search(text), text
    for text in ("--rounds 5", "round paces", "issues the same requests", "run a crawl", "Run it",
                 "run N Scrapy processes", "median of 5 rounds", "a cold one sent earlier",
                 "a host earlier than t_429", "since the previous line",
                 "the previous run's JOBDIR", "the saved state is stale",
                 "what is used to space requests"):
        assert not HISTORY.search(text), text


SETTING_NAME = re.compile(r"\bPOLITENESS_[A-Z0-9_]*[A-Z0-9]\b")


def unknown_setting_names(text: str) -> list[str]:
    """``POLITENESS_*`` names no setting has; a misspelling shown as one (``unknown setting
    POLITENESS_FLOR``, a misspelt setting) is the one exception."""
    return [m.group(0) for m in SETTING_NAME.finditer(text)
            if m.group(0) not in DEFAULTS
            and not re.search(r"unknown setting $|misspelt setting \(``$",
                              text[max(0, m.start() - 30):m.start()])]


@pytest.mark.parametrize("page", [*USER_PAGES, *sorted((ROOT / "scrapy_politeness").rglob("*.py")),
                                  *sorted((ROOT / "example_project").rglob("*.py"))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_setting_named_exists(page: Path) -> None:
    """A page (or a message of the program) that names a setting names a real one."""
    unknown = unknown_setting_names(page.read_text(encoding="utf-8"))
    assert not unknown, f"{page.relative_to(ROOT)} names {unknown}, not in settings.py"


def test_the_setting_name_check_refuses_a_name_that_does_not_exist() -> None:
    assert unknown_setting_names("With `POLITENESS_GROUPING = \"domain\"` the IP") == [
        "POLITENESS_GROUPING"]
    assert unknown_setting_names("`POLITENESS_HOST_GROUPING`, every `POLITENESS_*` setting") == []
    assert unknown_setting_names("`unknown setting POLITENESS_FLOR is ignored`") == []
    assert unknown_setting_names("set POLITENESS_FLOR = 1 to go faster") == ["POLITENESS_FLOR"]


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS = PYPROJECT["optional-dependencies"]
PIP = re.compile(r"pip install ([^`\n]*?)(?=\s+#|\s+\(|`|\)|$)", re.M)


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower()


def _install_commands() -> list[tuple[str, str]]:
    """(where, arguments) of every `pip install` in the docs and in the program's messages."""
    sources = [*PAGES, *sorted((ROOT / "scrapy_politeness").rglob("*.py")),
               *sorted((ROOT / "example_project").rglob("*.py"))]
    found = []
    for path in sources:
        if not path.exists():
            continue
        for match in PIP.finditer(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), match.group(1).strip()))
    return found


def test_every_install_command_works_from_a_checkout() -> None:
    """The package is not on PyPI: a checkout's path, its real extras, or a plain dependency."""
    commands = _install_commands()
    assert len(commands) >= 5, commands
    known = {_requirement_name(r) for r in PYPROJECT["dependencies"]}
    for requirements in EXTRAS.values():
        known |= {_requirement_name(r) for r in requirements}
    bad = []
    for where, arguments in commands:
        targets = [a for a in shlex.split(arguments) if not a.startswith("-")]
        if not targets:
            bad.append((where, arguments, "nothing to install"))
        for target in targets:
            if target.startswith(("/", ".", "~")):  # a checkout, perhaps with extras
                extras = re.fullmatch(r"[^\[]+(?:\[([\w,-]+)\])?", target)
                unknown = set(((extras and extras.group(1)) or "").split(",")) - {""} - set(EXTRAS)
                if extras is None or unknown:
                    bad.append((where, target, f"no such extra: {sorted(unknown)}"))
            elif _requirement_name(target) not in known - {PYPROJECT["name"]}:
                bad.append((where, target, "not a dependency of ours (and we are not on PyPI)"))
    assert not bad, bad


def test_the_install_check_refuses_what_pip_would() -> None:
    assert PIP.findall("run `pip install 'scrapy-politeness[redis]'` first") == [
        "'scrapy-politeness[redis]'"]
    assert _requirement_name("scrapy-politeness[redis]") == PYPROJECT["name"]
    assert "plot" in EXTRAS
    assert "plots" not in EXTRAS


def test_settings_reference_says_what_a_bad_value_does() -> None:
    text = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    assert "one ERROR line" in text
    assert "exits with status 1" in text


def _stats_the_code_sets() -> set[str]:
    """Every `politeness/...` stat name written in the package, dynamic ones spelt out."""
    from scrapy_politeness.policy.failures import FailureKind

    names: set[str] = set()
    for path in (ROOT / "scrapy_politeness").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r'"politeness/([a-z_/]+[a-z_])"', text))
        names |= set(re.findall(r'\bSTATS \+ "([a-z_/]+[a-z_])"', text))
        names |= {"frontier/" + n for n in re.findall(r'\b_STATS \+ "([a-z_/]+)"', text)}
    names |= {f"backoff/{cause}" for cause in ("429", "5xx", "transport", "latency")}
    names |= {k.value for k in FailureKind if "/" in k.value}  # dns/*, local/*
    return names


def test_every_stat_the_code_sets_is_in_the_stats_reference() -> None:
    text = (ROOT / "docs" / "reference" / "stats.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`([a-z0-9_/]+)`", text))
    names = _stats_the_code_sets()
    assert len(names) > 30, names
    missing = sorted(names - documented)
    assert not missing, f"set by the code, not in docs/reference/stats.md: {missing}"
