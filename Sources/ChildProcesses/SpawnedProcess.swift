// Starting child processes (reference servers for benchmarks and interop tests) so that they behave:
// posix_spawn with an empty signal mask and default dispositions, output to a file; and the loopback
// ports those servers listen on.

import Dispatch
public import Glibc
import Platform
import Synchronization

/// Why a child process could not be started.
public struct SpawnError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// A child process started with posix_spawn and an empty signal mask.
///
/// Foundation's Process starts children from the calling thread, and the threads Swift's async code runs
/// on block almost every signal, which the child inherits: an h2o started that way ignores SIGTERM.
public final class SpawnedProcess: @unchecked Sendable {
    public let pid: pid_t
    private let exitStatus = Mutex<Int32?>(nil)

    private init(pid: pid_t) { self.pid = pid }

    /// Starts `path` with `arguments`, stdin from /dev/null, stdout and stderr appended to `outputFile`.
    ///
    /// - Throws: `SpawnError` naming the program and why it could not start.
    public static func spawn(_ path: String, _ arguments: [String], outputFile: String) throws(SpawnError)
        -> SpawnedProcess
    {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptySet = sigset_t()
        sigemptyset(&emptySet)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &emptySet)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputFile, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let result = ChildSpawnFence.starting { posix_spawn(&pid, path, &actions, &attributes, argv, environ) }
        guard result == 0 else {
            throw SpawnError(message: "cannot start \(path): \(String(cString: strerror(result)))")
        }
        return SpawnedProcess(pid: pid)
    }

    /// Waits for the exit (waitpid on a dispatch thread, never on the cooperative pool); returns the
    /// exit status, or 128 + signal.
    public func waitForExit() async -> Int32 {
        if let status = exitStatus.withLock({ $0 }) { return status }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { [self] in
                continuation.resume(returning: blockingWait())
            }
        }
    }

    /// True while the child has not exited.
    public var isRunning: Bool {
        if exitStatus.withLock({ $0 }) != nil { return false }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            exitStatus.withLock { $0 = Self.decode(status) }
            return false
        }
        return result == 0
    }

    /// SIGTERM, then SIGKILL if it has not exited after `grace`; reaps it.
    public func terminate(grace: Duration = .seconds(3)) {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            if !isRunning { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        _ = blockingWait()
    }

    private func blockingWait() -> Int32 {
        if let status = exitStatus.withLock({ $0 }) { return status }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let decoded = Self.decode(status)
        exitStatus.withLock { $0 = decoded }
        return decoded
    }

    private static func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}

/// A TCP socket that no child process inherits (`SOCK_CLOEXEC`). One a child inherits stays open in it after
/// this process closes it: a port released for a server stayed bound in a child another test had spawned
/// meanwhile, and the server could not listen there (EADDRINUSE).
public func closeOnExecSocket() -> Int32 {
    socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
}

/// Whether something accepts TCP connections on 127.0.0.1:`port` (a server started as a child is ready).
public func loopbackPortAcceptsConnections(_ port: Int) -> Bool {
    let fd = closeOnExecSocket()
    defer { close(fd) }
    return withLoopbackAddress(port: port) { connect(fd, $0, $1) == 0 }
}

/// Calls `body` with the socket address 127.0.0.1:`port` and its length, for bind or connect.
public func withLoopbackAddress<R>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

/// A free TCP port on 127.0.0.1 for a server about to be started: bound to port 0, read back, released.
/// Until the server binds it, the kernel may hand it to anyone else who binds port 0: a server this process
/// starts itself should bind port 0 and read its port back (`boundPort(of:)`) instead.
public func freeLoopbackPort() -> Int {
    let fd = closeOnExecSocket()
    defer { close(fd) }
    _ = withLoopbackAddress(port: 0) { bind(fd, $0, $1) }
    return boundPort(of: fd)
}

/// The local port a socket is bound to (0 if none).
public func boundPort(of descriptor: Int32) -> Int {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    return named == 0 ? Int(UInt16(bigEndian: address.sin_port)) : 0
}
