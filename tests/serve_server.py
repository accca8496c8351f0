"""serve_server.py — `slidepipe serve` started for a test or a benchmark: the process on a free
port of 127.0.0.1 (it prints the address it listens on), plain HTTP requests to it through
http.client, raw bytes through a socket (so that no client library normalises a path the test
means to send as is), and its memory use from /proc."""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import time
from pathlib import Path


class Server:
    def __init__(self, binary: Path, paths, *options, env=None, startup_timeout: float = 30.0):
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--port", "0", *map(str, options), *map(str, paths)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env=env,
        )
        line = self.proc.stdout.readline()  # "serving N slides on http://127.0.0.1:PORT/"
        m = re.search(r"http://([0-9.]+):([0-9]+)/", line)
        if m is None:
            self.proc.kill()
            err = self.proc.stderr.read()
            raise RuntimeError(f"slidepipe serve did not start: {line!r} {err!r}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.base = f"http://{self.host}:{self.port}"

    def get(self, path: str, headers=None, method: str = "GET", source: str | None = None):
        """(status, headers dict with lower-case names, body bytes) of one request. `source`
        binds the client to another loopback address (127.0.0.2 ...), a different client."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60,
                                          source_address=(source, 0) if source else None)
        try:
            conn.request(method, path, headers=headers or {})
            r = conn.getresponse()
            body = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, body
        finally:
            conn.close()

    def raw(self, data: bytes, timeout: float = 10.0) -> bytes:
        """Send bytes as they are; return everything the server answers until it closes."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as s:
            s.sendall(data)
            chunks = []
            try:
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    chunks.append(b)
            except socket.timeout:
                pass
            return b"".join(chunks)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> str:
        """Stop it with SIGTERM; returns its stderr. A server that does not stop is killed."""
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


def wait_until(predicate, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
