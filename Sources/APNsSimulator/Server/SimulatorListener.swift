// The listening socket and its accept thread, and the registry of connection threads so that
// stop() can close every connection and join every thread before it returns.

import Platform
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// - Important: thread-safe. `start()` once, `stop()` any number of times.
final class SimulatorListener: Sendable {
    private struct Entry {
        let connection: SimulatorConnection
        var thread: NamedThread?
    }
    private struct Registry {
        var entries: [Int: Entry] = [:]
        var stopping = false
        var nextID = 1
        var acceptThread: NamedThread?
        var stopped = false
    }

    private let socket: Int32
    private let wakeReader: Int32
    private let wakeWriter: Int32
    private let engine: SimulatorEngine
    private let tls: TLSServerContext
    private let registry = Mutex(Registry())
    /// The bound port.
    let port: Int
    /// Connections served at once; each has a thread, so more are closed as soon as accepted.
    private let maximumConnections: Int

    /// Binds and listens on `host:port` (port 0 picks a free one).
    init(host: String, port: Int, maximumConnections: Int, engine: SimulatorEngine, tls: TLSServerContext)
        throws(SimulatorError)
    {
        self.maximumConnections = maximumConnections
        self.engine = engine
        self.tls = tls
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw SimulatorError(
                .network, "cannot resolve listen address '\(host)': \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        let fd = Glibc.socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SimulatorError(.network, "socket failed: \(Self.lastError())") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let message = Self.lastError()
            close(fd)
            throw SimulatorError(.network, "cannot listen on \(host):\(port): \(message)")
        }
        guard listen(fd, 512) == 0 else {
            let message = Self.lastError()
            close(fd)
            throw SimulatorError(.network, "listen on \(host):\(port) failed: \(message)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let family = address.ss_family
        let boundPort: UInt16 = withUnsafePointer(to: &address) { pointer in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin_port)
            }
        }
        let fds: [Int32]
        do {
            fds = try makeWakePipe()
        } catch {
            close(fd)
            throw error
        }
        socket = fd
        wakeReader = fds[0]
        wakeWriter = fds[1]
        self.port = Int(boundPort)
    }

    deinit {
        close(socket)
        close(wakeReader)
        close(wakeWriter)
    }

    /// Starts the accept thread.
    func start() throws(SimulatorError) {
        let thread: NamedThread
        do {
            thread = try NamedThread(name: "apns-sim-accept") { [self] in acceptLoop() }
        } catch {
            throw SimulatorError(.system, error.description)
        }
        registry.withLock { $0.acceptThread = thread }
    }

    /// Closes the listener and every connection (each sends GOAWAY first), and joins every thread.
    func stop() {
        let acceptThread: NamedThread? = registry.withLock { registry in
            if registry.stopping { return nil }
            registry.stopping = true
            defer { registry.acceptThread = nil }
            return registry.acceptThread
        }
        guard let acceptThread else { return }
        var byte: UInt8 = 1
        _ = write(wakeWriter, &byte, 1)
        acceptThread.join()
        // The accept thread has ended: every entry has its thread, and exiting connections now leave
        // their entry for us to join.
        let entries = registry.withLock { registry in
            defer { registry.entries.removeAll() }
            return Array(registry.entries.values)
        }
        for entry in entries { entry.connection.requestStop() }
        for entry in entries { entry.thread?.join() }
    }

    /// Makes every connection look at the faults again (a changed SETTINGS_MAX_CONCURRENT_STREAMS
    /// goes out at once).
    func wakeConnections() {
        let connections = registry.withLock { $0.entries.values.map(\.connection) }
        for connection in connections { connection.wake() }
    }

    private func acceptLoop() {
        var fds = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            if poll(&fds, 2, -1) < 0 && errno != EINTR { return }
            if registry.withLock({ $0.stopping }) { return }
            guard fds[0].revents != 0 else { continue }
            while true {
                let client = acceptCloseOnExec(socket, nonBlocking: true)
                if client < 0 {
                    if errno == EMFILE || errno == ENFILE { usleep(10_000) }
                    break
                }
                startConnection(client)
            }
        }
    }

    private func startConnection(_ client: Int32) {
        let id: Int? = registry.withLock { registry in
            guard registry.entries.count < maximumConnections else { return nil }
            defer { registry.nextID += 1 }
            return registry.nextID
        }
        engine.connectionAccepted(refused: id == nil)
        guard let id else {
            close(client)
            return
        }
        let connection: SimulatorConnection
        do {
            connection = try SimulatorConnection(id: id, socket: client, engine: engine, tls: tls)
        } catch {
            close(client)
            return
        }
        registry.withLock { $0.entries[id] = Entry(connection: connection, thread: nil) }
        let thread: NamedThread
        do {
            thread = try NamedThread(name: "apns-sim-conn") { [self] in
                connection.run()
                connectionFinished(id)
            }
        } catch {
            registry.withLock { _ = $0.entries.removeValue(forKey: id) }
            close(client)  // run() would have closed it
            return
        }
        let finishedAlready = registry.withLock { registry -> Bool in
            guard registry.entries[id] != nil else { return true }
            registry.entries[id]?.thread = thread
            return false
        }
        if finishedAlready { thread.detach() }
    }

    /// Called on a connection's thread as it ends: unless stop() is collecting threads to join,
    /// forget the connection and let its thread end on its own.
    private func connectionFinished(_ id: Int) {
        let thread: NamedThread? = registry.withLock { registry in
            if registry.stopping { return nil }
            return registry.entries.removeValue(forKey: id)?.thread
        }
        thread?.detach()
    }

    private static func lastError() -> String { String(cString: strerror(errno)) }
}
