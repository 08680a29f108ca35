// The CONNECT tunnel through an HTTP proxy: proxy URLs and NO_PROXY as curl reads them, the proxy's answer
// parsed and bounded, and a pool going through a small in-test CONNECT responder that relays to the test
// server or answers what real proxies answer less often (502, non-HTTP, huge headers, silence).
// The main tests, through a real proxy (tinyproxy), are in Tests/System/test_proxy.py.

import ChildProcesses
import Foundation
import Glibc
import Platform
import Synchronization
import TestSupport
import Testing

@testable import HTTP2

@Suite("HTTP proxy: URLs, NO_PROXY, the CONNECT answer")
struct ProxyConfigurationTests {
    @Test func proxyURLsParseAndInlineCredentialsAreRefusedWithoutShowingThem() throws {
        let proxy = try HTTPProxy(url: "http://proxy.internal:3128/")
        #expect(proxy.host == "proxy.internal" && proxy.port == 3128 && proxy.endpoint == "proxy.internal:3128")
        #expect(try HTTPProxy(url: "10.0.0.1:8080").port == 8080)
        #expect(try HTTPProxy(url: "http://[::1]:3128").endpoint == "[::1]:3128")
        let inline = #expect(throws: HTTP2ClientError.self) {
            try HTTPProxy(url: "http://user:hunter2@proxy:3128", source: "apns.proxy")
        }
        #expect(inline?.message.contains("apns.proxy_credentials_file") == true)
        #expect(inline?.message.contains("hunter2") == false)
        let https = #expect(throws: HTTP2ClientError.self) { try HTTPProxy(url: "https://proxy:3128") }
        #expect(https?.message.contains("only http://") == true)
        let noPort = #expect(throws: HTTP2ClientError.self) { try HTTPProxy(url: "http://proxy") }
        #expect(noPort?.message.contains("port is missing") == true)
    }

    @Test(arguments: [
        ("api.push.apple.com", 443, "apple.com", true),
        ("api.push.apple.com", 443, ".apple.com", true),
        ("api.push.apple.com", 443, "push.apple.com:443", true),
        ("api.push.apple.com", 443, "push.apple.com:2197", false),
        ("api.push.apple.com", 443, "*", true),
        ("api.push.apple.com", 443, "example.com, localhost", false),
        ("api.push.apple.com", 443, "pple.com", false),
        ("API.Push.Apple.COM", 443, " APPLE.com ", true),
        ("127.0.0.1", 8443, "127.0.0.1", true),
        ("::1", 8443, "[::1]:8443", true),
        ("::1", 8443, "::1", true),
        ("api.push.apple.com", 443, "", false),
    ])
    func noProxyMatchesAsCurlDoes(host: String, port: Int, noProxy: String, bypasses: Bool) {
        #expect(HTTPProxy.bypasses(host: host, port: port, noProxy: noProxy) == bypasses)
    }

    @Test func theEnvironmentChoosesLowerCaseFirstAndNoProxyExempts() throws {
        let both = ["https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"]
        #expect(try HTTPProxy.fromEnvironment(both, host: "api.push.apple.com", port: 443)?.host == "lower")
        #expect(try HTTPProxy.fromEnvironment(["HTTPS_PROXY": "http://upper:2"], host: "a", port: 443)?.port == 2)
        #expect(try HTTPProxy.fromEnvironment([:], host: "a", port: 443) == nil)
        let exempt = ["HTTPS_PROXY": "http://upper:2", "no_proxy": "apple.com"]
        #expect(try HTTPProxy.fromEnvironment(exempt, host: "api.push.apple.com", port: 443) == nil)
        let bad = #expect(throws: HTTP2ClientError.self) {
            try HTTPProxy.fromEnvironment(["HTTPS_PROXY": "http://u:p4ss@x:1"], host: "a", port: 443)
        }
        #expect(bad?.message.contains("HTTPS_PROXY") == true && bad?.message.contains("p4ss") == false)
    }

    @Test func credentialsComeFromAFileAndBecomeABasicHeader() throws {
        let path = NSTemporaryDirectory() + "proxy-credentials-\(getpid())"
        try "Aladdin:open sesame\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let credentials = try HTTPProxy.Credentials(contentsOfFile: path)
        #expect(credentials.username == "Aladdin" && credentials.password == "open sesame")
        // RFC 7617's example.
        #expect(credentials.basicAuthorization == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        #expect(!credentials.description.contains("sesame"))
        try "no colon here\n".write(toFile: path, atomically: true, encoding: .utf8)
        let bad = #expect(throws: HTTP2ClientError.self) { try HTTPProxy.Credentials(contentsOfFile: path) }
        #expect(bad?.message.contains("user:password") == true && bad?.message.contains("no colon") == false)
    }

    @Test func theAnswerIsParsedOnlyOnceCompleteAndIsBounded() {
        #expect(ProxyTunnel.parse(Array("HTTP/1.1 200 Connection established\r\n".utf8)) == .incomplete)
        #expect(
            ProxyTunnel.parse(Array("HTTP/1.0 200 Connection established\r\nProxy-agent: x\r\n\r\n".utf8))
                == .complete(status: 200, reason: "Connection established", extraBytes: 0))
        #expect(
            ProxyTunnel.parse(Array("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n<html>".utf8))
                == .complete(status: 407, reason: "Proxy Authentication Required", extraBytes: 6))
        guard case .malformed = ProxyTunnel.parse(Array("SSH-2.0-OpenSSH_9.2\r\n\r\n".utf8)) else {
            Issue.record("a non-HTTP answer is malformed")
            return
        }
        let huge = Array("HTTP/1.1 200 OK\r\nX: ".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 17_000)
        guard case .malformed(let why) = ProxyTunnel.parse(huge) else {
            Issue.record("headers beyond the bound are refused")
            return
        }
        #expect(why.contains("16384 bytes"))
    }

    @Test func refusalsAreNamedForWhatTheOperatorFixes() {
        let credentials = HTTPProxy.Credentials(username: "u", password: "pw-secret", source: "/etc/proxy-creds")
        let plain = HTTPProxy(host: "proxy", port: 3128)
        let withCredentials = HTTPProxy(host: "proxy", port: 3128, credentials: credentials)
        let required = ProxyTunnel.refusal(status: 407, reason: "", proxy: plain, target: "api.push.apple.com:443")
        #expect(required.code == .proxyAuthenticationRequired && required.message.contains("requires authentication"))
        let refused = ProxyTunnel.refusal(status: 407, reason: "", proxy: withCredentials, target: "a:443")
        #expect(refused.code == .proxyCredentialsRefused)
        #expect(refused.message.contains("refused the credentials in /etc/proxy-creds"))
        #expect(!refused.message.contains("pw-secret"))
        let forbidden = ProxyTunnel.refusal(status: 403, reason: "Forbidden", proxy: plain, target: "a:443")
        #expect(forbidden.code == .proxyForbidden && forbidden.message.contains("forbids CONNECT to a:443"))
        #expect(forbidden.endpoint == "proxy:3128")
        let other = ProxyTunnel.refusal(status: 502, reason: "Bad Gateway", proxy: plain, target: "a:443")
        #expect(other.code == .proxyRefused && other.message.contains("could not reach a:443"))
        #expect(
            HTTP2ClientError.Code.proxyCodes.allSatisfy {
                HTTP2ClientError($0, "", endpoint: "").requestWasNotProcessed
            })
    }
}

