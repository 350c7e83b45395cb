"""A local npm registry over HTTPS, for the offline tests of fetch_corpus.py.

It serves one package (its packument and its tarball) with a server certificate
for 127.0.0.1 signed by a certificate authority made for the test with the openssl
command, which no CA store trusts unless the test puts it there.
"""
import base64
import hashlib
import http.server
import json
import os
import ssl
import subprocess
import threading
import urllib.parse


def make_authority(directory, name):
    """Writes NAME-ca.crt and a server certificate + key for 127.0.0.1 signed by it;
    returns (ca_certificate, server_certificate, server_key)."""
    ca_key, ca_cert = (os.path.join(directory, name + "-ca" + ext) for ext in (".key", ".crt"))
    key, request, cert = (os.path.join(directory, name + "-server" + ext) for ext in (".key", ".csr", ".crt"))
    extensions = os.path.join(directory, name + "-server.ext")
    with open(extensions, "w") as handle:
        handle.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for command in (
            ["req", "-x509"] + new_key + ["-keyout", ca_key, "-out", ca_cert, "-days", "2",
                                          "-subj", "/CN=machofix test CA " + name,
                                          "-addext", "basicConstraints=critical,CA:TRUE",
                                          "-addext", "keyUsage=critical,keyCertSign"],
            ["req"] + new_key + ["-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", request, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", "2", "-extfile", extensions]):
        subprocess.run(["openssl"] + command, check=True, capture_output=True)
    return ca_cert, cert, key


class Registry:
    """Serves NAME@VERSION (TARBALL's bytes) at https://127.0.0.1:PORT/ until stopped."""

    def __init__(self, name, version, tarball, cert, key):
        with open(tarball, "rb") as handle:
            self.tarball = handle.read()
        self.name, self.version = name, version
        self.integrity = "sha512-" + base64.b64encode(hashlib.sha512(self.tarball).digest()).decode()
        self.requests = []
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                registry.requests.append(self.path)
                body, kind = registry.answer(urllib.parse.unquote(self.path))
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", kind)
                self.end_headers()
                self.wfile.write(body if body is not None else b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = "https://127.0.0.1:%d/" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, path):
        if path == "/" + self.name:
            version = {"name": self.name, "version": self.version,
                       "dist": {"tarball": self.url + "package.tgz", "integrity": self.integrity}}
            packument = {"name": self.name, "dist-tags": {"latest": self.version},
                         "versions": {self.version: version}}
            return json.dumps(packument).encode(), "application/json"
        if path == "/package.tgz":
            return self.tarball, "application/octet-stream"
        return None, "application/json"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
