// One HTTP/2 client connection: a non-blocking TCP socket, an OpenSSL TLS session (ALPN h2) and an
// nghttp2 client session, driven by one EventLoop thread. The pool decides what to send; this type
// connects, frames, reads, enforces deadlines and PINGs, and reports what happened.
import CNghttp2
import COpenSSL
import Dispatch
import Glibc
import Platform
import Synchronization

/// What a connection tells its pool. Called on the connection's loop thread.
protocol HTTP2ConnectionDelegate: AnyObject, Sendable {
    /// TLS and the server's first SETTINGS are done; `streamLimit` streams may be open at once.
    func connectionDidBecomeReady(_ connection: HTTP2Connection, streamLimit: Int)
    /// The server changed SETTINGS_MAX_CONCURRENT_STREAMS (already capped by the pool's maximum).
    func connection(_ connection: HTTP2Connection, streamLimitChangedTo limit: Int)
    /// GOAWAY arrived (or the connection retired itself): no new streams; open streams may finish.
    func connectionIsGoingAway(_ connection: HTTP2Connection)
    /// `count` streams the pool dispatched here have ended (or were never opened).
    func connection(_ connection: HTTP2Connection, didFinishStreams count: Int)
    /// The connection is closed; `error` is nil for an orderly close. `wasReady` tells a failed
    /// connect from a connection that died after working.
    func connectionDidClose(_ connection: HTTP2Connection, error: HTTP2ClientError?, wasReady: Bool)
}

