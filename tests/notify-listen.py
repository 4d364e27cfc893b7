#!/usr/bin/env python3
"""A NOTIFY_SOCKET for tests/test-gateway-notify.sh: what systemd
would receive from a Type=notify service.

  notify-listen.py SOCKET OUT FRONT VOLSOCK...

Binds the Unix datagram SOCKET and appends each datagram to OUT as one
line (its newlines as ';').  On each READY=1 it records, right away,
whether every VOLSOCK accepts a connection:

  serving VOLSOCK:yes|no ...

then, on the first READY=1 only, the exports nbdinfo --list shows on
the front (Unix socket FRONT):

  listed N NAME...

(Only the first: a list while the test stops the gateway could keep
the listener from reading the next datagrams in time.)

Runs until killed.
"""

import os
import re
import socket
import subprocess
import sys


def accepts(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return "yes"
    except OSError:
        return "no"
    finally:
        s.close()


def listed(front):
    try:
        r = subprocess.run(["nbdinfo", "--list",
                            "nbd+unix:///?socket=" + front],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "listed timeout"
    names = re.findall(r'^export="([^"]*)":', r.stdout, re.M)
    return "listed %d %s" % (len(names), " ".join(names))


def main():
    path, out, front, vols = sys.argv[1], sys.argv[2], sys.argv[3], \
        sys.argv[4:]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path + ".tmp")
    os.rename(path + ".tmp", path)
    first = True
    with open(out, "a", buffering=1) as f:
        while True:
            data = s.recv(65536).decode()
            fields = data.split("\n")
            if "READY=1" in fields:
                serving = " ".join("%s:%s" % (v, accepts(v)) for v in vols)
            f.write(";".join(fields) + "\n")
            if "READY=1" in fields:
                f.write("serving %s\n" % serving)
                if first:
                    f.write(listed(front) + "\n")
                    first = False


if __name__ == "__main__":
    main()
