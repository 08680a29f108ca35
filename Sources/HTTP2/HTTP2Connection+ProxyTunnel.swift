// The tunnel phase of a connection through an HTTP proxy: once the TCP connection to the proxy is up,
// CONNECT host:port is written and the proxy's answer read, without blocking, on the loop; a 2xx hands
// the socket to TLS (SNI and certificate check against the server's name), anything else closes the
// connection with the proxy's refusal named.

import Glibc

extension HTTP2Connection {
    /// Writes CONNECT to the proxy the socket is connected to. Loop thread.
    func startTunnel(through proxy: HTTPProxy, connectDeadline: UInt64) {
        state = .tunneling(
            ProxyTunnel(connectDeadline: connectDeadline, target: endpoint, credentials: proxy.credentials))
        continueTunnel()
    }

    /// Writes what is left of CONNECT, then reads the answer; called again whenever the socket is ready.
    func continueTunnel() {
        guard case .tunneling(var tunnel) = state, let proxy = settings.proxy else { return }
        while tunnel.written < tunnel.request.count {
            let count = tunnel.request.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + tunnel.written, raw.count - tunnel.written, Int32(MSG_NOSIGNAL))
            }
            if count > 0 {
                tunnel.written += count
                continue
            }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                state = .tunneling(tunnel)
                setInterest(writable: true)
                return
            }
            let reason = count < 0 ? String(cString: strerror(errno)) : "nothing written"
            return close(tunnelFailure(proxy, "writing CONNECT to the proxy failed: \(reason)"))
        }
        setInterest(writable: false)
        let buffer = loop.readBuffer
        while true {
            // Never more than the header limit: the answer is small, and what follows it is the server's.
            let room = ProxyTunnel.maximumResponseHeaderBytes + 1 - tunnel.response.count
            let count = recv(fd, buffer.baseAddress!, min(buffer.count, room), 0)
            if count > 0 {
                let bytes = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                tunnel.response.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
                if handleTunnelAnswer(tunnel, proxy: proxy) { return }
                continue
            }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                state = .tunneling(tunnel)
                return
            }
            let reason =
                count == 0 ? "closed the connection" : "reset the connection (\(String(cString: strerror(errno))))"
            return close(tunnelFailure(proxy, "the proxy \(reason) before answering CONNECT \(endpoint)"))
        }
    }

    /// Acts on the answer once it is complete: TLS on a 2xx, a named error otherwise. True when done.
    private func handleTunnelAnswer(_ tunnel: ProxyTunnel, proxy: HTTPProxy) -> Bool {
        switch ProxyTunnel.parse(tunnel.response) {
        case .incomplete:
            return false
        case .malformed(let why):
            close(tunnelFailure(proxy, "the proxy \(proxy.endpoint) is not an HTTP proxy or broke HTTP: \(why)"))
        case .complete(let status, let reason, let extraBytes):
            guard (200...299).contains(status) else {
                close(ProxyTunnel.refusal(status: status, reason: reason, proxy: proxy, target: endpoint))
                return true
            }
            // The server speaks only after our ClientHello; bytes already here are not TLS from it.
            guard extraBytes == 0 else {
                close(tunnelFailure(proxy, "the proxy sent \(extraBytes) bytes after its \(status) answer to CONNECT"))
                return true
            }
            startTLS(connectDeadline: tunnel.connectDeadline)
        }
        return true
    }

    private func tunnelFailure(_ proxy: HTTPProxy, _ message: String) -> HTTP2ClientError {
        HTTP2ClientError(.proxyRefused, message, endpoint: proxy.endpoint)
    }

    /// Through a proxy, a failed resolve or TCP connect is the proxy's: named so, with the proxy as the
    /// endpoint, so that nobody goes looking at APNs. Nil when there is no proxy.
    func proxyUnreachable(_ reason: String) -> HTTP2ClientError? {
        guard let proxy = settings.proxy else { return nil }
        return HTTP2ClientError(
            .proxyUnreachable,
            "cannot reach the proxy \(proxy.endpoint) (to tunnel to \(endpoint)): \(reason)",
            endpoint: proxy.endpoint)
    }
}
