"""The policy layer is pure: importing it pulls in no Scrapy, Twisted or dnspython."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = ("scrapy", "twisted", "dns", "tldextract")

CHECK = f"""
import sys
import scrapy_politeness.policy as policy
from scrapy_politeness import Config, Signal
assert Config is policy.Config and Signal is policy.Signal
bad = sorted(m for m in sys.modules
             if m.split(".")[0] in {FORBIDDEN!r})
print(",".join(bad))
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)


def test_policy_imports_no_framework() -> None:
    proc = _run(CHECK)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"the policy layer imported: {proc.stdout.strip()}"


def test_package_names_still_resolve_lazily() -> None:
    code = """
import sys
import scrapy_politeness as sp
assert "scrapy" not in sys.modules
names = sorted(sp.__all__)
assert names == ["Addon", "Config", "PolitenessMiddleware", "PolitenessSettings", "Signal"]
from scrapy_politeness import Addon, PolitenessMiddleware, PolitenessSettings
from scrapy_politeness.addon import Addon as A
from scrapy_politeness.middleware import PolitenessMiddleware as M
from scrapy_politeness.settings import PolitenessSettings as S
assert (Addon, PolitenessMiddleware, PolitenessSettings) == (A, M, S)
assert "scrapy" in sys.modules
from scrapy.utils.misc import load_object
assert load_object("scrapy_politeness.Addon") is A
try:
    sp.Nope
except AttributeError as exc:
    assert "Nope" in str(exc)
else:
    raise SystemExit("missing attribute did not raise")
print("ok")
"""
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
