"""The served app's surface to a visitor's raw HTTP: it takes no file, so gradio's upload routes refuse every one
(`specui.ui.no_uploads`: it kept a visitor's files of any size and number on the server's disk and served them back: a
disk filled, a file hosted on the Space's address), and its file route serves nothing of the server's own files (the
repo, ~/.cache, /etc/passwd), however the path is written."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
import uuid

from tests.helpers import served_app, ui_config


def _status(request) -> int:
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _upload(url: str, *files: bytes, route: str = "/gradio_api/upload", field: str = "files") -> int:
    boundary = uuid.uuid4().hex
    body = b"".join((f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="f{i}.bin"\r\n'
                     "Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
                    for i, data in enumerate(files)) + f"--{boundary}--\r\n".encode()
    return _status(urllib.request.Request(f"{url}{route}", data=body,
                                          headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}))


def test_a_visitor_can_neither_store_a_file_nor_read_the_servers():
    secret = [os.path.abspath(p) for p in ("models.yaml", "app.py", "specui/ui/exports.py")]
    secret += ["/etc/passwd", os.path.expanduser("~/.cache/huggingface/token")]
    with served_app(ui_config()) as url:
        url = url.rstrip("/")
        assert _upload(url, b"A" * (2 * 1024 * 1024)) in (403, 413)  # 413: gradio's, a file over max_file_size
        # no file at all: a cap of each file's size still kept 1,000 small ones a request, and served each back
        assert _upload(url, *(os.urandom(500) for _ in range(1000))) == 403
        assert _upload(url, b"") == 403
        assert _upload(url, b"\x00" * 500, route="/gradio_api/process_recording", field="video") == 403  # ffmpeg
        for path in secret:
            for route in ("/gradio_api/file=", "/gradio_api/file=/tmp/../", "/file=", "/static/../.."):
                assert _status(f"{url}{route}{path}") in (403, 404), (route, path)
        assert _status(f"{url}/gradio_api/file=..%2f..%2fetc%2fpasswd") in (403, 404)
