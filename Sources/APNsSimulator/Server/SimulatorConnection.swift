// One accepted connection on its own thread: a non-blocking TLS socket, an nghttp2 server session,
// and a timer heap for delayed answers, driven by poll(2). The thread also wakes on a pipe when the
// simulator stops or its faults change (a new SETTINGS_MAX_CONCURRENT_STREAMS goes out at once).
import APNs
import CNghttp2
import COpenSSL
import Platform
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The state of one stream while its request arrives and until its answer is sent.
/// Confined to its connection's thread, so its fields skip the runtime's exclusivity checks.
final class StreamState {
    let id: Int32
    @exclusivity(unchecked) var request = IncomingRequest()
    @exclusivity(unchecked) var responseBody: [UInt8] = []
    @exclusivity(unchecked) var responseOffset = 0
    /// The request is complete and has been given to the engine.
    @exclusivity(unchecked) var planned = false
    /// Bytes of header names and values received.
    @exclusivity(unchecked) var headerBytes = 0

    init(id: Int32) { self.id = id }
}

/// A server-side HTTP/2 connection.
/// - Important: everything but `wake()`, `id` and `stopRequested` is confined to the connection's thread
///   (so its state skips the runtime's exclusivity checks).
final class SimulatorConnection: @unchecked Sendable {
    let id: Int
    private let socket: Int32
    private let wakeReader: Int32
    private let wakeWriter: Int32
    private let engine: SimulatorEngine
    private let tls: TLSServerContext
    private let stopFlag = Atomic<Bool>(false)

    @exclusivity(unchecked) private var ssl: OpaquePointer?
    @exclusivity(unchecked) private var session: OpaquePointer?
    @exclusivity(unchecked) private var handshakeDone = false
    @exclusivity(unchecked) private var context: ConnectionContext
    @exclusivity(unchecked) private var streams: [Int32: StreamState] = [:]
    @exclusivity(unchecked) private var timers = TimerHeap<(streamID: Int32, response: SimulatorResponse)>()
    @exclusivity(unchecked) private var output: [UInt8] = []
    @exclusivity(unchecked) private var outputOffset = 0
    @exclusivity(unchecked) private var readBuffer = [UInt8](repeating: 0, count: 32 * 1024)
    @exclusivity(unchecked) private var closeNow = false
    /// Close without the TLS close_notify and lingering read: a drop fault.
    @exclusivity(unchecked) private var abrupt = false
    /// readAvailable() stopped early (round limit or output backlog) with data possibly left in TLS.
    @exclusivity(unchecked) private var readAgain = false
    @exclusivity(unchecked) private var sslWantsWrite = false
    @exclusivity(unchecked) private var openStreams = 0
    @exclusivity(unchecked) private var peakOpenStreams = 0
    @exclusivity(unchecked) private var highestPlannedStreamID: Int32 = 0
    @exclusivity(unchecked) private var goAwayLastStreamID: Int32?
    @exclusivity(unchecked) private var announcedMaxConcurrentStreams: UInt32
    @exclusivity(unchecked) private var faultsGeneration: UInt64

    /// Takes ownership of `socket` (non-blocking, accepted).
    init(id: Int, socket: Int32, engine: SimulatorEngine, tls: TLSServerContext) throws(SimulatorError) {
        let fds = try makeWakePipe()
        self.id = id
        self.socket = socket
        self.wakeReader = fds[0]
        self.wakeWriter = fds[1]
        self.engine = engine
        self.tls = tls
        let (faults, generation) = engine.currentFaults()
        announcedMaxConcurrentStreams = faults.maxConcurrentStreams
        faultsGeneration = generation
        context = ConnectionContext(id: id, random: SimulatorRandom(seed: engine.seed &+ UInt64(id) &* 0x9E37_79B9))
    }

    deinit {
        close(wakeReader)
        close(wakeWriter)
    }

