"""loopback.py — servers on 127.0.0.1 for the remote-read tests and benchmarks: nginx serving a
folder, a TCP proxy in front of it that holds every request for a fixed delay, moto's S3 server
with signature checks on (moto_s3), and a small Azure Blob Storage server (AzureBlobServer)
that checks Shared Key signatures and SAS tokens.

Loopback answers in microseconds, while an object store answers in tens of milliseconds (the
round trip plus the store's own first-byte time). The proxy puts that wait back: everything a
client sends is passed on to the server `delay` seconds later, in order; answers come back at
once. One request then costs at least one delay, as it would from a cloud VM to its bucket, and
a reader that sends a region's requests one after another waits once per request. The proxy
also counts how many connections had a request held at the same moment (`most_at_once`), which
tells requests sent together from requests sent one after another.
"""

import asyncio
import base64
import contextlib
import email.utils
import hashlib
import hmac
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse


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


@contextlib.contextmanager
def moto_s3(region):
    """moto's S3 server on loopback checking SigV4: the first three actions (make a user, its
    policy and its key) run unauthenticated, every later request must be signed. Yields
    (endpoint, access key id, secret, a boto3 S3 client signing with that key); the caller
    skips when boto3 is missing. RuntimeError when moto_server is not beside this Python."""
    import boto3

    moto_server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    if not os.path.exists(moto_server):
        raise RuntimeError(f"no moto_server beside {sys.executable} (tests/requirements.txt "
                           "pins moto[server])")
    port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
    proc = subprocess.Popen([moto_server, "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, "moto_server", proc)
        endpoint = f"http://127.0.0.1:{port}"
        iam = boto3.client("iam", endpoint_url=endpoint, region_name=region,
                           aws_access_key_id="none", aws_secret_access_key="none")
        iam.create_user(UserName="reader")
        policy = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        client = boto3.client("s3", endpoint_url=endpoint, region_name=region,
                              aws_access_key_id=key["AccessKeyId"],
                              aws_secret_access_key=key["SecretAccessKey"])
        yield endpoint, key["AccessKeyId"], key["SecretAccessKey"], client
    finally:
        proc.terminate()
        proc.wait(timeout=10)


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


# ---- Azure Blob Storage ---------------------------------------------------------------------

AZURE_STANDARD_HEADERS = ("Content-Encoding", "Content-Language", "Content-Length", "Content-MD5",
                          "Content-Type", "Date", "If-Modified-Since", "If-Match", "If-None-Match",
                          "If-Unmodified-Since", "Range")


def azure_string_to_sign(method, account, raw_path, query, headers):
    """The Shared Key string to sign (Blob service 2015-02-21 and later) of a request as it
    arrived, written here from Microsoft's "Authorize with Shared Key" page, independently of
    slidepipe's C signer. `headers`: (name, value) pairs as received; `raw_path` percent-encoded
    as sent; `query` the raw query string."""
    values = {}
    for name, value in headers:
        values.setdefault(name.lower(), value.strip())
    lines = [method] + [values.get(h.lower(), "") for h in AZURE_STANDARD_HEADERS]
    if lines[3] == "0":  # Content-Length: empty for 0
        lines[3] = ""
    ms = sorted((n.lower(), " ".join(v.split())) for n, v in headers if n.lower().startswith("x-ms-"))
    resource = f"/{account}{raw_path}"
    params = {}
    for pair in filter(None, query.split("&")):
        name, _, value = pair.partition("=")
        params.setdefault(urllib.parse.unquote(name).lower(), []).append(urllib.parse.unquote(value))
    for name in sorted(params):
        resource += f"\n{name}:{','.join(sorted(params[name]))}"
    return "\n".join(lines) + "\n" + "".join(f"{n}:{v}\n" for n, v in ms) + resource


def azure_service_sas(account, key, container, permissions="r", version="2020-12-06",
                      expiry="2099-01-01T00:00:00Z"):
    """A container SAS (sr=c) query string signed with `key`, its string to sign laid out as the
    "Create a service SAS" page gives it for version 2020-12-06 and later. slidepipe never signs
    a SAS, it only sends the token: what the server's check shows is that the token reaches it
    whole. Checked once by hand (azure-storage-blob is not a test dependency): the SAS that
    azure-storage-blob 12.31.1's generate_container_sas makes (sv=2026-10-06), and that SDK's
    Shared Key requests, are accepted by AzureBlobServer, and a wrong key is refused."""
    fields = {"sp": permissions, "st": "", "se": expiry, "si": "", "sip": "", "spr": "https,http",
              "sv": version, "sr": "c", "snapshot": "", "ses": "", "rscc": "", "rscd": "",
              "rsce": "", "rscl": "", "rsct": ""}
    return azure_sas_query(fields, account, key, container)


def _sas_string_to_sign(f, account, container):
    resource = f"/blob/{account}/{container}"
    return "\n".join([f["sp"], f["st"], f["se"], resource, f["si"], f["sip"], f["spr"], f["sv"],
                      f["sr"], f["snapshot"], f["ses"], f["rscc"], f["rscd"], f["rsce"], f["rscl"],
                      f["rsct"]])


def _sas_signature(fields, account, key, container):
    return base64.b64encode(hmac.new(key, _sas_string_to_sign(fields, account, container).encode(),
                                     hashlib.sha256).digest()).decode()


def azure_sas_query(fields, account, key, container):
    kept = {k: v for k, v in fields.items() if v}
    kept["sig"] = _sas_signature(fields, account, key, container)
    return urllib.parse.urlencode(kept)


class AzureBlobServer:
    """Azure Blob Storage's Get Blob, Put Blob and Delete Blob on 127.0.0.1, path-style as Azurite
    serves it: /ACCOUNT/CONTAINER/BLOB is the file ROOT/CONTAINER/BLOB. Get honours Range (206
    with Content-Range; a request without one gets 200 and the whole blob), sends an ETag and
    honours If-Match (412 ConditionNotMet). Put wants x-ms-blob-type BlockBlob and checks the body
    against Content-MD5 when sent (400 Md5Mismatch); it writes the file whole (a temporary name
    renamed into place). Anonymous requests only read. Authorises each request as Azure does: a Shared Key
    Authorization header whose signature it recomputes (azure_string_to_sign) with `key`, with
    x-ms-version and an x-ms-date within 15 minutes required; or a SAS in the query whose sig it
    recomputes; or no credentials, for the containers in `public`. Failures answer with Azure's
    XML error document and x-ms-error-code (AuthenticationFailed 403, BlobNotFound 404, ...).
    `verified` counts the requests let through by each kind ("SharedKey", "SAS", "anonymous");
    `requests` lists (method, path, headers) of every request. close() stops it."""

    def __init__(self, root, account, key, public=()):
        self.root, self.account, self.key, self.public = str(root), account, key, set(public)
        self.verified = {"SharedKey": 0, "SAS": 0, "anonymous": 0}
        self.requests = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 (http.server's name)
                server._get(self)

            def do_PUT(self):  # noqa: N802
                server._put(self)

            def do_DELETE(self):  # noqa: N802
                server._delete(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}/{account}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def _send(h, status, body=b"", headers=()):
        h.send_response(status)
        for name, value in headers:
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _error(self, h, status, code, message):
        body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error>").encode()
        self._send(h, status, body, [("x-ms-error-code", code), ("Content-Type", "application/xml")])

    def _authorise(self, h, raw_path, query, container, permission="r"):
        """The kind of credentials that let this request through, or None (answered)."""
        auth = h.headers.get("Authorization")
        params = urllib.parse.parse_qs(query, keep_blank_values=True)
        if auth is not None:
            scheme, _, rest = auth.partition(" ")
            account, _, sig = rest.partition(":")
            if scheme != "SharedKey" or account != self.account:
                return self._error(h, 403, "AuthenticationFailed", "not SharedKey for this account")
            if not h.headers.get("x-ms-version"):
                return self._error(h, 400, "MissingRequiredHeader", "x-ms-version")
            try:
                sent = email.utils.parsedate_to_datetime(h.headers.get("x-ms-date", "")).timestamp()
            except (TypeError, ValueError):
                return self._error(h, 403, "AuthenticationFailed", "no valid x-ms-date")
            if abs(sent - time.time()) > 900:
                return self._error(h, 403, "AuthenticationFailed", "x-ms-date too far off")
            expected = base64.b64encode(hmac.new(
                self.key, azure_string_to_sign(h.command, self.account, raw_path, query,
                                               h.headers.items()).encode(),
                hashlib.sha256).digest()).decode()
            if not hmac.compare_digest(expected, sig):
                return self._error(h, 403, "AuthenticationFailed", "signature mismatch")
            return "SharedKey"
        if "sig" in params:
            fields = {k: v[0] for k, v in params.items()}
            for name in ("sp", "st", "se", "si", "sip", "spr", "sv", "sr", "snapshot", "ses",
                         "rscc", "rscd", "rsce", "rscl", "rsct"):
                fields.setdefault(name, "")
            expected_sig = _sas_signature(fields, self.account, self.key, container)
            if fields["sr"] != "c" or not hmac.compare_digest(expected_sig, fields["sig"]):
                return self._error(h, 403, "AuthenticationFailed", "SAS signature mismatch")
            if permission not in fields["sp"]:
                return self._error(h, 403, "AuthorizationPermissionMismatch", "SAS permissions")
            if fields["se"] < time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()):
                return self._error(h, 403, "AuthenticationFailed", "SAS expired")
            return "SAS"
        if container in self.public and permission == "r":
            return "anonymous"
        return self._error(h, 404, "ResourceNotFound", "no such resource")

    def _target(self, h, permission):
        """(kind, file path) of an authorised request to an existing container, or None
        (answered). A request's body is read first, so that a refusal leaves the connection
        usable."""
        raw_path, _, query = h.path.partition("?")
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        self.requests.append((h.command, raw_path, dict(h.headers.items())))
        parts = raw_path.split("/", 3)
        if len(parts) < 4 or parts[1] != self.account or not parts[3]:
            return self._error(h, 400, "InvalidUri", "expected /ACCOUNT/CONTAINER/BLOB")
        container, blob = urllib.parse.unquote(parts[2]), urllib.parse.unquote(parts[3])
        kind = self._authorise(h, raw_path, query, container, permission)
        if kind is None:
            return None
        if not os.path.isdir(os.path.join(self.root, container)):
            return self._error(h, 404, "ContainerNotFound", "no such container")
        path = os.path.normpath(os.path.join(self.root, container, blob))
        if not path.startswith(os.path.normpath(self.root) + os.sep):
            return self._error(h, 400, "InvalidUri", "outside the container")
        return kind, path, body

    def _put(self, h):
        target = self._target(h, "w")
        if target is None:
            return
        kind, path, body = target
        if h.headers.get("x-ms-blob-type") != "BlockBlob":
            return self._error(h, 400, "MissingRequiredHeader", "x-ms-blob-type")
        md5 = h.headers.get("Content-MD5")
        if md5 is not None and base64.b64decode(md5) != hashlib.md5(body).digest():
            return self._error(h, 400, "Md5Mismatch", "Content-MD5")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.upload-{threading.get_ident()}"
        with open(temporary, "wb") as f:
            f.write(body)
        os.replace(temporary, path)
        self.verified[kind] += 1
        self._send(h, 201, b"", [("ETag", '"0x8D' + hashlib.sha256(body).hexdigest()[:12].upper()
                                  + '"')])

    def _delete(self, h):
        target = self._target(h, "d")
        if target is None:
            return
        kind, path, _ = target
        if not os.path.isfile(path):
            return self._error(h, 404, "BlobNotFound", "no such blob")
        os.remove(path)
        self.verified[kind] += 1
        self._send(h, 202)

    def _get(self, h):
        target = self._target(h, "r")
        if target is None:
            return
        kind, path, _ = target
        if not os.path.isfile(path):
            return self._error(h, 404, "BlobNotFound", "no such blob")
        with open(path, "rb") as f:
            data = f.read()
        etag = '"0x8D' + hashlib.sha256(data).hexdigest()[:12].upper() + '"'
        if h.headers.get("If-Match") not in (None, "*", etag):
            return self._error(h, 412, "ConditionNotMet", "If-Match")
        self.verified[kind] += 1
        rng = h.headers.get("Range") or h.headers.get("x-ms-range")
        if rng is None:
            return self._send(h, 200, data, [("ETag", etag)])
        first, _, last = rng.removeprefix("bytes=").partition("-")
        first = int(first)
        last = min(int(last) if last else len(data) - 1, len(data) - 1)
        if first >= len(data):
            return self._error(h, 416, "InvalidRange", "range")
        self._send(h, 206, data[first:last + 1],
                   [("ETag", etag), ("Content-Range", f"bytes {first}-{last}/{len(data)}")])