/// The per-connection limits, in loop units (nanoseconds).
struct HTTP2ConnectionSettings: Sendable {
    var host: String
    var port: Int
    var connectTimeout: UInt64
    var pingInterval: UInt64
    var pingTimeout: UInt64
    var maximumResponseBodyBytes: Int
    /// Our own cap on concurrent streams, applied on top of the server's setting.
    var maximumConcurrentStreams: Int
    /// After this many streams the connection retires (stream ids are finite: 2^31 / 2).
    var maximumStreamsPerConnection: Int
    var endpoint: String { IPAddress.isLiteral(host) && host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// An HTTP/2 connection owned by one `EventLoop`.
///
/// - Important: apart from `loop`, `endpoint` and `id`, everything is confined to the loop thread.
///   Other threads reach it only through `loop.enqueue` / `loop.execute`.
final class HTTP2Connection: @unchecked Sendable {
    enum State: String {
        case idle, resolving, connecting, handshaking, awaitingSettings, ready, goingAway, closed
    }

    let loop: EventLoop
    let endpoint: String
    /// Unique in the process; reported on responses.
    let id: UInt64
    private static let nextID = Atomic<UInt64>(1)
    private let settings: HTTP2ConnectionSettings
    private let tls: TLSContext
    private weak var delegate: (any HTTP2ConnectionDelegate)?

    // Mutable state below is loop-confined; `@exclusivity(unchecked)` drops the dynamic exclusivity checks
    // that would otherwise run on every access in the per-frame paths.
    @exclusivity(unchecked) var isQueuedForFlush = false
    @exclusivity(unchecked) var isQueuedForReport = false
    @exclusivity(unchecked) private(set) var state = State.idle
    @exclusivity(unchecked) private var fd: Int32 = -1
    @exclusivity(unchecked) private var ssl: OpaquePointer?
    @exclusivity(unchecked) private var session: OpaquePointer?
    @exclusivity(unchecked) private var registration: UInt64 = 0
    @exclusivity(unchecked) private var isWatched = false
    @exclusivity(unchecked) private var watchingWritable = false
    @exclusivity(unchecked) private var addresses: [SocketAddress] = []
    @exclusivity(unchecked) private var addressIndex = 0
    @exclusivity(unchecked) private var lastConnectError = ""
    @exclusivity(unchecked) private var connectDeadline: UInt64 = 0
    @exclusivity(unchecked) private var streams: [Int32: HTTP2StreamTicket] = [:]
    /// The stream the last callback was about: nghttp2 calls back several times in a row for one stream
    /// (each header, the frame, the close), and a comparison is cheaper than a dictionary lookup.
    @exclusivity(unchecked) private var lastLookedUp: (streamID: Int32, ticket: HTTP2StreamTicket)?
    @exclusivity(unchecked) private var outBuffer: [UInt8] = []
    @exclusivity(unchecked) private var outOffset = 0
    @exclusivity(unchecked) private var finishedSinceReport = 0
    @exclusivity(unchecked) private var lastReadAt: UInt64 = 0
    @exclusivity(unchecked) private var pingSentAt: UInt64 = 0
    @exclusivity(unchecked) private var goawayLastStreamID: Int32 = -1
    @exclusivity(unchecked) private var goawayDescription = ""
    @exclusivity(unchecked) private var streamLimit = 0
    @exclusivity(unchecked) private var streamsOpened = 0
    @exclusivity(unchecked) private var wasReady = false
    @exclusivity(unchecked) private var closingGracefully = false
    @exclusivity(unchecked) private var headerFields: [nghttp2_nv] = []

    /// Bytes of encoded frames gathered before one SSL_write; bounds memory per connection.
    private static let outputBatchBytes = 64 * 1024

    init(loop: EventLoop, settings: HTTP2ConnectionSettings, tls: TLSContext, delegate: any HTTP2ConnectionDelegate) {
        self.loop = loop
        self.settings = settings
        self.tls = tls
        self.delegate = delegate
        self.endpoint = settings.endpoint
        self.id = Self.nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    /// Number of streams open or queued in the session (loop thread).
    var openStreamCount: Int { streams.count }

    // MARK: Connecting

    /// Starts resolving and connecting. Loop thread.
    func start() {
        guard state == .idle else { return }
        registration = loop.register(self)
        connectDeadline = MonotonicClock.now() &+ settings.connectTimeout
        state = .resolving
        let host = settings.host
        let port = settings.port
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
        guard state == .resolving else { return }
        switch result {
        case .success(let resolved):
            addresses = resolved
            addressIndex = 0
            connectToNextAddress()
        case .failure(let error):
            close(error)
        }
    }

    private func connectToNextAddress() {
        while addressIndex < addresses.count {
            let address = addresses[addressIndex]
            addressIndex += 1
            let socketFD = socket(Int32(address.family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard socketFD >= 0 else {
                lastConnectError = "cannot create a socket: \(String(cString: strerror(errno)))"
                continue
            }
            var one: Int32 = 1
            setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let result = address.withSockAddr { connect(socketFD, $0, $1) }
            if result == 0 || errno == EINPROGRESS {
                fd = socketFD
                state = .connecting
                loop.watch(fd: fd, registration: registration, readable: false, writable: true, add: true)
                isWatched = true
                watchingWritable = true
                return
            }
            lastConnectError = "connect to \(address) failed: \(String(cString: strerror(errno)))"
            Glibc.close(socketFD)
        }
        close(HTTP2ClientError(.connectFailed, lastConnectError.isEmpty ? "no address to connect to" : lastConnectError,
            endpoint: endpoint))
    }

    private func finishTCPConnect() {
        var socketError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &socketError, &length)
        if socketError != 0 {
            let reason = String(cString: strerror(socketError))
            lastConnectError = "connect to \(addresses[addressIndex - 1]) failed: \(reason)"
            loop.unwatch(fd: fd)
            isWatched = false
            Glibc.close(fd)
            fd = -1
            connectToNextAddress()
            return
        }
        guard let ssl = tls.makeSession(fileDescriptor: fd) else {
            close(HTTP2ClientError(.tlsHandshakeFailed, "cannot create a TLS session: \(OpenSSLError.drain())",
                endpoint: endpoint))
            return
        }
        self.ssl = ssl
        state = .handshaking
        continueHandshake()
    }

    private func continueHandshake() {
        guard let ssl else { return }
        OpenSSLError.clear()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            handshakeCompleted()
            return
        }
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ: setInterest(writable: false)
        case SSL_ERROR_WANT_WRITE: setInterest(writable: true)
        default: close(handshakeError(code))
        }
    }

    private func handshakeError(_ code: Int32) -> HTTP2ClientError {
        let verifyResult = ssl.map { SSL_get_verify_result($0) } ?? Int(X509_V_OK)
        if verifyResult != Int(X509_V_OK) {
            let reason = String(cString: X509_verify_cert_error_string(verifyResult))
            OpenSSLError.clear()
            return HTTP2ClientError(.certificateVerificationFailed,
                "the server's certificate was rejected: \(reason) (verified for '\(tls.serverName)' against "
                    + "\(tls.trustDescription); for a test server pass its CA with a CA file)",
                endpoint: endpoint)
        }
        let details = OpenSSLError.drain()
        if details.contains("no application protocol") {
            return HTTP2ClientError(.http2NotNegotiated,
                "the server refused ALPN 'h2' (TLS alert no_application_protocol); it does not speak HTTP/2, "
                    + "which APNs requires", endpoint: endpoint)
        }
        if code == SSL_ERROR_SYSCALL || code == SSL_ERROR_ZERO_RETURN, details == "no details" {
            let reason = errno == 0 ? "" : " (\(String(cString: strerror(errno))))"
            return HTTP2ClientError(.tlsHandshakeFailed,
                "the server closed the connection during the TLS handshake\(reason); is it a TLS server?",
                endpoint: endpoint)
        }
        return HTTP2ClientError(.tlsHandshakeFailed, "TLS handshake failed: \(details)", endpoint: endpoint)
    }

    private func handshakeCompleted() {
        guard let ssl else { return }
        var protocolBytes: UnsafePointer<UInt8>?
        var protocolLength: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &protocolBytes, &protocolLength)
        let selected = protocolBytes.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(protocolLength)),
            as: UTF8.self) } ?? ""
        guard selected == "h2" else {
            let what = selected.isEmpty ? "no protocol" : "'\(selected)'"
            close(HTTP2ClientError(.http2NotNegotiated,
                "the server did not select HTTP/2 by ALPN (it selected \(what)); APNs and this client need 'h2'",
                endpoint: endpoint))
            return
        }
        var newSession: OpaquePointer?
        let created = nghttp2_session_client_new(&newSession, HTTP2SessionCallbacks.shared,
            Unmanaged.passUnretained(self).toOpaque())
        guard created == 0, let newSession else {
            close(HTTP2ClientError(.protocolError, "cannot create an HTTP/2 session: \(nghttp2Error(created))",
                endpoint: endpoint))
            return
        }
        session = newSession
        var entries = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        nghttp2_submit_settings(newSession, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        state = .awaitingSettings
        lastReadAt = loop.iterationTime
        setInterest(writable: false)
        loop.markDirty(self)
        // The server's SETTINGS often arrive with the last handshake flight and sit in OpenSSL's buffer.
        readAvailable()
    }

    // MARK: I/O

    /// Called by the loop with the epoll events of this connection's socket.
    func handleEvents(_ events: UInt32) {
        switch state {
        case .connecting:
            finishTCPConnect()
        case .handshaking:
            continueHandshake()
        case .awaitingSettings, .ready, .goingAway:
            if events & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 {
                readAvailable()
            }
            if state != .closed, events & EPOLLOUT.rawValue != 0 {
                loop.markDirty(self)
            }
        case .idle, .resolving, .closed:
            break
        }
    }

    private func readAvailable() {
        guard let ssl, let session else { return }
        let buffer = loop.readBuffer
        let bytes = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        while true {
            let count = SSL_read(ssl, bytes, Int32(buffer.count))
            if count > 0 {
                lastReadAt = loop.iterationTime
                let consumed = nghttp2_session_mem_recv(session, bytes, Int(count))
                if consumed < 0 {
                    close(HTTP2ClientError(.protocolError,
                        "the HTTP/2 session failed on data from the server: \(nghttp2Error(Int32(consumed)))",
                        endpoint: endpoint))
                    return
                }
                if state == .closed { return }
                // Level-triggered epoll calls again if the socket still has data; skip the EAGAIN read.
                if Int(count) < buffer.count && SSL_has_pending(ssl) == 0 { break }
                continue
            }
            let code = SSL_get_error(ssl, count)
            if code == SSL_ERROR_WANT_READ { break }
            if code == SSL_ERROR_WANT_WRITE {
                setInterest(writable: true)
                break
            }
            let details = code == SSL_ERROR_SSL ? OpenSSLError.drain() : ""
            peerClosed(code == SSL_ERROR_SSL ? "TLS error: \(details)" : "the server closed the connection")
            return
        }
        loop.markDirty(self)
    }

    private func peerClosed(_ reason: String) {
        if state == .goingAway && streams.isEmpty {
            close(nil)
        } else {
            close(HTTP2ClientError(.connectionClosed, reason, endpoint: endpoint))
        }
    }

    /// Serializes every pending frame into one buffer and writes it with as few SSL_write calls as the
    /// socket allows. Loop thread; the loop calls it once per wake-up for each dirty connection.
    func flush() {
        guard let ssl, let session, state == .awaitingSettings || state == .ready || state == .goingAway else { return }
        while true {
            if outOffset == outBuffer.count {
                outBuffer.removeAll(keepingCapacity: true)
                outOffset = 0
            }
            while outBuffer.count - outOffset < Self.outputBatchBytes {
                var frameBytes: UnsafePointer<UInt8>?
                let produced = nghttp2_session_mem_send(session, &frameBytes)
                if produced < 0 {
                    close(HTTP2ClientError(.protocolError, "the HTTP/2 session failed to send: "
                        + nghttp2Error(Int32(produced)), endpoint: endpoint))
                    return
                }
                if produced == 0 { break }
                outBuffer.append(contentsOf: UnsafeBufferPointer(start: frameBytes, count: produced))
            }
            if outOffset == outBuffer.count { break }
            let pending = outBuffer.count - outOffset
            let written = outBuffer.withUnsafeBytes { raw in
                SSL_write(ssl, raw.baseAddress! + outOffset, Int32(pending))
            }
            if written > 0 {
                outOffset += Int(written)
                continue
            }
            let code = SSL_get_error(ssl, written)
            if code == SSL_ERROR_WANT_WRITE || code == SSL_ERROR_WANT_READ {
                setInterest(writable: true)
                return
            }
            let details = code == SSL_ERROR_SSL ? OpenSSLError.drain() : String(cString: strerror(errno))
            peerClosed("writing to the server failed: \(details)")
            return
        }
        setInterest(writable: false)
        if state == .goingAway && streams.isEmpty {
            finishGoingAway()
        } else if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            close(streams.isEmpty ? nil
                : HTTP2ClientError(.connectionClosed, "the HTTP/2 session ended", endpoint: endpoint))
        }
    }

    private func setInterest(writable: Bool) {
        guard fd >= 0, isWatched, writable != watchingWritable else { return }
        watchingWritable = writable
        loop.watch(fd: fd, registration: registration, readable: true, writable: writable, add: false)
    }

    // MARK: Streams

    /// Opens a stream for `ticket`. Loop thread; the pool has reserved a stream slot for it.
    func submit(_ ticket: HTTP2StreamTicket) {
        if ticket.isFinished {
            // Cancelled or timed out while queued for this loop.
            releaseStreamSlot()
            return
        }
        guard state == .ready, let session else {
            releaseStreamSlot()
            let why = state == .goingAway ? "the connection is going away (\(goawayDescription))"
                : "the connection is \(state.rawValue)"
            ticket.finish(.failure(HTTP2ClientError(.unprocessed, "not sent: \(why)", endpoint: endpoint)))
            return
        }
        var provider = nghttp2_data_provider()
        let hasBody = !ticket.request.body.isEmpty
        if hasBody {
            provider.source.ptr = Unmanaged.passUnretained(ticket).toOpaque()
            provider.read_callback = HTTP2SessionCallbacks.readRequestBody
        }
        let ticketPointer = Unmanaged.passUnretained(ticket).toOpaque()
        // nghttp2 copies the fields during submit, so pointers into the request's packed buffer only
        // need to live for this call.
        let streamID = ticket.request.fields.withUnsafeBytes { packed in
            headerFields.removeAll(keepingCapacity: true)
            // Never empty: a request always holds its four pseudo-headers.
            let base = UnsafeMutablePointer(mutating: packed.baseAddress!)
            PackedHeaderList.forEachField(in: packed) { field in
                headerFields.append(nghttp2_nv(name: base + field.nameStart, value: base + field.valueStart,
                    namelen: field.nameCount, valuelen: field.valueCount,
                    flags: field.isIndexable ? noFlags : noIndexFlag))
            }
            return headerFields.withUnsafeBufferPointer { fields in
                hasBody ? nghttp2_submit_request(session, nil, fields.baseAddress, fields.count, &provider, ticketPointer)
                    : nghttp2_submit_request(session, nil, fields.baseAddress, fields.count, nil, ticketPointer)
            }
        }
        guard streamID > 0 else {
            releaseStreamSlot()
            let exhausted = streamID == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue
            ticket.finish(.failure(HTTP2ClientError(exhausted ? .unprocessed : .protocolError,
                "cannot open a stream: \(nghttp2Error(streamID))", endpoint: endpoint)))
            if exhausted { retire("stream ids exhausted") }
            return
        }
        ticket.streamID = streamID
        streams[streamID] = ticket
        streamsOpened += 1
        loop.markDirty(self)
        if streamsOpened >= settings.maximumStreamsPerConnection {
            retire("opened \(streamsOpened) streams, the most one connection may carry")
        }
    }

    private let noFlags = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
    private let noIndexFlag = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)

    /// Resets the ticket's stream (if open) and fails it with CancellationError. Loop thread.
    func cancel(_ ticket: HTTP2StreamTicket) {
        guard ticket.streamID != 0, !ticket.resolved, streams[ticket.streamID] === ticket, let session else {
            // Not opened yet (submit will skip it) or already answered.
            ticket.finish(.failure(CancellationError()))
            return
        }
        ticket.resolved = true
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ticket.streamID,
            NGHTTP2_CANCEL.rawValue)
        loop.complete(ticket, .failure(CancellationError()))
        loop.markDirty(self)
    }

    private func releaseStreamSlot() {
        finishedSinceReport += 1
        loop.markNeedsReport(self)
    }

    /// Tells the pool how many dispatched streams ended since the last report. Loop thread.
    func reportFinishedStreams() {
        let count = finishedSinceReport
        finishedSinceReport = 0
        if count > 0 { delegate?.connection(self, didFinishStreams: count) }
    }

    /// Stops taking streams (stream ids running out, or the pool shutting down) and closes once the
    /// open ones end.
    private func retire(_ reason: String) {
        guard state == .ready else { return }
        state = .goingAway
        goawayDescription = reason
        delegate?.connectionIsGoingAway(self)
        loop.markDirty(self)
    }

    /// Takes no new streams and closes when the open ones have ended, e.g. after APNs answered
    /// IdleTimeout or UnrelatedKeyIdInToken. Loop thread.
    func retireOnRequest(_ reason: String) {
        retire(reason)
    }

    /// Takes no new streams and closes when the open ones have ended. Loop thread.
    func closeGracefully() {
        switch state {
        case .ready:
            closingGracefully = true
            retire("the pool is shutting down")
        case .goingAway:
            closingGracefully = true
            loop.markDirty(self)
        case .closed:
            break
        default:
            close(nil)
        }
    }

    private func finishGoingAway() {
        guard let session else { return close(nil) }
        if goawayLastStreamID < 0 {
            // We are the side ending the connection: tell the server.
            nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            var frameBytes: UnsafePointer<UInt8>?
            var produced = nghttp2_session_mem_send(session, &frameBytes)
            while produced > 0, let ssl {
                _ = SSL_write(ssl, frameBytes, Int32(produced))
                produced = nghttp2_session_mem_send(session, &frameBytes)
            }
            if let ssl { SSL_shutdown(ssl) }
        }
        close(nil)
    }

    // MARK: Deadlines and liveness

    /// Checks connect and request deadlines and sends or checks idle PINGs. Loop thread, every tick.
    func tick(now: UInt64) {
        switch state {
        case .resolving, .connecting, .handshaking, .awaitingSettings:
            if now >= connectDeadline {
                let phase: String
                switch state {
                case .resolving: phase = "resolving the host name"
                case .connecting: phase = "waiting for the TCP connection"
                case .handshaking: phase = "in the TLS handshake"
                default: phase = "waiting for the server's HTTP/2 SETTINGS"
                }
                close(HTTP2ClientError(.connectTimeout,
                    "no connection within \(formatNanoseconds(settings.connectTimeout)) (stuck \(phase))",
                    endpoint: endpoint))
            }
        case .ready, .goingAway:
            guard let session else { return }
            if pingSentAt != 0 {
                if now &- pingSentAt >= settings.pingTimeout {
                    close(HTTP2ClientError(.connectionClosed,
                        "the server did not answer a PING within \(formatNanoseconds(settings.pingTimeout)); "
                            + "the connection is presumed dead", endpoint: endpoint))
                    return
                }
            } else if now &- lastReadAt >= settings.pingInterval {
                nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
                pingSentAt = now
                loop.markDirty(self)
            }
            for ticket in streams.values where !ticket.resolved && now >= ticket.deadline {
                ticket.resolved = true
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), ticket.streamID,
                    NGHTTP2_CANCEL.rawValue)
                loop.complete(ticket, .failure(HTTP2ClientError(.requestTimeout,
                    "no response within \(formatNanoseconds(ticket.timeoutNanoseconds)); the stream was reset "
                        + "(the server may still have processed the request)", endpoint: endpoint)))
                loop.markDirty(self)
            }
        case .idle, .closed:
            break
        }
    }

    // MARK: Closing

    /// Closes the socket now, failing open streams, and tells the pool. Loop thread; never call it
    /// from inside an nghttp2 callback.
    func close(_ error: HTTP2ClientError?) {
        guard state != .closed else { return }
        state = .closed
        let reason = error?.message ?? "the connection was closed"
        for ticket in streams.values where !ticket.resolved {
            ticket.resolved = true
            let streamError = ticket.headersSent
                ? HTTP2ClientError(.connectionClosed, "the connection was lost before the response arrived "
                    + "(\(reason)); the server may have processed the request", endpoint: endpoint)
                : HTTP2ClientError(.unprocessed, "not sent: the connection closed first (\(reason))",
                    endpoint: endpoint)
            loop.complete(ticket, .failure(streamError))
        }
        streams.removeAll()
        lastLookedUp = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        if let ssl { SSL_free(ssl) }
        ssl = nil
        if fd >= 0 {
            if isWatched { loop.unwatch(fd: fd) }
            Glibc.close(fd)
            fd = -1
        }
        isWatched = false
        if registration != 0 { loop.unregister(registration) }
        outBuffer = []
        delegate?.connectionDidClose(self, error: error, wasReady: wasReady)
    }

    // MARK: nghttp2 callbacks (loop thread, inside mem_recv / mem_send)

    /// The open stream's ticket, looked up once for a run of callbacks about the same stream.
    @inline(__always)
    private func ticket(forStream streamID: Int32) -> HTTP2StreamTicket? {
        if let lastLookedUp, lastLookedUp.streamID == streamID { return lastLookedUp.ticket }
        guard let ticket = streams[streamID] else { return nil }
        lastLookedUp = (streamID, ticket)
        return ticket
    }

    fileprivate func onHeader(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let ticket = ticket(forStream: streamID), !ticket.resolved else { return }
        if name.first == UInt8(ascii: ":") {
            if name.count == 7, value.count == 3, name.elementsEqual(":status".utf8) {
                ticket.status = value.reduce(0) { $0 * 10 + Int($1 &- 48) }
            }
            return
        }
        ticket.responseHeaders.append(name: name, value: value)
    }

    fileprivate func onDataChunk(streamID: Int32, data: UnsafeBufferPointer<UInt8>) {
        guard let ticket = ticket(forStream: streamID), !ticket.resolved, let session else { return }
        if ticket.responseBody.count + data.count > settings.maximumResponseBodyBytes {
            ticket.resolved = true
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
            loop.complete(ticket, .failure(HTTP2ClientError(.responseTooLarge,
                "the response body exceeded \(settings.maximumResponseBodyBytes) bytes; the stream was reset",
                endpoint: endpoint)))
            return
        }
        ticket.responseBody.append(contentsOf: data)
    }

    fileprivate func onFrameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0, let ticket = ticket(forStream: header.stream_id) {
                ticket.endStreamReceived = true
            }
        case NGHTTP2_SETTINGS.rawValue:
            guard header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0, let session else { return }
            let announced = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
            let limit = min(Int(announced), settings.maximumConcurrentStreams)
            let previous = streamLimit
            streamLimit = limit
            if state == .awaitingSettings {
                state = .ready
                wasReady = true
                delegate?.connectionDidBecomeReady(self, streamLimit: limit)
            } else if limit != previous, state == .ready {
                delegate?.connection(self, streamLimitChangedTo: limit)
            }
        case NGHTTP2_GOAWAY.rawValue:
            let goaway = frame.pointee.goaway
            goawayLastStreamID = goaway.last_stream_id
            var detail = "GOAWAY last-stream-id \(goaway.last_stream_id), \(http2ErrorName(goaway.error_code))"
            if goaway.opaque_data_len > 0, let data = goaway.opaque_data {
                let text = String(decoding: UnsafeBufferPointer(start: data, count: min(goaway.opaque_data_len, 200)),
                    as: UTF8.self)
                detail += ", debug data \(text)"
            }
            goawayDescription = detail
            if state == .ready || state == .awaitingSettings {
                let wasAwaiting = state == .awaitingSettings
                state = .goingAway
                if !wasAwaiting { delegate?.connectionIsGoingAway(self) }
            }
            loop.markDirty(self)
        case NGHTTP2_PING.rawValue:
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { pingSentAt = 0 }
        default:
            break
        }
    }

    fileprivate func onFrameSent(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        if UInt32(header.type) == NGHTTP2_HEADERS.rawValue, let ticket = ticket(forStream: header.stream_id) {
            ticket.headersSent = true
        }
    }

    fileprivate func onStreamClose(streamID: Int32, errorCode: UInt32) {
        if lastLookedUp?.streamID == streamID { lastLookedUp = nil }
        guard let ticket = streams.removeValue(forKey: streamID) else { return }
        releaseStreamSlot()
        guard !ticket.resolved else { return }
        ticket.resolved = true
        if ticket.endStreamReceived && ticket.status != 0 {
            loop.complete(ticket, .success(HTTP2Response(status: ticket.status, headerFields: ticket.responseHeaders,
                body: ticket.responseBody, connectionID: id)))
            return
        }
        let error: HTTP2ClientError
        if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            let why = goawayLastStreamID >= 0 && streamID > goawayLastStreamID
                ? "the server sent GOAWAY before processing it (\(goawayDescription))"
                : "the server refused the stream (REFUSED_STREAM)"
            error = HTTP2ClientError(.unprocessed, "not processed: \(why); safe to retry on another connection",
                endpoint: endpoint)
        } else {
            error = HTTP2ClientError(.streamReset, "the server reset the stream (\(http2ErrorName(errorCode))) "
                + "before a complete response", endpoint: endpoint)
        }
        loop.complete(ticket, .failure(error))
    }
}

