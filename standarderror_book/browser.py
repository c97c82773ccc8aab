"""Headless Chromium and a local web server, both offline: the one setup behind the PDF printer
(``scripts/pdf.py``) and the browser tests (``tests/test_site.py``, ``tests/test_pdf.py``).

Not part of the library: nothing under ``standarderror.uncertainty``, ``llm`` or ``spectral``
imports it, and Selenium is imported only when a browser is started (it is in the test extra;
``bash scripts/setup_browser.sh`` installs Chromium and chromedriver from Debian).

Offline means: no host name resolves except ``127.0.0.1`` (the local server), and anything that
still tries to leave goes to a proxy on a closed local port.
"""

from __future__ import annotations

import functools
import http.server
import os
import sys
import threading
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")

FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-quic", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--metrics-recording-only",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1",
)


class Unavailable(RuntimeError):
    """The browser cannot start here: Selenium, Chromium or chromedriver is missing."""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; records (status, path) of every request instead of logging it."""

    def log_request(self, code="-", size="-"):
        try:
            status = int(code)
        except (TypeError, ValueError):
            status = 0
        self.server.requests.append((status, self.path))

    def log_message(self, format, *args):  # noqa: A002 (silence stderr)
        pass


class Server(http.server.ThreadingHTTPServer):
    """A threaded server on 127.0.0.1; ``requests`` lists (status, path) in arrival order."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)  # a browser hanging up is not news


def serve(folder: Path | str) -> Server:
    """Serve ``folder`` on a free port of 127.0.0.1 from a daemon thread; the caller shuts it
    down (``shutdown()`` then ``server_close()``)."""
    httpd = Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    httpd.requests = []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def require() -> None:
    """Raise :class:`Unavailable`, saying what to install, when Chromium or chromedriver is
    missing (the PDF printer checks this before it starts; :func:`chromium` on every start)."""
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not Path(exe).is_file():
            raise Unavailable(f"{exe} not found: install the browser with "
                              "`bash scripts/setup_browser.sh`")


def chromium(profile: str, *, window: str = "1280,1000", timeout: float = 60):
    """Headless Chromium through chromedriver, offline, with its profile in ``profile`` and the
    browser's console log kept (``driver.get_log("browser")``). Raises :class:`Unavailable`,
    saying what to install, when Selenium, Chromium or chromedriver is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise Unavailable("selenium is not installed (it is in the test extra: "
                          "pip install -e '.[test]')") from None
    require()
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (*FLAGS, f"--window-size={window}", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(timeout)
    driver.set_script_timeout(timeout)
    return driver
