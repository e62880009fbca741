"""hostile_http.py URL CHECK - sends a Lua HTTP server (spec/servers/
lua_http.lua) what no well-behaved client would, and prints what came back
as one JSON object. Raw sockets: no HTTP library would send these bytes.

Checks:
  big-body      a POST whose Content-Length is over the server's bound
  big-head      a head of 100 KB
  not-json      a body that is not JSON
  batch         a JSON array of two requests
  slowloris     a request sent a byte every 0.2 s: when the server cut it
                off, and whether another client was answered meanwhile
  connections   300 connections held open at once: how many were refused
                with 503, and whether a request on a fresh one is answered
                once they close
  never-reads   a call whose event stream is 64 MB of progress, never read:
                whether the server cut it off and its memory after
  forged        a made-up session id, and one used after DELETE
  deep          a body of 20,000 nested arrays
  duplicate-ids two calls with the same id at once, on two connections
"""
import json
import socket
import sys
import time
from urllib.parse import urlparse

URL = urlparse(sys.argv[1])
HOST, PORT, PATH = URL.hostname, URL.port, URL.path
ACCEPT = "application/json, text/event-stream"


def connect():
    return socket.create_connection((HOST, PORT), timeout=10)


def request(body, headers=None, method="POST"):
    lines = [f"{method} {PATH} HTTP/1.1", f"Host: {HOST}:{PORT}", f"Accept: {ACCEPT}",
             "Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def read_response(sock, limit=1 << 20):
    """The status, headers and body of one response (Content-Length, or the
    whole of a chunked one), or what arrived before the server closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return {"closed": True, "raw": data.decode(errors="replace")}
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.decode().partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        need = int(headers["content-length"])
        while len(rest) < need:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        body = rest[:need]
    else:
        while not rest.endswith(b"0\r\n\r\n") and len(rest) < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        body = rest
    return {"status": status, "headers": headers, "body": body.decode(errors="replace")}


def exchange(body, headers=None, method="POST"):
    with connect() as sock:
        sock.sendall(request(body, headers, method))
        return read_response(sock)


def initialize():
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "0"}}})
    reply = exchange(body.encode())
    session = reply["headers"]["mcp-session-id"]
    exchange(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', {"Mcp-Session-Id": session})
    return session


def call(session, name, arguments, id=2):
    body = json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()
    return exchange(body, {"Mcp-Session-Id": session})


def answered(session):
    """Whether a plain call is answered now."""
    try:
        return '"text":"3"' in call(session, "add", {"a": 1, "b": 2})["body"]
    except OSError:
        return False


def big_body():
    with connect() as sock:
        sock.sendall(request(b"", {"X-Padding": "x"}).replace(b"Content-Length: 0", b"Content-Length: 99999999"))
        return read_response(sock)


def big_head():
    with connect() as sock:
        try:
            sock.sendall(request(b"{}", {"X-Big": "y" * 100000}))
        except OSError:
            pass
        return read_response(sock)


def slowloris():
    session = initialize()
    sock = connect()
    started = time.time()
    served_meanwhile = False
    whole = request(b'{"jsonrpc":"2.0","id":9,"method":"ping"}', {"Mcp-Session-Id": session})
    for byte in whole:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            break
        time.sleep(0.2)
        if not served_meanwhile:
            served_meanwhile = answered(session)
        if time.time() - started > 20:
            break
    sock.settimeout(5)
    try:
        closed = sock.recv(65536) == b""
    except OSError:
        closed = True
    return {"cut_after": round(time.time() - started, 1), "closed": closed, "served_meanwhile": served_meanwhile}


def connections():
    session = initialize()
    held, refused = [], 0
    for _ in range(300):
        sock = connect()
        held.append(sock)
    time.sleep(0.5)
    for sock in held:
        sock.settimeout(0.05)
        try:
            if b" 503 " in sock.recv(4096):
                refused += 1
        except OSError:
            pass
    for sock in held:
        sock.close()
    time.sleep(0.5)
    return {"refused": refused, "answered_after": answered(session)}


def never_reads():
    session = initialize()
    sock = connect()
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "flood", "arguments": {"bytes": 64 << 20}, "_meta": {"progressToken": "t"}}}).encode()
    sock.sendall(request(body, {"Mcp-Session-Id": session}))
    time.sleep(3)
    rss = json.loads(call(session, "rss", {}, 6)["body"])["result"]["content"][0]["text"]
    sock.settimeout(2)
    got = 0
    try:
        while got < 80 << 20:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
    except OSError:
        pass
    return {"rss_kib": int(rss), "read_before_close_mb": got >> 20, "answered_after": answered(session)}


def forged():
    fake = exchange(b'{"jsonrpc":"2.0","id":3,"method":"ping"}', {"Mcp-Session-Id": "made-up"})
    session = initialize()
    deleted = exchange(b"", {"Mcp-Session-Id": session}, "DELETE")
    after = exchange(b'{"jsonrpc":"2.0","id":4,"method":"ping"}', {"Mcp-Session-Id": session})
    return {"fake": fake["status"], "delete": deleted["status"], "after_delete": after["status"]}


def deep():
    session = initialize()
    body = b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"add","arguments":' + b"[" * 20000 + b"]" * 20000 + b"}}"
    reply = exchange(body, {"Mcp-Session-Id": session})
    return {"status": reply["status"], "body": reply["body"], "answered_after": answered(session)}


def duplicate_ids():
    session = initialize()
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}).encode()
    first, second = connect(), connect()
    first.sendall(request(body, {"Mcp-Session-Id": session}))
    second.sendall(request(body, {"Mcp-Session-Id": session}))
    replies = [read_response(first), read_response(second)]
    first.close()
    second.close()
    return {"statuses": [r["status"] for r in replies], "bodies": [r["body"] for r in replies]}


CHECKS = {
    "big-body": big_body,
    "big-head": big_head,
    "not-json": lambda: exchange(b"{not json", {"Mcp-Session-Id": initialize()}),
    "batch": lambda: exchange(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]',
                              {"Mcp-Session-Id": initialize()}),
    "slowloris": slowloris,
    "connections": connections,
    "never-reads": never_reads,
    "forged": forged,
    "deep": deep,
    "duplicate-ids": duplicate_ids,
}

print(json.dumps(CHECKS[sys.argv[2]]()))
