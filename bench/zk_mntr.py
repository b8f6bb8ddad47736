#!/usr/bin/env python3
"""Samples ZooKeeper's `mntr` (a four-letter word; the test harness's servers allow them on
loopback) every 200 ms on each member of a connect string until it receives SIGTERM, then prints
the peaks: "server_znodes=N server_watches=W" (znodes: the highest count of any member, the tree
being replicated; watches: the highest sum over the members, each member holding its own clients'
watches). For bench/scale.sh.

    python3 bench/zk_mntr.py 127.0.0.1:2181[,127.0.0.1:2182...] > peaks.txt &
"""
import signal
import socket
import sys
import time

stop = False


def on_term(signum, frame):
    global stop
    stop = True


def mntr(host, port):
    try:
        with socket.create_connection((host, int(port)), timeout=1.0) as s:
            s.sendall(b"mntr")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return {}
    out = {}
    for line in data.decode(errors="replace").splitlines():
        key, _, value = line.partition("\t")
        out[key] = value
    return out


def main():
    members = [m.rsplit(":", 1) for m in sys.argv[1].split("/")[0].split(",")]
    signal.signal(signal.SIGTERM, on_term)
    znodes = watches = 0
    for _ in range(100000):  # 200 ms apart: at most about 5.5 hours
        total = 0
        for host, port in members:
            m = mntr(host.strip("[]"), port)
            znodes = max(znodes, int(m.get("zk_znode_count", 0)))
            total += int(m.get("zk_watch_count", 0))
        watches = max(watches, total)
        if stop:
            break
        time.sleep(0.2)
    print(f"server_znodes={znodes} server_watches={watches}")


if __name__ == "__main__":
    main()
