// The pool against real servers from Debian: nghttpd (files, a stream limit, a restart), h2o (POST through a
// mruby handler), and openssl s_server without h2 (a clear ALPN error). Each server runs on a free loopback
// port with a generated certificate and is killed afterwards.

import ChildProcesses
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import HTTP2

/// A server for a test, started through `SpawnedProcess` (an empty signal mask, output to `log`); killed
/// with SIGKILL and reaped by `stop()`.
final class TestServerProcess: @unchecked Sendable {
    let pid: pid_t
    let log: String

    init(_ path: String, _ arguments: [String], log: String) throws {
        do {
            pid = try SpawnedProcess.spawn(path, arguments, outputFile: log).pid
        } catch {
            throw TestFailure(error.message)
        }
        self.log = log
    }

    /// Waits until the port accepts TCP connections; fails at once if the server exits instead.
    func waitForPort(_ port: Int) async throws {
        var exited = false
        let ready = await eventually {
            var status: Int32 = 0
            exited = waitpid(pid, &status, WNOHANG) == pid
            return exited || loopbackPortAcceptsConnections(port)
        }
        if exited {
            throw TestFailure("server exited: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        if !ready { throw TestFailure("no server on port \(port) after 30 s") }
    }

    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

}

@Suite("HTTP/2 pool against nghttpd, h2o and openssl s_server", .serialized)
struct HTTP2InteropTests {
    static let group = EventLoopGroup(threadCount: 1)

    func pool(
        port: Int, certificate: TestCertificate,
        _ adjust: (inout ConnectionPool.Configuration) -> Void = { _ in }
    ) throws -> ConnectionPool {
        var configuration = ConnectionPool.Configuration(
            host: "127.0.0.1", port: port,
            tls: TLSConfiguration(trustRoots: .caFile(certificate.certificateFile)))
        configuration.requestTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(3)
        adjust(&configuration)
        return try ConnectionPool(configuration: configuration, group: Self.group)
    }

    func startNghttpd(_ certificate: TestCertificate, port: Int, extra: [String] = []) async throws
        -> TestServerProcess
    {
        let documents = certificate.directory + "/www"
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: true)
        try "hello from nghttpd\n".write(toFile: documents + "/hello.txt", atomically: true, encoding: .utf8)
        let server = try TestServerProcess(
            "/usr/sbin/nghttpd",
            ["-a", "127.0.0.1", "-d", documents] + extra
                + [String(port), certificate.keyFile, certificate.certificateFile],
            log: certificate.directory + "/nghttpd.log")
        try await server.waitForPort(port)
        return server
    }

    @Test func getFromNghttpdReturnsTheFile() async throws {
        let certificate = try TestCertificate.make()
        let port = freeLoopbackPort()
        let server = try await startNghttpd(certificate, port: port)
        defer { server.stop() }
        let pool = try pool(port: port, certificate: certificate)
        let response = try await pool.send(HTTP2Request(method: "GET", path: "/hello.txt"))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "hello from nghttpd\n")
        let missing = try await pool.send(HTTP2Request(method: "GET", path: "/missing"))
        #expect(missing.status == 404)
        await pool.shutdown()
    }