// MARK: - C callbacks

/// The nghttp2 callbacks, created once; each forwards to the connection in `user_data`.
enum HTTP2SessionCallbacks {
    nonisolated(unsafe) static let shared: OpaquePointer = {
        var callbacks: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0, "nghttp2 cannot allocate callbacks")
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let name, let value, let user else { return 0 }
            connection(user).onHeader(streamID: frame.pointee.hd.stream_id,
                name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength))
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            guard let data, let user else { return 0 }
            connection(user).onDataChunk(streamID: streamID, data: UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            connection(user).onFrameReceived(frame)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame, let user else { return 0 }
            connection(user).onFrameSent(frame)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
            guard let user else { return 0 }
            connection(user).onStreamClose(streamID: streamID, errorCode: errorCode)
            return 0
        }
        return callbacks!
    }()

    /// Copies the next slice of a request body into nghttp2's DATA frame buffer.
    static let readRequestBody: nghttp2_data_source_read_callback = { _, _, buffer, length, flags, source, _ in
        guard let buffer, let flags, let pointer = source?.pointee.ptr else {
            return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
        }
        let ticket = Unmanaged<HTTP2StreamTicket>.fromOpaque(pointer).takeUnretainedValue()
        let remaining = ticket.request.body.count - ticket.bodyOffset
        let count = min(remaining, length)
        ticket.request.body.withUnsafeBytes { body in
            buffer.update(from: body.baseAddress!.assumingMemoryBound(to: UInt8.self) + ticket.bodyOffset, count: count)
        }
        ticket.bodyOffset += count
        if ticket.bodyOffset == ticket.request.body.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        }
        return count
    }

    @inline(__always)
    private static func connection(_ user: UnsafeMutableRawPointer) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(user).takeUnretainedValue()
    }
}

