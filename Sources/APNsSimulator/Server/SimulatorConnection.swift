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
    let socket: Int32
    let wakeReader: Int32
    let wakeWriter: Int32
    let engine: SimulatorEngine
    let tls: TLSServerContext
    let stopFlag = Atomic<Bool>(false)

    @exclusivity(unchecked) var ssl: OpaquePointer?
    @exclusivity(unchecked) var session: OpaquePointer?
    @exclusivity(unchecked) var handshakeDone = false
    @exclusivity(unchecked) var context: ConnectionContext
    @exclusivity(unchecked) var streams: [Int32: StreamState] = [:]
    @exclusivity(unchecked) var timers = TimerHeap<(streamID: Int32, response: SimulatorResponse)>()
    @exclusivity(unchecked) var output: [UInt8] = []
    @exclusivity(unchecked) var outputOffset = 0
    @exclusivity(unchecked) var readBuffer = [UInt8](repeating: 0, count: 32 * 1024)
    @exclusivity(unchecked) var closeNow = false
    /// Close without the TLS close_notify and lingering read: a drop fault.
    @exclusivity(unchecked) var abrupt = false
    /// readAvailable() stopped early (round limit or output backlog) with data possibly left in TLS.
    @exclusivity(unchecked) var readAgain = false
    @exclusivity(unchecked) var sslWantsWrite = false
    @exclusivity(unchecked) var openStreams = 0
    @exclusivity(unchecked) var peakOpenStreams = 0
    @exclusivity(unchecked) var highestPlannedStreamID: Int32 = 0
    @exclusivity(unchecked) var goAwayLastStreamID: Int32?
    @exclusivity(unchecked) var announcedMaxConcurrentStreams: UInt32
    @exclusivity(unchecked) var faultsGeneration: UInt64
    /// The TLS handshake is not answered before this monotonic time (`SimulatorFaults.handshakeMilliseconds`).
    let handshakeNotBefore: UInt64

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
        handshakeNotBefore = MonotonicClock.now() &+ UInt64(faults.handshakeMilliseconds * 1_000_000)
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
            let now = MonotonicClock.now()
            // A held handshake leaves the ClientHello unread until its time (only the wake pipe is watched).
            let handshakeHeld = !handshakeDone && now < handshakeNotBefore
            if !handshakeHeld {
                if !pendingOutput || !handshakeDone { events |= Int16(POLLIN) }
                if pendingOutput || sslWantsWrite { events |= Int16(POLLOUT) }
            }
            fds[0].events = events
            fds[0].revents = 0
            fds[1].revents = 0
            let timeout =
                handshakeHeld
                ? Int32(clamping: (handshakeNotBefore - now + 999_999) / 1_000_000)
                : readAgain && !pendingOutput ? 0 : timers.millisecondsUntilNext(now: now)
            let ready = poll(&fds, 2, timeout)
            if ready < 0 && errno != EINTR { break }
            if fds[1].revents != 0 { drainWakePipe() }
            if stopFlag.load(ordering: .acquiring) {
                shutDownGracefully()
                break
            }
            if handshakeHeld { continue }
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

    func setUp() -> Bool {
        var one: Int32 = 1
        setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        guard let ssl = tls.makeSession() else { return false }
        self.ssl = ssl
        SSL_set_fd(ssl, socket)
        SSL_set_accept_state(ssl)
        return true
    }

    func teardown() {
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
    func closeGracefully() {
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

    func drainWakePipe() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeReader, &buffer, buffer.count) > 0 {}
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
