"""Plain TCP flows from one emulated node, without MPI: the ``tcp`` part of ``experiments.emulation_validation``.

Run inside a node's namespace (by the emulator's launcher agent) with one JSON argument::

    {"me": address, "start": epoch seconds, "n_in": incoming flows, "sends": [[address, bytes], ...]}

It accepts ``n_in`` connections and reads each to its end, opens one connection per send before ``start``,
writes every send at ``start`` (all at once, one thread each) and prints ``{"end_s": ...}``: the seconds from
``start`` until every send is written and every incoming flow is read, the analogue of a rank's ``MPI_Waitall``
over its ``MPI_Isend`` and ``MPI_Irecv`` calls.
"""

import json
import socket
import sys
import threading
import time

PORT = 47002


def main(arg: str) -> int:
    cfg = json.loads(arg)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((cfg["me"], PORT))
    listener.listen(128)
    ends = []

    def read(conn):
        while conn.recv(1 << 20):
            pass
        ends.append(time.time())

    def accept():
        readers = [threading.Thread(target=read, args=(listener.accept()[0],)) for _ in range(cfg["n_in"])]
        for t in readers:
            t.start()
        for t in readers:
            t.join()

    acceptor = threading.Thread(target=accept)
    acceptor.start()
    conns = []
    for address, nbytes in cfg["sends"]:
        conn = socket.socket()
        for _ in range(600):   # the peer's listener may not be up yet
            try:
                conn.connect((address, PORT))
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.stderr.write(f"cannot connect to {address}\n")
            return 1
        conns.append((conn, int(nbytes)))

    def write(conn, nbytes):
        while time.time() < cfg["start"]:
            time.sleep(0.0002)
        conn.sendall(b"\0" * nbytes)
        conn.shutdown(socket.SHUT_WR)
        ends.append(time.time())

    writers = [threading.Thread(target=write, args=c) for c in conns]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    acceptor.join()
    print(json.dumps({"end_s": max(ends) - cfg["start"] if ends else 0.0}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