// MARK: - Small helpers

func nghttp2Error(_ code: Int32) -> String {
    String(cString: nghttp2_strerror(code))
}

func http2ErrorName(_ code: UInt32) -> String {
    switch code {
    case NGHTTP2_NO_ERROR.rawValue: return "NO_ERROR"
    case NGHTTP2_PROTOCOL_ERROR.rawValue: return "PROTOCOL_ERROR"
    case NGHTTP2_INTERNAL_ERROR.rawValue: return "INTERNAL_ERROR"
    case NGHTTP2_FLOW_CONTROL_ERROR.rawValue: return "FLOW_CONTROL_ERROR"
    case NGHTTP2_SETTINGS_TIMEOUT.rawValue: return "SETTINGS_TIMEOUT"
    case NGHTTP2_STREAM_CLOSED.rawValue: return "STREAM_CLOSED"
    case NGHTTP2_FRAME_SIZE_ERROR.rawValue: return "FRAME_SIZE_ERROR"
    case NGHTTP2_REFUSED_STREAM.rawValue: return "REFUSED_STREAM"
    case NGHTTP2_CANCEL.rawValue: return "CANCEL"
    case NGHTTP2_COMPRESSION_ERROR.rawValue: return "COMPRESSION_ERROR"
    case NGHTTP2_CONNECT_ERROR.rawValue: return "CONNECT_ERROR"
    case NGHTTP2_ENHANCE_YOUR_CALM.rawValue: return "ENHANCE_YOUR_CALM"
    case NGHTTP2_INADEQUATE_SECURITY.rawValue: return "INADEQUATE_SECURITY"
    case NGHTTP2_HTTP_1_1_REQUIRED.rawValue: return "HTTP_1_1_REQUIRED"
    default: return "error code \(code)"
    }
}