    @Test func nghttpdStreamLimitIsLearnedAndHonoured() async throws {
        let certificate = try TestCertificate.make()
        let port = freeLoopbackPort()
        let server = try await startNghttpd(certificate, port: port, extra: ["--max-concurrent-streams=2"])
        defer { server.stop() }
        let pool = try pool(port: port, certificate: certificate)
        _ = try await pool.send(HTTP2Request(method: "GET", path: "/hello.txt"))
        #expect(pool.statistics.streamCapacity == 2)
        // More requests than the limit at once: none may be refused.
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 {
                group.addTask { try await pool.send(HTTP2Request(method: "GET", path: "/hello.txt")).status }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 20))
        await pool.shutdown()
    }

    @Test func restartedNghttpdIsReconnected() async throws {
        let certificate = try TestCertificate.make()
        let port = freeLoopbackPort()
        let first = try await startNghttpd(certificate, port: port)
        let pool = try pool(port: port, certificate: certificate) {
            $0.reconnectBackoff = ExponentialBackoff(initial: .milliseconds(50), maximum: .milliseconds(200))
        }
        #expect(try await pool.send(HTTP2Request(method: "GET", path: "/hello.txt")).status == 200)
        first.stop()
        #expect(await eventually { pool.statistics.readyConnections == 0 }, "the pool notices the dead connection")
        let second = try await startNghttpd(certificate, port: port)
        defer { second.stop() }
        var status = 0
        let deadline = ContinuousClock.now + .seconds(5)
        while status == 0, ContinuousClock.now < deadline {
            do {
                status = try await pool.send(HTTP2Request(method: "GET", path: "/hello.txt")).status
            } catch let error as HTTP2ClientError where error.requestWasNotProcessed {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(status == 200)
        #expect(pool.statistics.connectionsOpened >= 2)
        await pool.shutdown()
    }

    @Test func postThroughH2oMrubyHandler() async throws {
        let certificate = try TestCertificate.make()
        let port = freeLoopbackPort()
        let configuration = """
            listen:
              host: 127.0.0.1
              port: \(port)
              ssl:
                certificate-file: \(certificate.certificateFile)
                key-file: \(certificate.keyFile)
            num-threads: 1
            hosts:
              default:
                paths:
                  /:
                    mruby.handler: |
                      Proc.new do |env|
                        body = env["rack.input"] ? env["rack.input"].read : ""
                        [200, {"x-length" => body.bytesize.to_s, "x-path" => env["PATH_INFO"],
                               "x-echo" => env["HTTP_X_ECHO"].to_s}, ["ok"]]
                      end

            """
        let configPath = certificate.directory + "/h2o.conf"
        try configuration.write(toFile: configPath, atomically: true, encoding: .utf8)
        let server = try TestServerProcess(
            "/usr/bin/h2o", ["--mode", "worker", "--conf", configPath],
            log: certificate.directory + "/h2o.log")
        defer { server.stop() }
        try await server.waitForPort(port)
        let pool = try pool(port: port, certificate: certificate) { $0.connectionCount = 2 }
        // A header name given in capitals: HTTP/2 sends names lowercase (h2o refuses a stream otherwise), and
        // nghttp2 takes the packed fields without copying them, so each echo shows its request's own bytes.
        let statuses = try await withThrowingTaskGroup(of: (Int, String?, String?, String?).self) { group in
            for index in 0..<50 {
                group.addTask {
                    let response = try await pool.send(
                        HTTP2Request(
                            path: "/3/device/\(index)",
                            headers: [
                                HTTP2Header("apns-topic", "com.example.app"),
                                HTTP2Header("X-Echo", "value-\(index)", isIndexable: false),
                            ],
                            body: [UInt8](repeating: 0x7b, count: 100 + index)))
                    return (
                        response.status, response.header("x-length"), response.header("x-path"),
                        response.header("x-echo")
                    )
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.count == 50)
        #expect(statuses.allSatisfy { $0.0 == 200 })
        #expect(Set(statuses.compactMap(\.1)) == Set((0..<50).map { String(100 + $0) }))
        #expect(statuses.contains { $0.2 == "/3/device/7" })
        #expect(statuses.allSatisfy { $0.2.map { "value-" + $0.dropFirst("/3/device/".count) } == $0.3 })
        // Both connections open; the second may finish its handshake after the first answered all 50.
        #expect(await eventually { pool.statistics.readyConnections == 2 })
        await pool.shutdown()
    }

    @Test func opensslServerWithoutH2FailsWithAnALPNError() async throws {
        let certificate = try TestCertificate.make()
        let port = freeLoopbackPort()
        let server = try TestServerProcess(
            "/usr/bin/openssl",
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate.certificateFile, "-key",
                certificate.keyFile, "-alpn", "http/1.1", "-www", "-quiet",
            ], log: certificate.directory + "/s_server.log")
        defer { server.stop() }
        try await server.waitForPort(port)
        let pool = try pool(port: port, certificate: certificate)
        let error = await #expect(throws: HTTP2ClientError.self) {
            try await pool.send(HTTP2Request(method: "GET", path: "/"))
        }
        #expect(error?.code == .http2NotNegotiated)
        #expect(error?.message.contains("h2") == true)
        await pool.shutdown()
    }
}
