#!/usr/bin/env python3
"""A TCP relay on loopback that passes what the upstream sends at a bounded rate, so
that a test can watch a download in progress (container_e2e_test: a registry's pull).

Usage: slow_relay.py LISTEN_PORT UPSTREAM_PORT BYTES_PER_SECOND
"""
import socket
import sys
import threading
import time


def pump(src, dst, rate):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
            if rate:
                time.sleep(len(data) / rate)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    listen_port, upstream_port, rate = (int(a) for a in sys.argv[1:4])
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(64)
    while True:
        client, _ = server.accept()
        upstream = socket.create_connection(("127.0.0.1", upstream_port))
        threading.Thread(target=pump, args=(client, upstream, 0), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, rate), daemon=True).start()


if __name__ == "__main__":
    main()
