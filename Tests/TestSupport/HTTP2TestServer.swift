// Test fixtures for the HTTP/2 client: self-signed certificates made with the openssl CLI, free loopback
// ports, and a scriptable TLS HTTP/2 server (nghttp2 server session, one thread per connection) that can
// delay, stall, reset, send GOAWAY, change SETTINGS mid-connection, go silent, and counts what it sees.
import CNghttp2
import COpenSSL
import ChildProcesses
import Foundation
import Glibc
import Synchronization
@testable import HTTP2
import Platform

/// A self-signed certificate and key for `localhost` / 127.0.0.1 in a temporary directory.
package struct TestCertificate: Sendable {
    package let directory: String
    package let certificateFile: String
    package let keyFile: String

    package static func make(commonName: String = "localhost", subjectAltName: String = "DNS:localhost,IP:127.0.0.1")
        throws -> TestCertificate
    {
        let directory = NSTemporaryDirectory() + "h2test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = directory + "/cert.pem"
        let key = directory + "/key.pem"
        let status = try runProcess("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=\(commonName)",
            "-addext", "subjectAltName=\(subjectAltName)",
        ])
        guard status == 0 else { throw TestFailure("openssl req failed with status \(status)") }
        return TestCertificate(directory: directory, certificateFile: certificate, keyFile: key)
    }
}

package struct TestFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

@discardableResult
package func runProcess(_ path: String, _ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}


