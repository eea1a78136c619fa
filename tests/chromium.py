"""Open a page in headless Chromium and report what happened, with only the standard library.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: it reads commands from fd
3 and writes replies and events to fd 4, each a JSON message ended by a NUL byte), so no port, websocket or
driver package is needed.  `visit` loads one page and returns its console errors, uncaught exceptions, log
errors, every network request the page made, the answer of a DOM expression, and a PNG screenshot.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import zlib

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def executable() -> str | None:
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


def installed() -> str:
    """The Chromium to test with, installed from Debian's `chromium` package when the machine has none (the
    test set-up's job: the README's test command needs nothing else); a clear error when that cannot be done."""
    found = executable()
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                           env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        found = executable()
    if found is None:
        raise RuntimeError("the report tests need Chromium: install Debian's package (apt-get install -y chromium)")
    return found


class Browser:
    def __init__(self, binary: str, timeout: float = 60.0):
        self.timeout = timeout
        to_child, self.out = os.pipe()  # we write commands, Chromium reads them on fd 3
        self.inp, from_child = os.pipe()  # Chromium writes on fd 4, we read
        self.profile = tempfile.mkdtemp(prefix="kvreplay-chromium-")

        def fds():  # (in the child: the pipe ends on the descriptors Chromium expects; moved out of the way
            # first, since either may itself be 3 or 4)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--disable-default-apps", f"--user-data-dir={self.profile}",
             "--window-size=1200,900", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.inp], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def close(self) -> None:
        try:
            os.write(self.out, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.out)
        os.close(self.inp)
        shutil.rmtree(self.profile, ignore_errors=True)


def visit(binary: str, url: str, expression: str) -> dict:
    """Load `url` and report: console errors, exceptions, network requests, `expression`'s value, a screenshot."""
    browser = Browser(binary)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.events.clear()
        browser.send("Page.navigate", {"url": url}, session=session)
        browser.wait_for("Page.loadEventFired")
        value = browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                             session=session)["result"].get("value")
        metrics = browser.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": {
            "x": 0, "y": 0, "width": 1200, "height": min(metrics["height"], 6000), "scale": 0.5}}, session=session)
        events = browser.events
    finally:
        browser.close()
    console = [e["params"] for e in events if e.get("method") == "Runtime.consoleAPICalled"
               and e["params"].get("type") in ("error", "assert")]
    logs = [e["params"]["entry"] for e in events if e.get("method") == "Log.entryAdded"
            and e["params"]["entry"].get("level") == "error"]
    return {"console_errors": console, "log_errors": logs,
            "exceptions": [e["params"] for e in events if e.get("method") == "Runtime.exceptionThrown"],
            "requests": [e["params"]["request"]["url"] for e in events
                         if e.get("method") == "Network.requestWillBeSent"],
            "value": value, "png": base64.b64decode(shot["data"])}


def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the rows of an 8-bit RGB or RGBA PNG (non-interlaced), filters undone."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks, header = 8, [], None
    while position < len(png):
        length, kind = struct.unpack(">I4s", png[position:position + 8])
        body = png[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and not interlace, f"unexpected PNG format {header}"
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(b for i, b in enumerate(row) if i % channels < 3) for row in rows]


def non_white(png: bytes) -> tuple[int, int]:
    """(pixels not near white, all pixels) of a screenshot."""
    width, height, rows = png_pixels(png)
    dark = sum(1 for row in rows for i in range(0, len(row), 3) if min(row[i:i + 3]) < 200)
    return dark, width * height
