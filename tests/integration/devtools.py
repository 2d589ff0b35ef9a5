"""Headless Chromium driven over the DevTools protocol, for tests that must act as a person does: type
into a login form, click a menu, follow a link in a page, and look at what was drawn.

The Debian chromium the other browser tests run (tests/integration/test_html_chromium.py) is started
with a private profile and a DevTools port of its choosing; the test talks to its page over a
WebSocket. Clicks are mouse events at the element's place on the screen, so what a person could not
click (hidden, covered, off the page) is not clicked. Nothing is left running after close().
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM = "/usr/bin/chromium"


class BrowserError(AssertionError):
    """The page did not do what the test waited for; says what, with where the page was."""


class Chromium:
    def __init__(self, home: Path, *, width: int = 1400, height: int = 1000, timeout: float = 60) -> None:
        self.profile = home / "profile"
        self.profile.mkdir(parents=True, exist_ok=True)
        (home / "home").mkdir(exist_ok=True)
        self.timeout = timeout
        port_file = self.profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)
        command = [CHROMIUM, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
                   f"--user-data-dir={self.profile}", "--remote-debugging-address=127.0.0.1",
                   "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"]
        # Its own process group: the helpers it starts (zygote, crashpad handler) go with it.
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        env={**os.environ, "HOME": str(home / "home")}, start_new_session=True)
        self._ids = itertools.count(1)
        self._open = contextlib.ExitStack()
        try:
            self.socket = self._open.enter_context(self._connect(port_file))
            self.send("Page.enable")
        except BaseException:
            self._stop()
            raise

    def _connect(self, port_file: Path) -> ClientConnection:
        deadline = time.monotonic() + self.timeout
        while not (port_file.is_file() and "\n" in port_file.read_text()):  # port, then the browser's path
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise BrowserError(f"chromium did not open its DevTools port (exit {self.process.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.load(answer)
        page = next(t for t in targets if t["type"] == "page")
        return connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command and its result; the events in between are not needed here."""
        command_id = next(self._ids)
        self.socket.send(json.dumps({"id": command_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=self.timeout))
            if message.get("id") == command_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, what: str) -> Any:
        """The expression's value once it is truthy; fails saying `what` was awaited, and where the page is."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if value := self.js(expression):
                return value
            time.sleep(0.25)
        raise BrowserError(f"{what}: not after {self.timeout:.0f} s, at {self.js('location.href')}")

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def type_into(self, selector: str, text: str) -> None:
        """Text typed into a field of the page, as a keyboard would (the page's own handlers see it)."""
        self.wait(f"document.querySelector({json.dumps(selector)}) !== null", f"the field {selector}")
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", text=text)

    def click(self, element: str, what: str) -> None:
        """A left click at the middle of `element` (a JavaScript expression giving an element, or null while
        there is none), where it is on the screen: in the page or inside one of its frames."""
        centre = f"""(() => {{
            const e = {element};
            if (!e) return null;
            e.scrollIntoView({{block: "center"}});
            const r = e.getBoundingClientRect();
            if (!r.width || !r.height) return null;
            let x = r.x + r.width / 2, y = r.y + r.height / 2;
            for (let w = e.ownerDocument.defaultView; w.frameElement; w = w.parent) {{
                const f = w.frameElement.getBoundingClientRect();
                x += f.x; y += f.y;
            }}
            return [x, y];
        }})()"""
        x, y = self.wait(centre, what)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return data

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._open.close()
        self._stop()

    def _stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        # A kill is delivered, not done: the helpers may take a moment to go. Wait for them, by the profile on
        # their command line (a process already dead but not yet reaped shows none).
        deadline = time.monotonic() + 30
        while running(self.profile) and time.monotonic() < deadline:
            time.sleep(0.1)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def running(profile: Path) -> list[int]:
    """Processes still running with this private profile on their command line."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:  # exited meanwhile, or not ours to read
            continue
        if f"--user-data-dir={profile}".encode() in cmdline:
            found.append(int(proc.name))
    return found
