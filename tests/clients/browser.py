"""Runs the web demo (examples/web/) in headless Chromium and returns what
the page reports.

`classify_in_browser` serves the demo folder and the given files from one
HTTP server on 127.0.0.1 (an ephemeral port), opens the demo page in
Debian's `chromium` with the model, the image and a report address in the
query, and waits for the page to POST its outcome (JSON) back to the same
server. Chromium runs in its own process group with a throwaway profile and
is always killed, whatever happens. `screenshot_in_browser` does the same
and then photographs the page through Chromium's DevTools protocol.
"""

import base64
import contextlib
import http.server
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "web"
BUNDLE = DEMO / "node_modules" / "@mediapipe" / "tasks-vision"

#: Seconds to wait for the page's report: loading the WASM runtime and the
#: model takes a few seconds on one slow core.
TIMEOUT_S = 120

#: The URL prefix under which the extra files are served.
FILES = "/files/"


def _missing(what, installable, fix):
    """Fails where the test command could have installed what is missing,
    skips (saying why) where it could not."""
    if installable:
        pytest.fail(f"{what} is missing: {fix} (`make test` does this)")
    pytest.skip(f"{what} is missing and cannot be installed here: {fix}")


def require_package():
    """Fails or skips unless the pinned npm package is installed."""
    if not (BUNDLE / "vision_bundle.mjs").is_file():
        _missing(
            "@mediapipe/tasks-vision (npm)",
            shutil.which("npm") is not None,
            "npm ci --prefix examples/web",
        )


def require_client():
    """Returns Chromium's path, or fails or skips naming what is missing:
    the test command (`make test`) installs the npm package wherever npm
    is, and Chromium wherever apt-get runs as root."""
    require_package()
    chromium = shutil.which("chromium")
    if chromium is None:
        _missing(
            "Debian's chromium",
            os.geteuid() == 0 and shutil.which("apt-get") is not None,
            "apt-get install chromium (as root)",
        )
    return chromium


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files = {name: pathlib.Path(p) for name, p in files.items()}
        self.reports = []
        self.reported = threading.Event()


class _Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=str(DEMO), **kwargs)

    def translate_path(self, path):
        name = urllib.parse.urlsplit(path).path
        if name.startswith(FILES):
            name = urllib.parse.unquote(name[len(FILES) :])
            if name in self.server.files:
                return str(self.server.files[name])
            return str(DEMO / "no such file")
        return super().translate_path(path)

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.end_headers()
        self.server.reports.append(json.loads(body))
        self.server.reported.set()

    def log_message(self, *args):
        pass


def _chromium_command(chromium, profile, url, *flags):
    return [
        chromium,
        "--headless=new",
        "--no-sandbox",  # Chromium refuses to run as root with its sandbox.
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        *flags,
        url,
    ]


@contextlib.contextmanager
def _demo_page(model, image, **query):
    """Serves the demo with `model` and `image` and yields the server and
    the page's URL, whose query names them (and holds `query`)."""
    server = _Server({"model.tflite": model, "image.png": image})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    files = {"model": FILES + "model.tflite", "image": FILES + "image.png"}
    query = {key: str(value).format(base=base) for key, value in query.items()}
    try:
        yield server, f"{base}/?{urllib.parse.urlencode({**files, **query})}"
    finally:
        server.shutdown()
        server.server_close()


def classify_in_browser(model, image, k=5, timeout=TIMEOUT_S):
    """Opens the demo page in headless Chromium on `model` (a `.tflite`
    path) and `image` (an image path) and returns the page's report: a dict
    with `categories` (the top `k`: `index`, `score`, `categoryName`,
    `displayName`) or `error` (the message the page caught)."""
    chromium = require_client()
    page = _demo_page(model, image, k=k, report="{base}/report")
    with page as (server, url), tempfile.TemporaryDirectory() as profile:
        command = _chromium_command(chromium, profile, url)
        _run_chromium(command, server.reported, timeout)
    return server.reports[0]