/// A CONNECT responder on loopback: reads one request head per connection, records it, and answers.
final class ScriptedConnectProxy: @unchecked Sendable {
    enum Answer: Sendable {
        /// 200, then relays bytes both ways to 127.0.0.1:port.
        case tunnel(toPort: Int)
        /// These bytes, then close.
        case respond(String)
        /// Reads the request and never answers.
        case silence
    }

    let port: Int
    private let listener: Int32
    private let answer: Answer
    let requests = Mutex<[String]>([])
    private let stopped = Atomic<Bool>(false)

    init(_ answer: Answer) throws {
        self.answer = answer
        let fd = closeOnExecSocket()
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withLoopbackAddress(port: 0) { bind(fd, $0, $1) }
        precondition(bound == 0 && listen(fd, 16) == 0, "cannot listen: \(String(cString: strerror(errno)))")
        listener = fd
        port = boundPort(of: fd)
        try NamedThread.detached(name: "test-proxy") { [self] in acceptLoop() }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .relaxed) {
            let client = acceptCloseOnExec(listener)
            if client < 0 { return }
            try? NamedThread.detached(name: "test-proxy-conn") { [self] in serve(client) }
        }
        close(listener)
    }

    private func serve(_ client: Int32) {
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
            guard recv(client, &byte, 1, 0) == 1 else {
                close(client)
                return
            }
            head.append(byte)
        }
        requests.withLock { $0.append(String(decoding: head, as: UTF8.self)) }
        switch answer {
        case .respond(let text):
            _ = text.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            close(client)
        case .silence:
            while recv(client, &byte, 1, 0) == 1 {}
            close(client)
        case .tunnel(let port):
            let server = closeOnExecSocket()
            let connected = withLoopbackAddress(port: port) { connect(server, $0, $1) }
            guard connected == 0 else {
                close(server)
                close(client)
                return
            }
            let established = "HTTP/1.1 200 Connection established\r\n\r\n"
            _ = established.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            try? NamedThread.detached(name: "test-proxy-up") { Self.relay(from: client, to: server) }
            Self.relay(from: server, to: client)
        }
    }

    private static func relay(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            if count <= 0 || send(destination, buffer, count, Int32(MSG_NOSIGNAL)) != count { break }
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
    }
}

