"""A 2024-11-05 HTTP+SSE server that misbehaves on demand, for faults the
SDKs' servers will not produce: `python3 sse_faults.py MODE` serves on
127.0.0.1 (a free port, printed as `listening PORT`), with MODE one of

    ends      the stream ends after the reply to the first tools/call
    foreign   the endpoint event names a URL on another origin
    silent    the stream opens and never names an endpoint
    counted   true to the protocol; GET /count says how many streams opened
    token     as counted, but the stream and every POST need
              `Authorization: Bearer s3cret` (401 with a challenge otherwise)

Its one tool, `echo`, answers {text} with the text. Every POST is
acknowledged with 202 and the body "Accepted", as the Python SDK does.
"""
import json
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
streams = {}
opened = [0]
lock = threading.Lock()


def reply(message):
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "sse-faults", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        text = message["params"].get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def refused(self):
        if MODE != "token" or self.headers.get("Authorization") == "Bearer s3cret":
            return False
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="sse-faults"')
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

    def do_GET(self):
        if self.path != "/count" and self.refused():
            return
        if self.path == "/count":
            body = str(opened[0]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with lock:
            opened[0] += 1
            session = str(opened[0])
            outbox = streams[session] = queue.Queue()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if MODE == "foreign":
            self.event("endpoint", "http://evil.example/messages?session=" + session)
        elif MODE != "silent":
            self.event("endpoint", "/messages?session=" + session)
        # The stream has no length: its end is the connection's. The
        # session ends with it, as the SDKs' servers end theirs (a POST to
        # it is then answered 404).
        self.close_connection = True
        while True:
            item = outbox.get()
            if item is None:
                return
            last = MODE == "ends" and item.get("result", {}).get("content")
            if last:
                # Gone before the reply leaves: a POST after it finds none.
                del streams[session]
            self.event("message", json.dumps(item))
            if last:
                return

    def event(self, name, data):
        self.wfile.write(f"event: {name}\ndata: {data}\n\n".encode())
        self.wfile.flush()

    def do_POST(self):
        if self.refused():
            return
        session = self.path.split("session=")[-1]
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        outbox = streams.get(session)
        if outbox is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        message = json.loads(body)
        self.send_response(202)
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"Accepted")
        if "id" in message and "method" in message:
            outbox.put(reply(message))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
