"""The proxies page's demo-farm recipe, run exactly as written (its code blocks).

A fresh ``scrapy startproject myproject`` with the add-on line; then each
command block of "Try it on the demo farm" in docs/usage/proxies.md, in
order, through ``sh -c``, with the worktree's Python first on PATH. The crawl
must go through the proxy and end as the demo does without one.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_farm_command import _read_until_ready

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "usage" / "proxies.md"


def recipe_blocks() -> list[tuple[str, str]]:
    """(language, text) of each code block of the recipe section, in order."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Try it on the demo farm", 1)[1].split("\n## ", 1)[0]
    return [(lang, body.strip()) for lang, body in
            re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)]


def test_the_recipe_has_the_four_steps() -> None:
    langs = [lang for lang, _ in recipe_blocks()]
    assert langs == ["sh", "text", "sh", "sh"]


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> None:
    """Stop the command's whole process group: ``sh -c`` may have forked it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    if proc.poll() is None:
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_the_demo_farm_recipe_crawls_through_tinyproxy(tmp_path: Path) -> None:
    if shutil.which("tinyproxy") is None:
        pytest.skip("tinyproxy is not installed (Debian package tinyproxy)")
    farm_cmd, conf, proxy_cmd, crawl_cmd = (body for _, body in recipe_blocks())
    port = int(re.search(r"^Port (\d+)$", conf, flags=re.M).group(1))  # type: ignore[union-attr]
    if _listening("127.0.0.1", port):
        pytest.skip(f"127.0.0.1:{port} is taken on this machine")
    env = {**os.environ, "HOME": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("SCRAPY_SETTINGS_MODULE", "http_proxy", "https_proxy", "no_proxy"):
        env.pop(name, None)
    subprocess.run([sys.executable, "-m", "scrapy", "startproject", "myproject"], cwd=tmp_path,
                   env=env, check=True, capture_output=True, timeout=60)
    project = tmp_path / "myproject"
    with (project / "myproject" / "settings.py").open("a", encoding="utf-8") as fh:
        fh.write('\nADDONS = {"scrapy_politeness.Addon": 300}\n')
    (project / "tinyproxy.conf").write_text(conf + "\n", encoding="utf-8")
    proxy_log = (project / "proxy.log").open("w")
    farm = subprocess.Popen(["sh", "-c", f"exec {farm_cmd}"], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    proxy: subprocess.Popen[str] | None = None
    try:
        _read_until_ready(farm)
        assert "alpha.farm.test" in (project / "farm-hosts").read_text(encoding="utf-8")
        proxy = subprocess.Popen(["sh", "-c", proxy_cmd], cwd=project, env=env,
                                 stdout=proxy_log, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
        deadline = time.monotonic() + 10
        while not _listening("127.0.0.1", port):
            if proxy.poll() is not None:
                log = (project / "proxy.log").read_text(errors="replace")
                if "unshare" in log or "mount" in log:
                    pytest.skip(f"no unprivileged mount namespace here: {log.strip()}")
                raise AssertionError(f"the proxy exited ({proxy.returncode}): {log}")
            assert time.monotonic() < deadline, "the proxy did not listen within 10 s"
            time.sleep(0.05)
        crawl = subprocess.run(["sh", "-c", crawl_cmd], cwd=project, env=env,
                               capture_output=True, text=True, timeout=180, check=False)
        variant = re.search(r"`(-s POLITENESS_PROXY_LOCAL_DNS=False)`",
                            PAGE.read_text(encoding="utf-8"))
        assert variant is not None
        no_lookup = subprocess.run(["sh", "-c", f"{crawl_cmd} {variant.group(1)}"], cwd=project,
                                   env=env, capture_output=True, text=True, timeout=180,
                                   check=False)
    finally:
        if proxy is not None:
            _stop(proxy)
        _stop(farm, signal.SIGINT)
        proxy_log.close()
    log = crawl.stdout + crawl.stderr
    assert crawl.returncode == 0, log[-4000:]
    assert "Politeness report (hosts that held the crawl longest):" in log
    assert "Host broken.farm.test suspended" in log
    assert "'politeness/proxy/errors'" not in log, log[-4000:]
    assert "'downloader/response_status_count/200'" in log
    log = no_lookup.stdout + no_lookup.stderr  # the page's variant: no local lookup
    assert no_lookup.returncode == 0, log[-4000:]
    assert "'politeness/dns/lookups': 0," in log, log[-4000:]
    assert "Host broken.farm.test suspended" in log
    seen = (project / "proxy.log").read_text(errors="replace")
    assert "alpha.farm.test" in seen, seen[-2000:]  # the pages went through the proxy