func formatNanoseconds(_ nanoseconds: UInt64) -> String {
    if nanoseconds % 1_000_000_000 == 0 { return "\(nanoseconds / 1_000_000_000) s" }
    return "\(nanoseconds / 1_000_000) ms"
}

/// A resolved socket address.
struct SocketAddress: CustomStringConvertible, Sendable {
    private var storage = sockaddr_storage()
    private var length: socklen_t = 0

    var family: Int32 { Int32(storage.ss_family) }

    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafeBytes(of: storage) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    var description: String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let result = withSockAddr { address, length in
            getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                NI_NUMERICHOST | NI_NUMERICSERV)
        }
        guard result == 0 else { return "an address" }
        let hostText = cString(host)
        return hostText.contains(":") ? "[\(hostText)]:\(cString(service))" : "\(hostText):\(cString(service))"
    }

    /// getaddrinfo for TCP; blocking unless `numericOnly`.
    static func resolve(host: String, port: Int, numericOnly: Bool) -> Result<[SocketAddress], HTTP2ClientError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = numericOnly ? AI_NUMERICHOST | AI_NUMERICSERV : AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        let endpoint = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        guard status == 0, let list else {
            return .failure(HTTP2ClientError(.connectFailed,
                "cannot resolve host '\(host)': \(String(cString: gai_strerror(status)))", endpoint: endpoint))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            if let address = current.pointee.ai_addr,
                current.pointee.ai_addrlen <= MemoryLayout<sockaddr_storage>.size
            {
                var socketAddress = SocketAddress()
                withUnsafeMutableBytes(of: &socketAddress.storage) { raw in
                    raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(current.pointee.ai_addrlen)))
                }
                socketAddress.length = current.pointee.ai_addrlen
                addresses.append(socketAddress)
            }
            entry = current.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            return .failure(HTTP2ClientError(.connectFailed, "host '\(host)' has no address", endpoint: endpoint))
        }
        return .success(addresses)
    }
}
