// A scriptable TLS HTTP/2 server for the HTTP/2 layer's own tests (nghttp2 server session, one thread per
// connection): it can delay, stall, reset, send GOAWAY, change SETTINGS mid-connection, go silent, and counts
// what it sees. Tests of the APNs client use the APNs simulator and its scripted faults instead.

import COpenSSL
import ChildProcesses
import Foundation
import Glibc
import Platform
import Synchronization

/// A scriptable HTTP/2 server over TLS on 127.0.0.1.
package final class HTTP2TestServer: @unchecked Sendable {
    /// What the server does with one complete request.
    package enum Reply: Sendable {
        case respond(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], delay: Duration = .zero)
        /// Never answer.
        case stall
        /// RST_STREAM with this HTTP/2 error code.
        case reset(UInt32)
    }

    package struct Request: Sendable {
        package var connection: Int
        package var streamID: Int32
        package var method: String
        package var path: String
        package var headers: [(String, String)]
        package var body: [UInt8]
    }

    package struct Options: Sendable {
        /// SETTINGS_MAX_CONCURRENT_STREAMS announced at the start; nil announces none.
        package var maximumConcurrentStreams: UInt32? = 100
        /// After this many requests on a connection, announce a new limit.
        package var lowerLimit: (afterRequests: Int, to: UInt32)?
        /// The connections (numbered from 1) whose limit `lowerLimit` lowers; nil: every connection.
        package var lowerLimitConnections: Set<Int>?
        /// Once this many requests arrived on the first connection, send GOAWAY whose last-stream-id is the
        /// id of the `lastProcessed`-th request; only requests up to it are answered. Later connections
        /// behave normally.
        package var goaway: (afterRequests: Int, lastProcessed: Int)?
        /// The ALPN protocol to select; nil selects none.
        package var alpn: String? = "h2"
        /// Connections whose number (1-based) is listed here go silent once the client's SETTINGS
        /// arrive: nothing more is read or written, so neither requests nor PINGs are answered.
        package var silentConnections: Set<Int> = []
        /// Whether the connection with this number (from 1) may go on with its TLS handshake: until it says
        /// yes, the connection's thread holds the handshake (polled every millisecond), as a far server's round
        /// trips would. Nil: at once.
        package var handshakeGate: (@Sendable (Int) -> Bool)?
        package var reply: @Sendable (Request) -> Reply = { _ in .respond(status: 200) }

        package init(
            maximumConcurrentStreams: UInt32? = 100, lowerLimit: (afterRequests: Int, to: UInt32)? = nil,
            goaway: (afterRequests: Int, lastProcessed: Int)? = nil, alpn: String? = "h2",
            silentConnections: Set<Int> = [],
            reply: @escaping @Sendable (Request) -> Reply = { _ in .respond(status: 200) }
        ) {
            self.maximumConcurrentStreams = maximumConcurrentStreams
            self.lowerLimit = lowerLimit
            self.goaway = goaway
            self.alpn = alpn
            self.silentConnections = silentConnections
            self.reply = reply
        }
    }

    package struct Counters: Sendable {
        package var connections = 0
        package var requests = 0
        package var activeStreams = 0
        package var maximumActiveStreams = 0
        /// New streams opened while the announced (and acknowledged) limit was already reached.
        package var limitViolations = 0
        package var resetsReceived = 0
        package var requestsPerConnection: [Int: Int] = [:]
        package var paths: [String] = []
    }

    package let port: Int
    package let certificate: TestCertificate
    private let options: Options
    private let listenFD: Int32
    private let context: OpaquePointer
    private let counters = Mutex(Counters())
    private let stopped = Atomic<Bool>(false)
    private let threads = Mutex(0)
    private let alpnWire: [UInt8]

    /// A server on the port a test had refusing connections until now: it listens on the refusing socket
    /// itself, so that the port stays the test's throughout.
    package convenience init(
        options: Options = Options(), certificate: TestCertificate? = nil, takingOver refusing: RefusingLoopbackPort
    ) throws {
        guard let socket = refusing.takeSocket() else { throw TestFailure("the refusing port was already released") }
        try self.init(options: options, certificate: certificate, port: nil, boundSocket: socket)
    }

    package convenience init(options: Options = Options(), certificate: TestCertificate? = nil, port: Int? = nil)
        throws
    {
        try self.init(options: options, certificate: certificate, port: port, boundSocket: nil)
    }

    private init(options: Options, certificate: TestCertificate?, port: Int?, boundSocket: Int32?) throws {
        self.options = options
        self.certificate = try certificate ?? TestCertificate.make()
        alpnWire = options.alpn.map { [UInt8($0.utf8.count)] + Array($0.utf8) } ?? []

        context = SSL_CTX_new(TLS_server_method())
        guard SSL_CTX_use_certificate_chain_file(context, self.certificate.certificateFile) == 1,
            SSL_CTX_use_PrivateKey_file(context, self.certificate.keyFile, SSL_FILETYPE_PEM) == 1
        else { throw TestFailure("cannot load the test certificate") }

        let listener = boundSocket ?? closeOnExecSocket()
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        // Without a port, port 0: the kernel picks one no other socket holds, and nothing can take it between
        // the pick and the bind (a port picked first and bound after was once taken by a test that needed
        // its own port refused).
        let bound = boundSocket != nil ? 0 : withLoopbackAddress(port: port ?? 0) { bind(listener, $0, $1) }
        guard bound == 0, listen(listener, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(listener)
            throw TestFailure("cannot listen on 127.0.0.1:\(port ?? 0): \(reason)")
        }
        listenFD = listener
        self.port = boundPort(of: listener)
        SSL_CTX_set_alpn_select_cb(
            context,
            { _, out, outLength, offered, offeredLength, argument in
                let server = Unmanaged<HTTP2TestServer>.fromOpaque(argument!).takeUnretainedValue()
                return server.selectALPN(out, outLength, offered, offeredLength)
            }, Unmanaged.passUnretained(self).toOpaque())
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit {
        SSL_CTX_free(context)
    }

    package var snapshot: Counters { counters.withLock { $0 } }

    /// Stops accepting, closes every connection, and waits for the threads to end.
    package func stop() async {
        stopped.store(true, ordering: .releasing)
        shutdown(listenFD, Int32(SHUT_RDWR))
        _ = await eventually { threads.withLock { $0 } == 0 }
        close(listenFD)
    }

    /// Selects the configured protocol if the client offers it; otherwise answers like a server that
    /// does not speak it: a fatal no_application_protocol alert (RFC 7301). With no protocol configured,
    /// ALPN is ignored.
    private func selectALPN(
        _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
        _ outLength: UnsafeMutablePointer<UInt8>?,
        _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32
    ) -> Int32 {
        guard !alpnWire.isEmpty else { return SSL_TLSEXT_ERR_NOACK }
        let list = UnsafeBufferPointer(start: offered, count: Int(offeredLength))
        var index = 0
        while index < list.count {
            let length = Int(list[index])
            if length == alpnWire.count - 1, index + 1 + length <= list.count,
                list[(index + 1)...(index + length)].elementsEqual(alpnWire.dropFirst())
            {
                out?.pointee = offered! + index + 1
                outLength?.pointee = UInt8(length)
                return SSL_TLSEXT_ERR_OK
            }
            index += 1 + length
        }
        return SSL_TLSEXT_ERR_ALERT_FATAL
    }

    private func acceptLoop() {
        threads.withLock { $0 += 1 }
        defer { threads.withLock { $0 -= 1 } }
        while !stopped.load(ordering: .acquiring) {
            var pollFD = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&pollFD, 1, 20) > 0 else { continue }
            let clientFD = acceptCloseOnExec(listenFD)
            if clientFD < 0 { continue }
            let number = counters.withLock { counters -> Int in
                counters.connections += 1
                return counters.connections
            }
            let thread = Thread { [self] in
                let connection = TestServerConnection(server: self, fd: clientFD, number: number)
                connection.run()
            }
            thread.start()
        }
    }

    func threadStarted() { threads.withLock { $0 += 1 } }
    func threadEnded() { threads.withLock { $0 -= 1 } }
    var isStopped: Bool { stopped.load(ordering: .acquiring) }
    var sslContext: OpaquePointer { context }
    var serverOptions: Options { options }
    func update(_ body: (inout Counters) -> Void) { counters.withLock { body(&$0) } }
}
