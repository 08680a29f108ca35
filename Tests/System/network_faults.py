"""A TCP relay on loopback that can turn into a black hole: the network fault a cloud gives most often, a
path that drops packets (a partition, a firewall or NAT that lost the connection's state) with no RST
and no FIN, so that the client learns of it only from its own timeouts.

`BlackHoleRelay(upstream_port)` listens on a port of its own and forwards each connection to the
upstream. `swallow()` starts the fault: every connection open then goes silent for good (nothing more is
forwarded either way, nothing is closed: what the client writes stays unanswered), and connections
accepted meanwhile are held silent too (the client's TCP connect succeeds, its TLS handshake never gets
an answer). `restore()` ends it for new connections only: those swallowed stay dead, as they do behind a
NAT that dropped their state, until the client closes them.
"""
import selectors
import socket
import threading


class BlackHoleRelay:
    def __init__(self, upstream_port, port=0):
        self.upstream = ("127.0.0.1", upstream_port)
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.lock = threading.Lock()
        self.swallowing = False
        # Each forwarding socket maps to its peer; swallowed sockets are kept open, unregistered.
        self.peers = {}
        # Bytes read from one side and not yet written to the other, by the socket they are for.
        self.pending = {}
        self.swallowed = []
        # The client side of each swallowed connection, and whether the client has closed it.
        self.dark = {}
        self.clients = set()
        self.accepted = 0
        self.accepted_while_swallowing = 0
        self.closed = 0
        self.running = True
        self.thread = threading.Thread(target=self._run, name="black-hole-relay", daemon=True)
        self.thread.start()

    def swallow(self):
        """Every connection open now goes silent for good, and new ones are held silent until `restore()`."""
        with self.lock:
            self.swallowing = True
            for sock in list(self.peers):
                if sock in self.peers:
                    self._silence(sock)

    def restore(self):
        """New connections are forwarded again; those swallowed stay silent."""
        with self.lock:
            self.swallowing = False

    def dark_connections(self):
        """(how many connections the fault swallowed, how many of those the client has closed since). What
        the client writes into one is read and dropped here, as the path would drop it."""
        with self.lock:
            for sock, closed in self.dark.items():
                while not closed:
                    try:
                        closed = not sock.recv(65536, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    except OSError:
                        closed = True
                self.dark[sock] = closed
            return len(self.dark), sum(self.dark.values())

    def counts(self):
        with self.lock:
            return {"accepted": self.accepted, "accepted_while_swallowing": self.accepted_while_swallowing,
                    "forwarding": len(self.peers) // 2, "swallowed": len(self.dark),
                    "closed": self.closed}

    def close(self):
        self.running = False
        self.thread.join(timeout=5)
        with self.lock:
            for sock in list(self.peers) + self.swallowed:
                sock.close()
            self.peers.clear()
            self.swallowed.clear()
        self.selector.close()
        self.listener.close()

    def _silence(self, sock):
        """Under the lock: stops forwarding `sock` and its peer without closing either."""
        peer = self.peers.pop(sock, None)
        for each in (sock, peer):
            if each is None:
                continue
            self.peers.pop(each, None)
            self.pending.pop(each, None)
            try:
                self.selector.unregister(each)
            except (KeyError, ValueError):
                pass
            self.swallowed.append(each)
            if each in self.clients:
                self.dark[each] = False

    def _run(self):
        while self.running:
            for key, events in self.selector.select(timeout=0.1):
                with self.lock:
                    if key.fileobj is self.listener:
                        self._accept()
                        continue
                    if key.fileobj in self.peers and events & selectors.EVENT_WRITE:
                        self._flush(key.fileobj)
                    if key.fileobj in self.peers and events & selectors.EVENT_READ:
                        self._forward(key.fileobj)

    def _accept(self):
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        self.accepted += 1
        if self.swallowing:
            self.accepted_while_swallowing += 1
            self.swallowed.append(client)
            self.dark[client] = False
            return
        self.clients.add(client)
        upstream = socket.create_connection(self.upstream)
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.pending[sock] = bytearray()
        self.peers[client] = upstream
        self.peers[upstream] = client
        self.selector.register(client, selectors.EVENT_READ, None)
        self.selector.register(upstream, selectors.EVENT_READ, None)

    def _forward(self, sock):
        """Reads what `sock` has and queues it for its peer; reads nothing more while the peer's queue is
        long (backpressure, as TCP would)."""
        peer = self.peers[sock]
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.closed += 1
            for each in (sock, peer):
                self.peers.pop(each, None)
                self.pending.pop(each, None)
                self.clients.discard(each)
                if each in self.selector.get_map():
                    self.selector.unregister(each)
                each.close()
            return
        self.pending[peer] += data
        self._flush(peer)

    def _flush(self, sock):
        buffer = self.pending[sock]
        try:
            sent = sock.send(buffer) if buffer else 0
        except BlockingIOError:
            sent = 0
        except OSError:
            sent = len(buffer)
        del buffer[:sent]
        self._update_interest(sock)
        self._update_interest(self.peers[sock])

    def _update_interest(self, sock):
        """Writable interest while bytes wait for `sock`; readable while few of its bytes wait for its peer
        (backpressure, as TCP would give)."""
        events = 0
        if len(self.pending[self.peers[sock]]) < 1 << 20:
            events |= selectors.EVENT_READ
        if self.pending[sock]:
            events |= selectors.EVENT_WRITE
        registered = sock in self.selector.get_map()
        if events and registered:
            self.selector.modify(sock, events, None)
        elif events:
            self.selector.register(sock, events, None)
        elif registered:
            self.selector.unregister(sock)
