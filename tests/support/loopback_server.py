"""An HTTP server on 127.0.0.1 standing in for a site CI cannot reach (GitHub, Debian's
archive, snapshot.debian.org): GET answers what `answer(path)` returns (bytes), 404
for None; every path asked is kept in `requests`; `base` is its URL."""
import http.server
import threading


class LoopbackServer:
    def __init__(self, answer):
        self.answer, self.requests = answer, []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                body = server.answer(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
