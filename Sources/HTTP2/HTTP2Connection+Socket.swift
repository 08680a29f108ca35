// Getting a TCP connection: resolving the host off the loop, trying each address with a non-blocking
// connect, and keeping the socket's epoll interest in step with what TLS is waiting for.

import CNghttp2
import Dispatch
import Glibc
import Platform

extension HTTP2Connection {
    /// Starts resolving and connecting. Loop thread.
    func start() {
        guard case .idle = state else { return }
        registration = loop.register(self)
        let connectDeadline = MonotonicClock.now() &+ settings.connectTimeout
        state = .resolving(connectDeadline: connectDeadline)
        // Through a proxy, the proxy is what the socket connects to; the server's name goes in CONNECT.
        let host = settings.proxy?.host ?? settings.host
        let port = settings.proxy?.port ?? settings.port
        if IPAddress.isLiteral(host) {
            didResolve(SocketAddress.resolve(host: host, port: port, numericOnly: true))
        } else {
            // getaddrinfo blocks; it must not run on the loop or on Swift's cooperative pool.
            DispatchQueue.global(qos: .userInitiated).async { [self] in
                let result = SocketAddress.resolve(host: host, port: port, numericOnly: false)
                loop.execute { [self] in didResolve(result) }
            }
        }
    }

    private func didResolve(_ result: Result<[SocketAddress], HTTP2ClientError>) {
        guard case .resolving(let connectDeadline) = state else { return }
        switch result {
        case .success(let resolved):
            connect(ConnectAttempt(connectDeadline: connectDeadline, addresses: resolved))
        case .failure(let error):
            close(proxyUnreachable(error.message) ?? error)
        }
    }

    /// Starts a connect to the next address of `attempt` that takes one; closes when none is left.
    private func connect(_ attempt: ConnectAttempt) {
        var attempt = attempt
        while attempt.nextAddress < attempt.addresses.count {
            let address = attempt.addresses[attempt.nextAddress]
            attempt.nextAddress += 1
            let socketFD = socket(
                Int32(address.family),
                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                    | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socketFD >= 0 else {
                attempt.lastError = "cannot create a socket: \(String(cString: strerror(errno)))"
                continue
            }
            var one: Int32 = 1
            setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let result = address.withSockAddr { Glibc.connect(socketFD, $0, $1) }
            if result == 0 || errno == EINPROGRESS {
                fd = socketFD
                state = .connecting(attempt)
                loop.watch(fd: fd, registration: registration, readable: false, writable: true, add: true)
                watchingWritable = true
                return
            }
            attempt.lastError = "connect to \(address) failed: \(String(cString: strerror(errno)))"
            Glibc.close(socketFD)
        }
        let reason = attempt.lastError.isEmpty ? "no address to connect to" : attempt.lastError
        close(proxyUnreachable(reason) ?? HTTP2ClientError(.connectFailed, reason, endpoint: endpoint))
    }

    /// The socket became writable: the connect finished, one way or the other.
    func finishTCPConnect() {
        guard case .connecting(var attempt) = state else { return }
        var socketError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &socketError, &length)
        if socketError != 0 {
            let reason = String(cString: strerror(socketError))
            attempt.lastError = "connect to \(attempt.addresses[attempt.nextAddress - 1]) failed: \(reason)"
            closeSocket()
            connect(attempt)
            return
        }
        if let proxy = settings.proxy {
            startTunnel(through: proxy, connectDeadline: attempt.connectDeadline)
            return
        }
        startTLS(connectDeadline: attempt.connectDeadline)
    }

    /// Starts the TLS handshake on the connected socket (to the server, or a tunnel to it).
    func startTLS(connectDeadline: UInt64) {
        guard let ssl = tls.makeSession(fileDescriptor: fd) else {
            close(
                HTTP2ClientError(
                    .tlsHandshakeFailed, "cannot create a TLS session: \(OpenSSLError.drain())",
                    endpoint: endpoint))
            return
        }
        self.ssl = ssl
        state = .handshaking(connectDeadline: connectDeadline)
        continueHandshake()
    }

    /// Watches for writability only while a write waits for it; readability always.
    func setInterest(writable: Bool) {
        guard fd >= 0, writable != watchingWritable else { return }
        watchingWritable = writable
        loop.watch(fd: fd, registration: registration, readable: true, writable: writable, add: false)
    }

    /// Stops watching and closes the socket, if one is open.
    func closeSocket() {
        guard fd >= 0 else { return }
        loop.unwatch(fd: fd)
        Glibc.close(fd)
        fd = -1
    }
}
