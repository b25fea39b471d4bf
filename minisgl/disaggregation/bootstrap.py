"""The bootstrap server: where a request's two halves find each other, by the room the router gave both.

    prefill server  BootstrapServer binds tcp://*:BOOTSTRAP_PORT (--disaggregation-bootstrap-port) and drains
                    it every round: {"type": "register", room, endpoint, num_slots}: the decode half of `room`
                    has preallocated its KV slots and waits at `endpoint` (its KVReceiver);
                    {"type": "ack", room}: the decode half received the KV, the prefill half may free its own
    decode server   BootstrapClient connects to each prefill's bootstrap address (the router's bootstrap_host
                    and bootstrap_port) and sends those two messages

SGLang's bootstrap server is an HTTP server the decode side asks for the prefill ranks' addresses; here one
ZeroMQ PULL socket does the pairing and carries the acknowledgements. Messages are JSON: they cross machines.
"""

from __future__ import annotations

import json

import zmq


class BootstrapServer:
    def __init__(self, context: zmq.Context, port: int):
        self.socket = context.socket(zmq.PULL)
        self.socket.setsockopt(zmq.LINGER, 0)
        try:  # port 0: a free one, chosen by the bind itself (no other process can take it in between)
            self.port = self.socket.bind_to_random_port("tcp://*") if port == 0 else port
            if port != 0:
                self.socket.bind(f"tcp://*:{port}")
        except zmq.ZMQError as e:
            self.socket.close()
            raise RuntimeError(f"the bootstrap server cannot listen on port {port} ({e}): give another "
                               "--disaggregation-bootstrap-port") from None
        self.registered: dict[int, dict] = {}  # room -> its decode half's {endpoint, num_slots}
        self.acked: set[int] = set()  # rooms whose decode half has the KV

    def poll(self) -> None:
        """Take in every message that arrived."""
        while True:
            try:
                msg = json.loads(self.socket.recv(zmq.NOBLOCK))
            except zmq.Again:
                return
            if msg.get("type") == "register":
                self.registered[int(msg["room"])] = {"endpoint": msg["endpoint"],
                                                     "num_slots": msg["num_slots"]}
            elif msg.get("type") == "ack":
                self.acked.add(int(msg["room"]))

    def close(self) -> None:
        self.socket.close()


class BootstrapClient:
    def __init__(self, context: zmq.Context):
        self.context = context
        self.sockets: dict[tuple[str, int], zmq.Socket] = {}  # one PUSH per prefill server

    def _send(self, host: str, port: int, msg: dict) -> None:
        sock = self.sockets.get((host, port))
        if sock is None:
            sock = self.sockets[(host, port)] = self.context.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(f"tcp://{host}:{port}")
        sock.send(json.dumps(msg).encode())

    def register(self, host: str, port: int, room: int, endpoint: str, num_slots: int) -> None:
        self._send(host, port,
                   {"type": "register", "room": room, "endpoint": endpoint, "num_slots": num_slots})

    def ack(self, host: str, port: int, room: int) -> None:
        self._send(host, port, {"type": "ack", "room": room})

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
