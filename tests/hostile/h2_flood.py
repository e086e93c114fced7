#!/usr/bin/python3
"""A gRPC call whose length prefix declares a huge message and whose bytes
keep coming: what a server buffers before it can check the message limit.

  h2_flood.py HOST:PORT --streams N --send_mb M [--declared_mb D]

Opens one HTTP/2 connection and N calls of /tern.v1.ParameterServer/PushPull,
each declaring a D MiB message (default 2047), and sends up to M MiB in all
as the server's flow-control windows allow. Prints one JSON line: the bytes
sent, how each call ended (the grpc-status the server sent, "reset",
"goaway", or "open") and why the sender stopped.
"""
import argparse
import json
import socket
import struct
import time

import h2.config
import h2.connection
import h2.events

PATH = "/tern.v1.ParameterServer/PushPull"
PIECE = 16384


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--send_mb", type=float, default=256)
    parser.add_argument("--declared_mb", type=int, default=2047)
    parser.add_argument("--stall_s", type=float, default=10,
                        help="stop when no window opens for this long")
    return parser.parse_args()


def open_calls(conn, host, streams, declared):
    prefix = struct.pack(">BI", 0, declared)
    ids = []
    for _ in range(streams):
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, [
            (":method", "POST"), (":scheme", "http"), (":path", PATH),
            (":authority", host), ("content-type", "application/grpc"),
            ("te", "trailers")])
        conn.send_data(stream, prefix)
        ids.append(stream)
    return ids


def handle(events, ended, conn):
    for event in events:
        if isinstance(event, h2.events.TrailersReceived) or isinstance(
                event, h2.events.ResponseReceived):
            headers = dict((k.decode() if isinstance(k, bytes) else k,
                            v.decode() if isinstance(v, bytes) else v)
                           for k, v in event.headers)
            if "grpc-status" in headers:
                ended[event.stream_id] = "grpc-status " + headers[
                    "grpc-status"] + " " + headers.get("grpc-message", "")
        elif isinstance(event, h2.events.StreamReset):
            ended.setdefault(event.stream_id, "reset")
        elif isinstance(event, h2.events.ConnectionTerminated):
            return "goaway"
        elif isinstance(event, h2.events.DataReceived):
            conn.acknowledge_received_data(event.flow_controlled_length,
                                           event.stream_id)
    return None


def main():
    args = parse_args()
    host, port = args.address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=args.stall_s)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(
        client_side=True, header_encoding=None))
    conn.initiate_connection()
    ids = open_calls(conn, args.address, args.streams, args.declared_mb << 20)
    sock.sendall(conn.data_to_send())
    budget, sent, ended, why = int(args.send_mb * (1 << 20)), 0, {}, "budget"
    piece = b"\0" * PIECE
    while sent < budget:
        progressed = False
        for stream in ids:
            if stream in ended:
                continue
            window = min(conn.local_flow_control_window(stream), PIECE,
                         budget - sent)
            if window > 0:
                conn.send_data(stream, piece[:window])
                sent += window
                progressed = True
        out = conn.data_to_send()
        try:
            if out:
                sock.sendall(out)
            sock.settimeout(0 if progressed else args.stall_s)
            data = sock.recv(65536)
        except BlockingIOError:
            data = None
        except (socket.timeout, TimeoutError):
            why = "stalled: no window for %s s" % args.stall_s
            break
        except (ConnectionError, OSError) as error:
            why = "connection: %s" % error
            break
        if data == b"":
            why = "connection closed by the server"
            break
        if data:
            terminated = handle(conn.receive_data(data), ended, conn)
            if terminated:
                why = terminated
                break
        if len(ended) == len(ids):
            why = "every call ended"
            break
    print(json.dumps({"sent_mb": round(sent / (1 << 20), 1), "why": why,
                      "calls": {str(s): ended.get(s, "open") for s in ids}}))


if __name__ == "__main__":
    main()
