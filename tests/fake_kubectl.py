"""A real executable standing in for `kubectl port-forward` (no kubelet runs here, so no pod port can be
forwarded): it listens on the local port it is asked for, logs its arguments, and can be told to fail. Used by the
connect() tests, offline and against the sandbox's real API server."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

FAKE_KUBECTL = textwrap.dedent("""\
    import json, os, socket, sys
    argv = sys.argv[1:]
    with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\\n")
    if os.environ.get("FAKE_KUBECTL_FAIL"):
        print("error: unable to forward port because pod is not running", file=sys.stderr, flush=True)
        sys.exit(1)
    local = int(argv[-1].split(":")[0])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", local))
    server.listen()
    print(f"fake kubectl: listening on 127.0.0.1:{local}", file=sys.stderr, flush=True)
    while True:
        server.accept()[0].close()
""")


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch) -> Path:
    """A real executable standing in for `kubectl port-forward`; its argv lines land in `<path>.log`."""
    script = tmp_path / "kubectl"
    script.write_text(f"#!{sys.executable}\n{FAKE_KUBECTL}")
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(tmp_path / "kubectl.log"))
    return script


def forwarder_argvs(kubectl: Path) -> list[list[str]]:
    log = kubectl.parent / "kubectl.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


