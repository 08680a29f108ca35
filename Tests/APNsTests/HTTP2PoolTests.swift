// Behaviour of the HTTP/2 connection pool against the scriptable test server, through real TLS on loopback.
import Foundation
import Synchronization
import Testing
@testable import APNs

@Suite("HTTP/2 pool against the test server", .serialized)
struct HTTP2PoolTests {
    static let group = EventLoopGroup(threadCount: 2)

    func makePool(_ server: HTTP2TestServer, _ adjust: (inout ConnectionPool.Configuration) -> Void = { _ in })
        throws -> ConnectionPool
    {
        var configuration = ConnectionPool.Configuration(host: "127.0.0.1", port: server.port,
            tls: TLSConfiguration(trustRoots: .caFile(server.certificate.certificateFile)))
        configuration.requestTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(3)
        adjust(&configuration)
        return try ConnectionPool(configuration: configuration, group: Self.group)
    }

    @Test func postReturnsStatusHeadersAndBodyAndServerSeesRequest() async throws {
        var options = HTTP2TestServer.Options()
        options.reply = { request in
            .respond(status: 201, headers: [("x-echo-path", request.path), ("x-body-bytes", "\(request.body.count)")],
                body: Array("reply to \(request.method)".utf8))
        }
        let server = try HTTP2TestServer(options: options)
        let pool = try makePool(server)
        let body = [UInt8](repeating: 0x61, count: 40_000)
        let response = try await pool.send(HTTP2Request(method: "POST", path: "/3/device/abc",
            headers: [HTTP2Header("apns-topic", "com.example")], body: body))
        #expect(response.status == 201)
        #expect(response.header("x-echo-path") == "/3/device/abc")
        #expect(response.header("X-Body-Bytes") == "40000")
        #expect(String(decoding: response.body, as: UTF8.self) == "reply to POST")
        let empty = try await pool.send(HTTP2Request(method: "GET", path: "/empty"))
        #expect(empty.status == 201)
        #expect(server.snapshot.connections == 1)
        #expect(server.snapshot.requests == 2)
        await pool.shutdown()
        await server.stop()
    }
}