/// Waits until `condition` holds, polling every 10 ms, for at most `timeout`.
package func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + timeout
    while clock.now < end {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

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
        /// Once this many requests arrived on the first connection, send GOAWAY whose last-stream-id is the
        /// id of the `lastProcessed`-th request; only requests up to it are answered. Later connections
        /// behave normally.
        package var goaway: (afterRequests: Int, lastProcessed: Int)?
        /// The ALPN protocol to select; nil selects none.
        package var alpn: String? = "h2"
        /// Connections whose number (1-based) is listed here go silent once the client's SETTINGS
        /// arrive: nothing more is read or written, so neither requests nor PINGs are answered.
        package var silentConnections: Set<Int> = []
        package var reply: @Sendable (Request) -> Reply = { _ in .respond(status: 200) }

        package init(
            maximumConcurrentStreams: UInt32? = 100, lowerLimit: (afterRequests: Int, to: UInt32)? = nil,
            goaway: (afterRequests: Int, lastProcessed: Int)? = nil, alpn: String? = "h2",
            silentConnections: Set<Int> = [], reply: @escaping @Sendable (Request) -> Reply = { _ in .respond(status: 200) }
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

    package init(options: Options = Options(), certificate: TestCertificate? = nil, port: Int? = nil) throws {
        self.options = options
        self.certificate = try certificate ?? TestCertificate.make()
        let chosenPort = port ?? freeLoopbackPort()
        self.port = chosenPort
        alpnWire = options.alpn.map { [UInt8($0.utf8.count)] + Array($0.utf8) } ?? []

        context = SSL_CTX_new(TLS_server_method())
        guard SSL_CTX_use_certificate_chain_file(context, self.certificate.certificateFile) == 1,
            SSL_CTX_use_PrivateKey_file(context, self.certificate.keyFile, SSL_FILETYPE_PEM) == 1
        else { throw TestFailure("cannot load the test certificate") }

        listenFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listenFD, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withLoopbackAddress(port: chosenPort) { bind(listenFD, $0, $1) }
        guard bound == 0, listen(listenFD, 64) == 0 else {
            close(listenFD)
            throw TestFailure("cannot listen on 127.0.0.1:\(chosenPort): \(String(cString: strerror(errno)))")
        }
        SSL_CTX_set_alpn_select_cb(context, { _, out, outLength, offered, offeredLength, argument in
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
        _ = await eventually(timeout: .seconds(5)) { threads.withLock { $0 } == 0 }
        close(listenFD)
    }

    /// Selects the configured protocol if the client offers it; otherwise answers like a server that
    /// does not speak it: a fatal no_application_protocol alert (RFC 7301). With no protocol configured,
    /// ALPN is ignored.
    private func selectALPN(_ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
                            _ outLength: UnsafeMutablePointer<UInt8>?,
                            _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32) -> Int32 {
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
            let clientFD = accept(listenFD, nil, nil)
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

    fileprivate func threadStarted() { threads.withLock { $0 += 1 } }
    fileprivate func threadEnded() { threads.withLock { $0 -= 1 } }
    fileprivate var isStopped: Bool { stopped.load(ordering: .acquiring) }
    fileprivate var sslContext: OpaquePointer { context }
    fileprivate var serverOptions: Options { options }
    fileprivate func update(_ body: (inout Counters) -> Void) { counters.withLock { body(&$0) } }
}

/// One accepted connection, served on its own thread with blocking TLS and a 5 ms poll.
private final class TestServerConnection {
    package struct PendingStream {
        var method = ""
        var path = ""
        var headers: [(String, String)] = []
        var body: [UInt8] = []
    }

    package struct ScheduledReply {
        var at: ContinuousClock.Instant
        var streamID: Int32
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
    }

    package let server: HTTP2TestServer
    package let fd: Int32
    package let number: Int
    package var ssl: OpaquePointer?
    package var session: OpaquePointer?
    package var pending: [Int32: PendingStream] = [:]
    package var open: Set<Int32> = []
    package var scheduled: [ScheduledReply] = []
    package var bodies: [Int32: ([UInt8], Int)] = [:]
    package var arrivedStreamIDs: [Int32] = []
    package var highestStreamSeen: Int32 = 0
    package var announcedLimit: UInt32?
    package var acknowledgedLimit: UInt32?
    package var limitChangeSent = false
    package var goawaySent = false
    package var lastProcessedStreamID: Int32 = Int32.max
    package var heldUntilGoaway: [Int32] = []
    package var goneSilent = false

    package init(server: HTTP2TestServer, fd: Int32, number: Int) {
        self.server = server
        self.fd = fd
        self.number = number
    }

    package func run() {
        CurrentThread.blockSIGPIPE()
        server.threadStarted()
        defer {
            if let session { nghttp2_session_del(session) }
            if let ssl { SSL_free(ssl) }
            close(fd)
            server.threadEnded()
        }
        ssl = SSL_new(server.sslContext)
        SSL_set_fd(ssl, fd)
        guard SSL_accept(ssl) == 1 else { return }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        installCallbacks(callbacks)
        nghttp2_session_server_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        var entries: [nghttp2_settings_entry] = []
        if let limit = server.serverOptions.maximumConcurrentStreams {
            entries.append(nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: limit))
            announcedLimit = limit
        }
        nghttp2_submit_settings(session, 0, entries, entries.count)
        var buffer = [UInt8](repeating: 0, count: 16384)
        // Blocking reads would hang the thread: make the socket non-blocking and poll.
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        while !server.isStopped {
            guard flush() else { return }
            if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 { return }
            var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if SSL_pending(ssl) == 0 { _ = poll(&pollFD, 1, 5) }
            while true {
                let count = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
                if count > 0 {
                    let result = buffer.withUnsafeBytes {
                        nghttp2_session_mem_recv(session, $0.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            Int(count))
                    }
                    if result < 0 { return }
                    continue
                }
                let code = SSL_get_error(ssl, count)
                if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE { break }
                return
            }
            sendDueReplies()
            if goneSilent {
                while !server.isStopped { usleep(5_000) }
                return
            }
        }
    }

    private func flush() -> Bool {
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 { return false }
            if count == 0 { return true }
            var offset = 0
            while offset < count {
                let written = SSL_write(ssl, data! + offset, Int32(count - offset))
                if written > 0 {
                    offset += Int(written)
                    continue
                }
                let code = SSL_get_error(ssl, written)
                guard code == SSL_ERROR_WANT_WRITE || code == SSL_ERROR_WANT_READ else { return false }
                var pollFD = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&pollFD, 1, 5)
                if server.isStopped { return false }
            }
        }
    }

    private func sendDueReplies() {
        let now = ContinuousClock.now
        let due = scheduled.filter { $0.at <= now }
        scheduled.removeAll { $0.at <= now }
        for reply in due { submitResponse(reply) }
    }

    private func installCallbacks(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks) { _, header, user in
            let connection = Unmanaged<TestServerConnection>.fromOpaque(user!).takeUnretainedValue()
            connection.onBeginFrame(header!.pointee)
            return 0
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            let connection = Unmanaged<TestServerConnection>.fromOpaque(user!).takeUnretainedValue()
            connection.pending[frame!.pointee.hd.stream_id] = PendingStream()
            connection.streamAccepted(frame!.pointee.hd.stream_id)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            let connection = Unmanaged<TestServerConnection>.fromOpaque(user!).takeUnretainedValue()
            let key = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
            let text = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
            let id = frame!.pointee.hd.stream_id
            switch key {
            case ":method": connection.pending[id]?.method = text
            case ":path": connection.pending[id]?.path = text
            default: if !key.hasPrefix(":") { connection.pending[id]?.headers.append((key, text)) }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            let connection = Unmanaged<TestServerConnection>.fromOpaque(user!).takeUnretainedValue()
            connection.pending[streamID]?.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            let connection = Unmanaged<TestServerConnection>.fromOpaque(user!).takeUnretainedValue()
            connection.onFrame(frame!)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, user in
            let connection = Unmanaged<TestServerConnection>.fromOpaque(user!).takeUnretainedValue()
            if connection.open.remove(streamID) != nil {
                connection.server.update { $0.activeStreams -= 1 }
            }
            connection.pending[streamID] = nil
            connection.bodies[streamID] = nil
            return 0
        }
    }

    /// Sees every HEADERS frame before nghttp2 decides to accept or refuse it, so a stream opened over
    /// the limit is counted even though nghttp2 refuses it.
    private func onBeginFrame(_ header: nghttp2_frame_hd) {
        guard UInt32(header.type) == NGHTTP2_HEADERS.rawValue, header.stream_id > highestStreamSeen else { return }
        highestStreamSeen = header.stream_id
        let limit = acknowledgedLimit ?? announcedLimit
        if let limit, open.count >= Int(limit) { server.update { $0.limitViolations += 1 } }
    }

    private func streamAccepted(_ streamID: Int32) {
        open.insert(streamID)
        server.update { counters in
            counters.activeStreams += 1
            counters.maximumActiveStreams = max(counters.maximumActiveStreams, open.count)
        }
    }

    private func onFrame(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        switch UInt32(header.type) {
        case NGHTTP2_SETTINGS.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0, limitChangeSent {
                acknowledgedLimit = server.serverOptions.lowerLimit?.to
            }
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0,
                server.serverOptions.silentConnections.contains(number)
            {
                goneSilent = true
            }
        case NGHTTP2_RST_STREAM.rawValue:
            server.update { $0.resetsReceived += 1 }
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 { requestComplete(header.stream_id) }
        default:
            break
        }
    }

    private func requestComplete(_ streamID: Int32) {
        guard let stream = pending[streamID] else { return }
        arrivedStreamIDs.append(streamID)
        let options = server.serverOptions
        let request = HTTP2TestServer.Request(connection: number, streamID: streamID, method: stream.method,
            path: stream.path, headers: stream.headers, body: stream.body)
        if let change = options.lowerLimit, !limitChangeSent, arrivedStreamIDs.count >= change.afterRequests {
            limitChangeSent = true
            let entry = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: change.to)]
            nghttp2_submit_settings(session, 0, entry, 1)
        }
        if let goaway = options.goaway, number == 1 {
            if !goawaySent {
                heldUntilGoaway.append(streamID)
                if arrivedStreamIDs.count >= goaway.afterRequests {
                    goawaySent = true
                    lastProcessedStreamID = arrivedStreamIDs.sorted()[goaway.lastProcessed - 1]
                    nghttp2_submit_goaway(session, 0, lastProcessedStreamID, NGHTTP2_NO_ERROR.rawValue, nil, 0)
                    for held in heldUntilGoaway where held <= lastProcessedStreamID {
                        if let stream = pending[held] {
                            process(HTTP2TestServer.Request(connection: number, streamID: held, method: stream.method,
                                path: stream.path, headers: stream.headers, body: stream.body))
                        }
                    }
                }
                return
            }
            if streamID > lastProcessedStreamID { return }
        }
        process(request)
    }

    private func process(_ request: HTTP2TestServer.Request) {
        server.update { counters in
            counters.requests += 1
            counters.requestsPerConnection[number, default: 0] += 1
            counters.paths.append(request.path)
        }
        switch server.serverOptions.reply(request) {
        case .respond(let status, let headers, let body, let delay):
            let reply = ScheduledReply(at: ContinuousClock.now + delay, streamID: request.streamID, status: status,
                headers: headers, body: body)
            if delay == .zero { submitResponse(reply) } else { scheduled.append(reply) }
        case .stall:
            break
        case .reset(let code):
            nghttp2_submit_rst_stream(session, 0, request.streamID, code)
        }
    }

    private func submitResponse(_ reply: ScheduledReply) {
        guard open.contains(reply.streamID) else { return }
        var fields: [(String, String)] = [(":status", String(reply.status))] + reply.headers
        if !reply.body.isEmpty { fields.append(("content-length", String(reply.body.count))) }
        var bytes: [UInt8] = []
        var ranges: [(Int, Int, Int, Int)] = []
        for (name, value) in fields {
            let nameStart = bytes.count
            bytes += Array(name.utf8)
            let valueStart = bytes.count
            bytes += Array(value.utf8)
            ranges.append((nameStart, name.utf8.count, valueStart, value.utf8.count))
        }
        var provider = nghttp2_data_provider()
        if !reply.body.isEmpty {
            bodies[reply.streamID] = (reply.body, 0)
            provider.read_callback = { _, streamID, buffer, length, flags, _, user in
                let connection = Unmanaged<TestServerConnection>.fromOpaque(user!).takeUnretainedValue()
                guard let (body, offset) = connection.bodies[streamID] else { return 0 }
                let count = min(length, body.count - offset)
                body.withUnsafeBytes {
                    buffer!.update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset, count: count)
                }
                if offset + count == body.count { flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
                connection.bodies[streamID] = (body, offset + count)
                return count
            }
        }
        let hasBody = !reply.body.isEmpty
        bytes.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            let nva = ranges.map { nghttp2_nv(name: base + $0.0, value: base + $0.2, namelen: $0.1, valuelen: $0.3,
                flags: 0) }
            _ = hasBody ? nghttp2_submit_response(session, reply.streamID, nva, nva.count, &provider)
                : nghttp2_submit_response(session, reply.streamID, nva, nva.count, nil)
        }
    }
}
