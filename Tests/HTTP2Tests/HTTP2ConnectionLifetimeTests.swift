// A connection's lifetime against nghttp2: nghttp2 holds it unretained and calls back while it parses, so
// a close asked for from a callback must wait until nghttp2 has returned, and must still happen.

import Synchronization
import TestSupport
import Testing

@testable import HTTP2

@Suite("HTTP/2 connection lifetime")
struct HTTP2ConnectionLifetimeTests {
    /// Closes the connection from inside nghttp2's SETTINGS callback and records what it saw.
    final class ClosingDelegate: HTTP2ConnectionDelegate {
        struct Seen {
            var callDepthWhenReady = -1
            var closedInsideTheCallback = false
            var closes: [HTTP2ClientError?] = []
            var wasReady = false
            var sessionGoneWhenClosed = false
        }

        let seen = Mutex(Seen())

        func connectionDidBecomeReady(_ connection: HTTP2Connection, streamLimit: Int) {
            let depth = connection.sessionCallDepth
            connection.close(HTTP2ClientError(.connectionClosed, "closed by the test", endpoint: connection.endpoint))
            let closed = connection.isClosed
            seen.withLock {
                $0.callDepthWhenReady = depth
                $0.closedInsideTheCallback = closed
            }
        }

        func connection(_ connection: HTTP2Connection, streamLimitChangedTo limit: Int) {}
        func connectionIsGoingAway(_ connection: HTTP2Connection) {}
        func connection(_ connection: HTTP2Connection, didFinishStreams count: Int) {}

        func connectionDidClose(_ connection: HTTP2Connection, error: HTTP2ClientError?, wasReady: Bool) {
            let sessionGone = connection.session == nil && connection.sessionCallDepth == 0
            seen.withLock {
                $0.closes.append(error)
                $0.wasReady = wasReady
                $0.sessionGoneWhenClosed = sessionGone
            }
        }
    }

    @Test func aCloseAskedForInsideAnNghttp2CallbackRunsOnceNghttp2HasReturned() async throws {
        let server = try HTTP2TestServer()
        let group = EventLoopGroup(threadCount: 1)
        let endpoint = "127.0.0.1:\(server.port)"
        let trust = TLSConfiguration(trustRoots: .caFile(server.certificate.certificateFile))
        let tls = try TLSContext(configuration: trust, host: "127.0.0.1", endpoint: endpoint)
        let settings = HTTP2ConnectionSettings(
            host: "127.0.0.1", port: server.port,
            connectTimeout: 3_000_000_000, pingInterval: 60_000_000_000, pingTimeout: 10_000_000_000,
            maximumResponseBodyBytes: 65_536, maximumConcurrentStreams: 100, maximumStreamsPerConnection: 1_000)
        let delegate = ClosingDelegate()
        let connection = HTTP2Connection(loop: group.loops[0], settings: settings, tls: tls, delegate: delegate)
        connection.loop.execute { connection.start() }

        #expect(await eventually { !delegate.seen.withLock { $0.closes.isEmpty } })
        let seen = delegate.seen.withLock { $0 }
        #expect(seen.callDepthWhenReady == 1, "readiness is reported from inside nghttp2_session_mem_recv")
        #expect(!seen.closedInsideTheCallback, "the session must outlive the callback that asked to close it")
        #expect(seen.closes.count == 1)
        #expect(seen.closes.first??.message == "closed by the test")
        #expect(seen.wasReady)
        #expect(seen.sessionGoneWhenClosed)
        await group.shutdown()
        await server.stop()
    }
}
