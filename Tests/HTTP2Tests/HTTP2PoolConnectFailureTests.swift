// How the pool fails to connect, and says why: refused connections and their back-off, certificates
// that do not verify, servers without HTTP/2, unusable TLS settings, a server that never starts TLS.

import ChildProcesses
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import HTTP2

@Suite("HTTP/2 pool: connect failures", .serialized)
struct HTTP2PoolConnectFailureTests {
    static let group = EventLoopGroup(threadCount: 2)

    func makePool(
        _ server: HTTP2TestServer, _ adjust: (inout ConnectionPool.Configuration) -> Void = { _ in }
    ) throws -> ConnectionPool {
        try makeTestPool(server, group: Self.group, adjust)
    }

    @Test func refusedConnectionsBackOffAndFailFastMeanwhile() async throws {
        let refusing = try RefusingLoopbackPort()
        let port = refusing.port
        let certificate = try TestCertificate.make()
        var configuration = ConnectionPool.Configuration(
            host: "127.0.0.1", port: port,
            tls: TLSConfiguration(trustRoots: .caFile(certificate.certificateFile)))
        configuration.reconnectBackoff = ExponentialBackoff(initial: .milliseconds(400), maximum: .milliseconds(400))
        let pool = try ConnectionPool(configuration: configuration, group: Self.group)
        let first = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(first?.code == .connectFailed)
        #expect(first?.message.contains("refused") == true)
        // The back-off is jittered (uniform in 0...400 ms), so a request may come after it ended and make a
        // new attempt; each failed attempt starts a new back-off, so one of a few requests meets one.
        var duringBackoff: HTTP2ClientError?
        for _ in 0..<20 where duringBackoff == nil {
            let opened = pool.statistics.connectionsOpened
            let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
            #expect(error?.code == .connectFailed)
            if error?.message.contains("next attempt in") == true {
                #expect(pool.statistics.connectionsOpened == opened, "no new attempt during the back-off")
                duringBackoff = error
            }
        }
        let second = try #require(duringBackoff, "a request during the back-off fails at once")
        #expect(second.retryAfter != nil)
        let server = try HTTP2TestServer(certificate: certificate, takingOver: refusing)
        // The pool said when its next attempt is due; from then on a request connects again.
        try await Task.sleep(for: try #require(second.retryAfter))
        #expect(try await pool.send(HTTP2Request(path: "/")).status == 200)
        await pool.shutdown()
        await server.stop()
    }

    @Test func serverCertificateFromAnotherCAIsRejected() async throws {
        let server = try HTTP2TestServer()
        let other = try TestCertificate.make()
        var configuration = ConnectionPool.Configuration(
            host: "127.0.0.1", port: server.port,
            tls: TLSConfiguration(trustRoots: .caFile(other.certificateFile)))
        configuration.connectTimeout = .seconds(3)
        let pool = try ConnectionPool(configuration: configuration, group: Self.group)
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .certificateVerificationFailed)
        #expect(error?.message.contains("self-signed") == true || error?.message.contains("issuer") == true)
        #expect(server.snapshot.requests == 0)
        await pool.shutdown()
        await server.stop()
    }

    @Test func certificateForAnotherNameIsRejected() async throws {
        let server = try HTTP2TestServer()
        let pool = try makePool(server) { $0.tls.serverName = "api.push.example" }
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .certificateVerificationFailed)
        #expect(error?.message.contains("api.push.example") == true)
        await pool.shutdown()
        await server.stop()
    }

    @Test(arguments: ["http/1.1", nil] as [String?])
    func serverWithoutHTTP2FailsClearly(alpn: String?) async throws {
        var options = HTTP2TestServer.Options()
        options.alpn = alpn
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .http2NotNegotiated)
        #expect(error?.message.contains("h2") == true)
        await pool.shutdown()
        await server.stop()
    }

    @Test func unreadableCAFileIsAConfigurationError() throws {
        let configuration = ConnectionPool.Configuration(
            host: "127.0.0.1", port: 1,
            tls: TLSConfiguration(trustRoots: .caFile("/nonexistent/ca.pem")))
        let error = #expect(throws: HTTP2ClientError.self) {
            try ConnectionPool(configuration: configuration, group: Self.group)
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("/nonexistent/ca.pem") == true)
    }

    @Test func clientIdentityHookRunsOnceAndItsErrorFailsCreation() throws {
        struct NoIdentity: Error, CustomStringConvertible { var description: String { "identity unusable" } }
        let calls = Mutex(0)
        var configuration = ConnectionPool.Configuration(host: "127.0.0.1", port: 1)
        configuration.tls.installClientIdentity = { context in
            calls.withLock { $0 += 1 }
            throw NoIdentity()
        }
        let error = #expect(throws: HTTP2ClientError.self) {
            try ConnectionPool(configuration: configuration, group: Self.group)
        }
        #expect(error?.message.contains("identity unusable") == true)
        #expect(calls.withLock { $0 } == 1)
    }

    @Test func serverThatNeverStartsTLSHitsTheConnectTimeout() async throws {
        // A listening socket that is never accepted: TCP completes, TLS never starts.
        let listener = closeOnExecSocket()
        defer { close(listener) }
        _ = withLoopbackAddress(port: 0) { bind(listener, $0, $1) }
        listen(listener, 8)
        let port = boundPort(of: listener)
        let certificate = try TestCertificate.make()
        var configuration = ConnectionPool.Configuration(
            host: "127.0.0.1", port: port,
            tls: TLSConfiguration(trustRoots: .caFile(certificate.certificateFile)))
        configuration.connectTimeout = .milliseconds(300)
        let pool = try ConnectionPool(configuration: configuration, group: Self.group)
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        // The connect deadline (not the 30 s request timeout) ended it, stuck in the handshake.
        #expect(error?.code == .connectTimeout)
        #expect(error?.message.contains("TLS handshake") == true)
        await pool.shutdown()
    }
}