def screenshot_in_browser(model, image, path, timeout=TIMEOUT_S):
    """Writes a PNG of the demo page (in an 800 x 600 window) on `model`
    and `image` to `path` once the page has reported its outcome: Chromium
    runs with its DevTools protocol on a pipe (file descriptors 3 and 4,
    JSON messages ending in NUL), and `Page.captureScreenshot` takes the
    picture."""
    chromium = require_client()
    page = _demo_page(model, image, report="{base}/report")
    theirs_in, to_chromium = os.pipe()
    from_chromium, theirs_out = os.pipe()
    try:
        with page as (server, url), tempfile.TemporaryDirectory() as profile:
            command = [
                "bash",  # Dash takes only one-digit descriptors.
                "-c",
                f'exec "$@" 3<&{theirs_in} 4>&{theirs_out}',
                "bash",
                *_chromium_command(
                    chromium,
                    profile,
                    url,
                    "--remote-debugging-pipe",
                    "--window-size=800,600",
                ),
            ]
            devtools = _DevTools(to_chromium, from_chromium)
            _run_chromium(
                command,
                server.reported,
                timeout,
                pass_fds=(theirs_in, theirs_out),
                then=lambda: devtools.screenshot(path),
            )
    finally:
        for fd in (to_chromium, theirs_in, theirs_out, from_chromium):
            os.close(fd)


class _DevTools:
    """Chromium's DevTools protocol over its pipe."""

    def __init__(self, to_chromium, from_chromium):
        self.out, self.into = to_chromium, from_chromium
        self.buffer = b""
        self.calls = 0

    def call(self, method, session=None, **params):
        self.calls += 1
        message = {"id": self.calls, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.buffer:
                chunk = os.read(self.into, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed its pipe: {method}")
                self.buffer += chunk
            text, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(text)
            if answer.get("id") == self.calls:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def screenshot(self, path):
        targets = self.call("Target.getTargets")["targetInfos"]
        [target] = [t for t in targets if t["type"] == "page"]
        session = self.call(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )["sessionId"]
        data = self.call("Page.captureScreenshot", session)["data"]
        pathlib.Path(path).write_bytes(base64.b64decode(data))


def _run_chromium(command, reported, timeout, pass_fds=(), then=None):
    """Runs Chromium until the page reports (`reported` is set), then calls
    `then` (if given) while Chromium still runs; raises, with the end of
    Chromium's output, if Chromium exits first or `timeout` seconds pass."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        try:
            _wait(process, reported, timeout, log)
            if then is not None:
                then()
        finally:
            _kill_group(process)


def _wait(process, reported, timeout, log):
    deadline = time.monotonic() + timeout
    while not reported.wait(min(0.2, timeout)):
        if process.poll() is not None:
            problem = f"chromium exited with {process.returncode} before"
        elif time.monotonic() > deadline:
            problem = f"no report within {timeout} s from"
        else:
            continue
        log.seek(0)
        tail = log.read()[-3000:].decode(errors="replace")
        raise RuntimeError(
            f"{problem} the demo page; chromium's output ends:\n{tail}"
        )


def _kill_group(process, timeout=10):
    """Kills Chromium's whole process group (its renderers and helpers
    too, even where the browser process already exited) and waits until
    the group is gone."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        process.poll()  # Reaps the browser process, the group's leader.
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"chromium's process group {process.pid} outlived SIGKILL"
            )
        time.sleep(0.05)


def _wait_for_report(process, reported, timeout, log):
    deadline = time.monotonic() + timeout
    while not reported.wait(min(0.2, timeout)):
        if process.poll() is not None:
            problem = f"chromium exited with {process.returncode} before"
        elif time.monotonic() > deadline:
            what = "screenshot" if reported is None else "report"
            problem = f"no {what} within {timeout} s from"
        else:
            continue
        log.seek(0)
        tail = log.read()[-3000:].decode(errors="replace")
        raise RuntimeError(
            f"{problem} the demo page; chromium's output ends:\n{tail}"
        )