@Suite("HTTP proxy: a pool through a CONNECT tunnel", .serialized)
struct ProxyTunnelPoolTests {
    static let group = EventLoopGroup(threadCount: 1)

    func makePool(
        _ server: HTTP2TestServer, proxyPort: Int, credentials: HTTPProxy.Credentials? = nil,
        connectTimeout: Duration = .seconds(3)
    ) throws -> ConnectionPool {
        try makeTestPool(server, group: Self.group) { configuration in
            configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxyPort, credentials: credentials)
            configuration.connectTimeout = connectTimeout
        }
    }

    @Test func requestsGoThroughTheTunnelWithTLSVerifiedAgainstTheServer() async throws {
        let server = try HTTP2TestServer()
        let proxy = try ScriptedConnectProxy(.tunnel(toPort: server.port))
        let credentials = HTTPProxy.Credentials(username: "user", password: "pass", source: "a file")
        let pool = try makePool(server, proxyPort: proxy.port, credentials: credentials)
        for _ in 0..<3 {
            #expect(try await pool.send(HTTP2Request(path: "/3/device/x")).status == 200)
        }
        let requests = proxy.requests.withLock { $0 }
        #expect(requests.count == 1, "one connection, one tunnel")
        let head = try #require(requests.first)
        #expect(head.hasPrefix("CONNECT 127.0.0.1:\(server.port) HTTP/1.1\r\n"))
        #expect(head.contains("\r\nHost: 127.0.0.1:\(server.port)\r\n"))
        #expect(head.contains("\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n"))
        #expect(server.snapshot.requests == 3)
        await pool.shutdown()
        proxy.stop()
        await server.stop()
    }

    @Test func aServerCertificateFromAnotherCAIsRejectedThroughTheTunnel() async throws {
        let server = try HTTP2TestServer()
        let proxy = try ScriptedConnectProxy(.tunnel(toPort: server.port))
        let other = try TestCertificate.make()
        let pool = try makeTestPool(server, group: Self.group) { configuration in
            configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port)
            configuration.tls = TLSConfiguration(trustRoots: .caFile(other.certificateFile))
        }
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .certificateVerificationFailed)
        await pool.shutdown()
        proxy.stop()
        await server.stop()
    }

    @Test(arguments: [
        ("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", "could not reach"),
        ("SSH-2.0-OpenSSH_9.2\r\n\r\n", "is not an HTTP proxy"),
        ("HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 17_000) + "\r\n\r\n", "16384 bytes of headers"),
        ("HTTP/1.1 200 OK\r\n\r\nunexpected", "bytes after its 200 answer"),
        ("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", "requires authentication"),
    ])
    func oddAnswersAreNamedAsTheProxys(answer: String, expected: String) async throws {
        let server = try HTTP2TestServer()
        let proxy = try ScriptedConnectProxy(.respond(answer))
        let pool = try makePool(server, proxyPort: proxy.port)
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(
            error.map { HTTP2ClientError.Code.proxyCodes.contains($0.code) } == true, "\(String(describing: error))")
        #expect(error?.message.contains(expected) == true, "\(String(describing: error))")
        #expect(error?.endpoint == "127.0.0.1:\(proxy.port)")
        #expect(server.snapshot.connections == 0)
        await pool.shutdown()
        proxy.stop()
        await server.stop()
    }

    @Test func aProxyThatNeverAnswersIsCaughtByTheConnectTimeout() async throws {
        let server = try HTTP2TestServer()
        let proxy = try ScriptedConnectProxy(.silence)
        let pool = try makePool(server, proxyPort: proxy.port, connectTimeout: .milliseconds(300))
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .connectTimeout)
        #expect(error?.message.contains("waiting for the proxy 127.0.0.1:\(proxy.port) to answer CONNECT") == true)
        await pool.shutdown()
        proxy.stop()
        await server.stop()
    }

    @Test func anUnreachableProxyIsNamedNotTheServer() async throws {
        let server = try HTTP2TestServer()
        let refusing = try RefusingLoopbackPort()
        let port = refusing.port
        let pool = try makePool(server, proxyPort: port)
        let error = await #expect(throws: HTTP2ClientError.self) { try await pool.send(HTTP2Request(path: "/")) }
        #expect(error?.code == .proxyUnreachable)
        #expect(error?.message.contains("cannot reach the proxy 127.0.0.1:\(port)") == true)
        await pool.shutdown()
        refusing.release()
        await server.stop()
    }
}
