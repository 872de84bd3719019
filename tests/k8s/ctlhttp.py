# SPDX-License-Identifier: Apache-2.0
"""The JSON request handler of the stand-ins (apiserver.py's API, the control endpoints of
kubelet.py and dra_kubelet.py, webhook_cabundle.py's): it answers JSON and reads a JSON body,
quietly. Each stand-in subclasses it with its paths."""
import http.server
import json


class JSONHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")
