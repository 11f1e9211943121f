"""Issue #39 finding 10: a connection `dashboard serve` cuts at the header deadline is logged as one
line saying so, never as a traceback, and never as a request answered 200."""

from __future__ import annotations

import socket
import threading
import urllib.request

from benchcert.tasks.render.dashboard import make_server


def _trickle(address, head: bytes) -> None:
    """Send ``head`` and then a header byte at a time until the server hangs up (a hang guard stops it)."""
    s = socket.create_connection(address, timeout=10)
    try:
        s.sendall(head)
        for _ in range(300):
            try:
                s.send(b"a")
            except OSError:
                return
            s.settimeout(0.1)
            try:
                if s.recv(1024) == b"":
                    return
            except socket.timeout:
                pass
            except OSError:
                return
    finally:
        s.close()


def test_a_connection_cut_at_the_header_deadline_is_one_quiet_log_line(tmp_path, capfd):
    (tmp_path / "index.html").write_text("<html>ok</html>")
    server = make_server(tmp_path, "127.0.0.1", 0, quiet=False, idle_timeout=5.0, header_deadline=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        heads = [b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ",  # cut in the headers
                 b"GET /index.html HTTP/1.1\r\nHost: x\r\n",  # cut between headers
                 b"GET /ind"]  # cut in the request line
        clients = [threading.Thread(target=_trickle, args=(server.server_address, h)) for h in heads]
        for c in clients:
            c.start()
        for c in clients:
            c.join(60)  # hang guard
        # The server still answers, and logs that request as answered.
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/index.html", timeout=10) as r:
            assert r.status == 200
    finally:
        server.shutdown()
        server.server_close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err, err
    lines = [x for x in err.splitlines() if x.strip()]
    cut = [x for x in lines if "cut" in x]
    assert len(cut) == 3, err
    assert not any('" 200 ' in x for x in cut), err
    assert sum('" 200 ' in x for x in lines) == 1, err  # the one answered request
    assert len(lines) == 4, err