    /// Asks the connection's thread to look at the stop flag and the faults again. Any thread.
    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWriter, &byte, 1)
    }

    /// Asks the connection to send GOAWAY and close. Any thread.
    func requestStop() {
        stopFlag.store(true, ordering: .releasing)
        wake()
    }

    // MARK: - The loop

    /// Runs until the connection closes. Call on the connection's own thread.
    func run() {
        defer { teardown() }
        guard setUp() else { return }
        var fds = [
            pollfd(fd: socket, events: 0, revents: 0), pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
        ]
        while !closeNow {
            var events = Int16(0)
            let pendingOutput = outputOffset < output.count
            if !pendingOutput || !handshakeDone { events |= Int16(POLLIN) }
            if pendingOutput || sslWantsWrite { events |= Int16(POLLOUT) }
            fds[0].events = events
            fds[0].revents = 0
            fds[1].revents = 0
            let timeout = readAgain && !pendingOutput ? 0 : timers.millisecondsUntilNext(now: MonotonicClock.now())
            let ready = poll(&fds, 2, timeout)
            if ready < 0 && errno != EINTR { break }
            if fds[1].revents != 0 { drainWakePipe() }
            if stopFlag.load(ordering: .acquiring) {
                shutDownGracefully()
                break
            }
            if !handshakeDone {
                guard handshake() else { break }
                if !handshakeDone { continue }
            }
            applyChangedFaults()
            if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 || sslWantsWrite
                || (readAgain && outputOffset >= output.count)
            {
                readAvailable()
            }
            if closeNow { break }
            fireDueTimers()
            if closeNow { break }
            guard flush() else { break }
            if finished() { break }
        }
    }

    private func setUp() -> Bool {
        var one: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        guard let ssl = tls.makeSession() else { return false }
        self.ssl = ssl
        SSL_set_fd(ssl, socket)
        SSL_set_accept_state(ssl)
        return true
    }

    private func teardown() {
        if handshakeDone && !abrupt { closeGracefully() }
        let wasEstablished = session != nil
        if let session { nghttp2_session_del(session) }
        session = nil
        if let ssl { SSL_free(ssl) }
        ssl = nil
        close(socket)
        engine.connectionClosed(id: id, wasEstablished: wasEstablished)
        streams.removeAll()
    }

    /// Sends close_notify and FIN, then reads and discards what the client still sends for up to
    /// 300 ms: closing a socket with unread input makes the kernel send RST, which can destroy our last
    /// frames (a GOAWAY, the last answers) before the client reads them.
    private func closeGracefully() {
        if let ssl { _ = SSL_shutdown(ssl) }
        Glibc.shutdown(socket, Int32(SHUT_WR))
        let deadline = MonotonicClock.now() + 300_000_000
        var fd = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        var scratch = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = MonotonicClock.now()
            guard now < deadline else { return }
            fd.revents = 0
            guard poll(&fd, 1, Int32((deadline - now) / 1_000_000) + 1) > 0 else { return }
            if read(socket, &scratch, scratch.count) <= 0 { return }
        }
    }

    private func drainWakePipe() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeReader, &buffer, buffer.count) > 0 {}
    }

    /// Continues the TLS handshake; false when it failed (the connection is then closed).
    private func handshake() -> Bool {
        guard let ssl else { return false }
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            handshakeDone = true
            sslWantsWrite = false
            context.authentication.certificateTopics = ClientCertificateTopics.read(from: ssl)
            return startSession()
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            sslWantsWrite = false
            return true
        case SSL_ERROR_WANT_WRITE:
            sslWantsWrite = true
            return true
        case SSL_ERROR_SYSCALL, SSL_ERROR_ZERO_RETURN:
            engine.handshakeFailed(reason: "the client closed the connection during the TLS handshake")
            return false
        default:
            engine.handshakeFailed(reason: "TLS handshake failed: " + TLSServerContext.openSSLErrors())
            return false
        }
    }

    private func startSession() -> Bool {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { return false }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            SimulatorConnection.from(user).onBeginHeaders(frame!)
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, user in
            SimulatorConnection.from(user).onHeader(frame!, name!, nameLength, value!, valueLength)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            SimulatorConnection.from(user).onData(streamID, UnsafeBufferPointer(start: data, count: length))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            SimulatorConnection.from(user).onFrame(frame!)
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, user in
            SimulatorConnection.from(user).onStreamClose(streamID)
        }
        var session: OpaquePointer?
        let user = Unmanaged.passUnretained(self).toOpaque()
        guard nghttp2_session_server_new(&session, callbacks, user) == 0, let session else { return false }
        self.session = session
        var settings = [nghttp2_settings_entry(
            settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
            value: announcedMaxConcurrentStreams)]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1)
        engine.connectionEstablished(id: id)
        return true
    }

    /// Reads whatever TLS has and feeds nghttp2; stops when the output backlog is large so a client
    /// that does not read its answers cannot grow memory.
    private func readAvailable() {
        guard let ssl, let session else { return }
        sslWantsWrite = false
        readAgain = false
        var rounds = 0
        while !closeNow {
            if rounds == 16 {
                readAgain = true  // let timers and writes have a turn
                return
            }
            rounds += 1
            let count = readBuffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if count > 0 {
                let consumed = readBuffer.withUnsafeBufferPointer {
                    nghttp2_session_mem_recv(session, $0.baseAddress, Int(count))
                }
                if consumed < 0 {
                    // A dropped connection closes at once; otherwise nghttp2 has queued GOAWAY for the
                    // protocol error where it could: send it, then close.
                    if !closeNow { _ = flush() }
                    closeNow = true
                    return
                }
                if output.count - outputOffset > 256 * 1024 {
                    readAgain = true
                    return
                }
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ:
                return
            case SSL_ERROR_WANT_WRITE:
                sslWantsWrite = true
                return
            default:
                // Orderly close or a broken connection.
                closeNow = true
                return
            }
        }
    }

    /// Moves nghttp2's frames to the output buffer and writes as much as TLS takes.
    /// False when the connection broke.
    private func flush() -> Bool {
        guard let ssl else { return false }
        if let session {
            while output.count - outputOffset < 64 * 1024 {
                var data: UnsafePointer<UInt8>?
                let length = nghttp2_session_mem_send(session, &data)
                if length < 0 { return false }
                if length == 0 { break }
                if outputOffset > 0 && outputOffset == output.count {
                    output.removeAll(keepingCapacity: true)
                    outputOffset = 0
                }
                output.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            }
        }
        while outputOffset < output.count {
            let written = output.withUnsafeBytes {
                SSL_write(ssl, $0.baseAddress! + outputOffset, Int32(min(output.count - outputOffset, 1 << 20)))
            }
            if written > 0 {
                outputOffset += Int(written)
                continue
            }
            switch SSL_get_error(ssl, written) {
            case SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_READ:
                return true
            default:
                return false
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 256 * 1024)
        outputOffset = 0
        return true
    }

    /// True when there is nothing left to do: nghttp2 wants neither to read nor write (e.g. after a
    /// protocol error), or after our GOAWAY every answerable stream has been answered.
    private func finished() -> Bool {
        guard let session, outputOffset >= output.count else { return false }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 { return true }
        if goAwayLastStreamID != nil && timers.isEmpty && nghttp2_session_want_write(session) == 0 { return true }
        return false
    }

    /// On stop: GOAWAY Shutdown, one non-blocking attempt to send it, and close.
    private func shutDownGracefully() {
        guard handshakeDone, let session else { return }
        submitGoAway(lastStreamID: nghttp2_session_get_last_proc_stream_id(session))
        _ = flush()
    }

    private func applyChangedFaults() {
        guard let session else { return }
        let (faults, generation) = engine.currentFaults(ifNewerThan: faultsGeneration) ?? (nil, faultsGeneration)
        faultsGeneration = generation
        if let faults, faults.maxConcurrentStreams != announcedMaxConcurrentStreams {
            announce(maxConcurrentStreams: faults.maxConcurrentStreams, session: session)
        }
    }

    private func announce(maxConcurrentStreams: UInt32, session: OpaquePointer) {
        announcedMaxConcurrentStreams = maxConcurrentStreams
        var settings = [nghttp2_settings_entry(
            settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams)]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, 1)
    }

    private static let shutdownDebugData: [UInt8] = Array(#"{"reason":"Shutdown"}"#.utf8)

    private func submitGoAway(lastStreamID: Int32) {
        guard let session, goAwayLastStreamID == nil else { return }
        goAwayLastStreamID = lastStreamID
        Self.shutdownDebugData.withUnsafeBufferPointer {
            _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID,
                NGHTTP2_NO_ERROR.rawValue, $0.baseAddress, $0.count)
        }
        engine.goAwaySent()
    }

    // MARK: - Timers

    private func fireDueTimers() {
        let now = MonotonicClock.now()
        while let due = timers.popDue(now: now) {
            guard let stream = streams[due.streamID] else { continue }  // reset by the client meanwhile
            submit(due.response, on: stream)
        }
    }

    // MARK: - nghttp2 callbacks

    private static func from(_ user: UnsafeMutableRawPointer?) -> SimulatorConnection {
        Unmanaged<SimulatorConnection>.fromOpaque(user!).takeUnretainedValue()
    }

    private func onBeginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
        else { return 0 }
        let id = frame.pointee.hd.stream_id
        streams[id] = StreamState(id: id)
        openStreams += 1
        if openStreams > peakOpenStreams {
            peakOpenStreams = openStreams
            engine.peakConcurrentStreams(connection: self.id, peak: peakOpenStreams)
        }
        return 0
    }

    private func onHeader(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafePointer<UInt8>, _ nameLength: Int,
        _ value: UnsafePointer<UInt8>, _ valueLength: Int
    ) -> Int32 {
        // Only the request's header block; trailers would otherwise read as repeated headers.
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST,
            let stream = streams[frame.pointee.hd.stream_id]
        else { return 0 }
        // Bounded memory: a request's header block may hold at most 16 KiB (APNs requests need under
        // 1 KiB); beyond that the stream is reset.
        stream.headerBytes += nameLength + valueLength
        if stream.headerBytes > 16 * 1024 { return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue }
        let nameBytes = UnsafeBufferPointer(start: name, count: nameLength)
        let valueString = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
        if nameLength > 0 && name[0] == UInt8(ascii: ":") {
            if ASCIIBytes.equal(nameBytes, ":method") {
                stream.request.method = valueString
            } else if ASCIIBytes.equal(nameBytes, ":path") {
                stream.request.path = valueString
            }
            return 0
        }
        stream.request.addHeader(name: Self.headerName(nameBytes), value: valueString)
        return 0
    }

    /// The names APNs requests carry, kept as strings made once: a request's nine or so header names then
    /// cost no allocation. Matched by `ASCIIBytes.equal` (a `String.UTF8View` walk per candidate cost more
    /// than the allocation it saved).
    private static let knownHeaderNames: [(bytes: [UInt8], name: String)] = [
        "authorization", "apns-id", "apns-push-type", "apns-topic", "apns-priority", "apns-expiration",
        "apns-collapse-id", "content-length", "content-type", "user-agent", "accept-encoding",
    ].map { (Array($0.utf8), $0) }

    private static func headerName(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        for known in knownHeaderNames where known.bytes.withUnsafeBufferPointer({ ASCIIBytes.equal($0, bytes) }) {
            return known.name
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func onData(_ streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) -> Int32 {
        streams[streamID]?.request.appendBody(data)
        return 0
    }

    private func onFrame(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = frame.pointee.hd.type
        guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue),
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
            let stream = streams[frame.pointee.hd.stream_id], !stream.planned
        else { return 0 }
        stream.planned = true
        handleComplete(stream)
        // Stops nghttp2 from processing the rest of the input of a connection being dropped.
        return closeNow ? NGHTTP2_ERR_CALLBACK_FAILURE.rawValue : 0
    }

    private func onStreamClose(_ streamID: Int32) -> Int32 {
        if streams.removeValue(forKey: streamID) != nil { openStreams -= 1 }
        return 0
    }

    // MARK: - Answers

    private func handleComplete(_ stream: StreamState) {
        if let last = goAwayLastStreamID, stream.id > last { return }  // unprocessed after our GOAWAY
        guard let session else { return }
        let plan = engine.plan(stream.request, streamID: stream.id, context: &context)
        if let maximum = plan.newMaxConcurrentStreams, maximum != announcedMaxConcurrentStreams {
            announce(maxConcurrentStreams: maximum, session: session)
        }
        if plan.dropConnection {
            closeNow = true
            abrupt = true
            return
        }
        if plan.goAway == .beforeThisStream {
            submitGoAway(lastStreamID: highestPlannedStreamID)
            return
        }
        highestPlannedStreamID = max(highestPlannedStreamID, stream.id)
        if case .respond(let response) = plan.answer {
            if plan.delayNanoseconds == 0 {
                submit(response, on: stream)
            } else {
                timers.push(
                    deadline: MonotonicClock.now() &+ plan.delayNanoseconds, (streamID: stream.id, response: response))
            }
        }
        if plan.goAway == .includingThisStream { submitGoAway(lastStreamID: stream.id) }
    }

    private static let contentType: [UInt8] = Array("application/json".utf8)

    private func submit(_ response: SimulatorResponse, on stream: StreamState) {
        guard let session else { return }
        stream.responseBody = response.body
        var fields: [(String, String)] = [(":status", String(response.status)), ("apns-id", response.apnsID)]
        if let uniqueID = response.uniqueID { fields.append(("apns-unique-id", uniqueID)) }
        if let retryAfter = response.retryAfterSeconds { fields.append(("retry-after", String(retryAfter))) }
        if !stream.responseBody.isEmpty {
            fields.append(("content-type", "application/json"))
            fields.append(("content-length", String(stream.responseBody.count)))
        }
        HeaderBlock.withNameValues(fields) { nva, count in
            if stream.responseBody.isEmpty {
                _ = nghttp2_submit_response(session, stream.id, nva, count, nil)
            } else {
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) {
                    _, streamID, buffer, length, flags, _, user in
                    SimulatorConnection.from(user).readResponseBody(streamID, buffer!, length, flags!)
                }
                _ = nghttp2_submit_response(session, stream.id, nva, count, &provider)
            }
        }
    }

    private func readResponseBody(
        _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let stream = streams[streamID] else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let count = min(length, stream.responseBody.count - stream.responseOffset)
        stream.responseBody.withUnsafeBufferPointer {
            buffer.update(from: $0.baseAddress! + stream.responseOffset, count: count)
        }
        stream.responseOffset += count
        if stream.responseOffset >= stream.responseBody.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }
}

/// Builds an `nghttp2_nv` array over one contiguous byte buffer for the duration of a call
/// (nghttp2 copies names and values when a response is submitted).
enum HeaderBlock {
    static func withNameValues<R>(
        _ fields: [(String, String)], _ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> R
    ) -> R {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count })
        for (name, value) in fields {
            bytes.append(contentsOf: name.utf8)
            bytes.append(contentsOf: value.utf8)
        }
        return bytes.withUnsafeMutableBufferPointer { raw in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: fields.count) { nva in
                var offset = 0
                for (index, (name, value)) in fields.enumerated() {
                    let nameLength = name.utf8.count, valueLength = value.utf8.count
                    nva[index] = nghttp2_nv(
                        name: raw.baseAddress! + offset, value: raw.baseAddress! + offset + nameLength,
                        namelen: nameLength, valuelen: valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
                    offset += nameLength + valueLength
                }
                return body(nva.baseAddress!, fields.count)
            }
        }
    }
}

/// A non-blocking pipe (read end, write end) a thread in poll(2) can be woken through.
func makeWakePipe() throws(SimulatorError) -> [Int32] {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else {
        throw SimulatorError(.system, "pipe failed: \(String(cString: strerror(errno)))")
    }
    for fd in fds {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }
    return fds
}
