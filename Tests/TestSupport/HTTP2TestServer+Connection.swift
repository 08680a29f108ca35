// One connection of the HTTP/2 test server: blocking TLS, an nghttp2 server session, the scripted replies,
// limits and GOAWAY of `HTTP2TestServer.Options`, and the counters it reports.

import CNghttp2
import COpenSSL
import Foundation
import Glibc
import Platform

/// One accepted connection, served on its own thread with blocking TLS and a 5 ms poll.
final class TestServerConnection {
    struct PendingStream {
        var method = ""
        var path = ""
        var headers: [(String, String)] = []
        var body: [UInt8] = []
    }

    struct ScheduledReply {
        var at: ContinuousClock.Instant
        var streamID: Int32
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
    }

    let server: HTTP2TestServer
    let fd: Int32
    let number: Int
    var ssl: OpaquePointer?
    var session: OpaquePointer?
    var pending: [Int32: PendingStream] = [:]
    var open: Set<Int32> = []
    var scheduled: [ScheduledReply] = []
    var bodies: [Int32: ([UInt8], Int)] = [:]
    var arrivedStreamIDs: [Int32] = []
    var highestStreamSeen: Int32 = 0
    var announcedLimit: UInt32?
    var acknowledgedLimit: UInt32?
    var limitChangeSent = false
    var goawaySent = false
    var lastProcessedStreamID: Int32 = Int32.max
    var heldUntilGoaway: [Int32] = []
    var goneSilent = false

    init(server: HTTP2TestServer, fd: Int32, number: Int) {
        self.server = server
        self.fd = fd
        self.number = number
    }

    func run() {
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
        if let gate = server.serverOptions.handshakeGate {
            while !gate(number) && !server.isStopped { usleep(1000) }
        }
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
            entries.append(
                nghttp2_settings_entry(
                    settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
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
                        nghttp2_session_mem_recv(
                            session, $0.baseAddress!.assumingMemoryBound(to: UInt8.self),
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
        let request = HTTP2TestServer.Request(
            connection: number, streamID: streamID, method: stream.method,
            path: stream.path, headers: stream.headers, body: stream.body)
        if let change = options.lowerLimit, options.lowerLimitConnections?.contains(number) ?? true, !limitChangeSent,
            arrivedStreamIDs.count >= change.afterRequests
        {
            limitChangeSent = true
            let entry = [
                nghttp2_settings_entry(
                    settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                    value: change.to)
            ]
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
                            process(
                                HTTP2TestServer.Request(
                                    connection: number, streamID: held, method: stream.method,
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
            let reply = ScheduledReply(
                at: ContinuousClock.now + delay, streamID: request.streamID, status: status,
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
            let nva = ranges.map {
                nghttp2_nv(
                    name: base + $0.0, value: base + $0.2, namelen: $0.1, valuelen: $0.3,
                    flags: 0)
            }
            _ =
                hasBody
                ? nghttp2_submit_response(session, reply.streamID, nva, nva.count, &provider)
                : nghttp2_submit_response(session, reply.streamID, nva, nva.count, nil)
        }
    }
}
