"""loopback.py — servers on 127.0.0.1 for the remote-read tests and benchmarks: nginx serving a
folder, and a TCP proxy in front of it that holds every request for a fixed delay.

Loopback answers in microseconds, while an object store answers in tens of milliseconds (the
round trip plus the store's own first-byte time). The proxy puts that wait back: everything a
client sends is passed on to the server `delay` seconds later, in order; answers come back at
once. One request then costs at least one delay, as it would from a cloud VM to its bucket, and
a reader that sends a region's requests one after another waits once per request. The proxy
also counts how many connections had a request held at the same moment (`most_at_once`), which
tells requests sent together from requests sent one after another.
"""

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, what, proc=None, timeout=20.0):
    """Return once something listens on `port`; RuntimeError when `proc` (the server) exits
    first or nothing listens within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


def start_nginx(root, work):
    """nginx (one worker, access log off) serving `root`; returns (process, port)."""
    port = free_port()
    temps = " ".join(f"{k}_temp_path {work}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; master_process off; worker_processes 1;
error_log {work}/error.log; pid {work}/nginx.pid;
events {{ worker_connections 256; }}
http {{ access_log off; {temps} keepalive_requests 100000;
  server {{ listen 127.0.0.1:{port}; root {root}; }} }}
""")
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(exe):
        raise SystemExit("needs nginx (apt-get install nginx-light)")
    proc = subprocess.Popen([exe, "-c", conf, "-e", f"{work}/error.log"], stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, "nginx", proc)
    except RuntimeError:
        proc.terminate()
        raise
    return proc, port


class LatencyProxy:
    """Listens on a free port and forwards to 127.0.0.1:`upstream`, delaying each client
    send by `delay` seconds. Runs its own event loop on a daemon thread; close() stops it.
    `targets` lists the path of every GET it forwarded, in order."""

    def __init__(self, upstream, delay):
        self.upstream, self.delay = upstream, delay
        self.holding = 0  # connections with a request held now
        self.most_at_once = 0
        self.targets = []
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        started.wait()

    def _run(self, started):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", self.port))
        started.set()
        self.loop.run_forever()

    async def _client(self, client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            client_w.close()
            return
        try:
            await asyncio.gather(self._delayed(client_r, up_w), self._plain(up_r, client_w),
                                 return_exceptions=True)
        except asyncio.CancelledError:
            pass  # close() ends every connection
        for w in (client_w, up_w):
            w.close()

    async def _delayed(self, reader, writer):
        queue = asyncio.Queue()

        pending = 0  # sends of this connection being held

        async def send():
            nonlocal pending
            while True:
                due, data = await queue.get()
                if data is None:
                    writer.close()
                    return
                await asyncio.sleep(max(0.0, due - self.loop.time()))
                pending -= 1
                self.holding -= pending == 0
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        while data := await reader.read(65536):
            if data.startswith(b"GET "):
                self.targets.append(data.split(b" ", 2)[1].decode("latin-1"))
            pending += 1
            self.holding += pending == 1
            self.most_at_once = max(self.most_at_once, self.holding)
            queue.put_nowait((self.loop.time() + self.delay, data))
        queue.put_nowait((0.0, None))
        await sender

    async def _plain(self, reader, writer):
        while data := await reader.read(1 << 20):
            writer.write(data)
            await writer.drain()
        writer.close()

    def close(self):
        async def stop():
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
