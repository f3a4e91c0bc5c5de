"""Runs the web demo (examples/web/) in headless Chromium and returns what
the page reports.

`classify_in_browser` serves the demo folder and the given files from one
HTTP server on 127.0.0.1 (an ephemeral port), opens the demo page in
Debian's `chromium` with the model, the image and a report address in the
query, and waits for the page to POST its outcome (JSON) back to the same
server. Chromium runs in its own process group with a throwaway profile and
is always killed, whatever happens.
"""

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


def require_client():
    """Returns Chromium's path, or fails or skips naming what is missing:
    the test command (`make test`) installs the npm package wherever npm
    is, and Chromium wherever apt-get runs as root."""
    if not (BUNDLE / "vision_bundle.mjs").is_file():
        _missing(
            "@mediapipe/tasks-vision (npm)",
            shutil.which("npm") is not None,
            "npm ci --prefix examples/web",
        )
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


def _chromium_command(chromium, profile, url):
    return [
        chromium,
        "--headless=new",
        "--no-sandbox",  # Chromium refuses to run as root with its sandbox.
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        url,
    ]


def classify_in_browser(model, image, k=5, timeout=TIMEOUT_S):
    """Opens the demo page in headless Chromium on `model` (a `.tflite`
    path) and `image` (an image path) and returns the page's report: a dict
    with `categories` (the top `k`: `index`, `score`, `categoryName`,
    `displayName`) or `error` (the message the page caught)."""
    chromium = require_client()
    server = _Server({"model.tflite": model, "image.png": image})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    query = urllib.parse.urlencode(
        {
            "model": FILES + "model.tflite",
            "image": FILES + "image.png",
            "k": k,
            "report": base + "/report",
        }
    )
    try:
        with tempfile.TemporaryDirectory() as profile:
            _run_chromium(
                _chromium_command(chromium, profile, f"{base}/?{query}"),
                server.reported,
                timeout,
            )
    finally:
        server.shutdown()
        server.server_close()
    return server.reports[0]


def _run_chromium(command, reported, timeout):
    """Runs Chromium until the page reports; raises, with the end of
    Chromium's output, if Chromium exits first or `timeout` seconds pass."""
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_for_report(process, reported, timeout, log)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_for_report(process, reported, timeout, log):
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
