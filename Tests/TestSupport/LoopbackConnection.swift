// A plain TCP connection to a server the test started on 127.0.0.1, for tests that speak to it byte by
// byte or only need it to see a client, and a port that refuses connections. Free ports come from
// ChildProcesses' `freeLoopbackPort()`.

import ChildProcesses
import Glibc
import Synchronization

/// Opens a TCP connection to 127.0.0.1:`port`; returns the descriptor, or -1 with `errno` set.
package func connectLoopback(port: Int) -> Int32 {
    let descriptor = closeOnExecSocket()
    guard descriptor >= 0 else { return -1 }
    guard withLoopbackAddress(port: port, { connect(descriptor, $0, $1) }) == 0 else {
        let saved = errno
        close(descriptor)
        errno = saved
        return -1
    }
    return descriptor
}

/// A loopback port nothing listens on, kept so until `release()`: bound without listening, so that a
/// connection to it is refused and the kernel hands it to no other socket meanwhile. A port merely picked
/// free can be given to another test's server while a test still counts on its refusals (a run under load
/// saw such a port answer with TLS, and the test's own server then could not listen on it).
package final class RefusingLoopbackPort: Sendable {
    package let port: Int
    private let descriptor: Mutex<Int32>

    package init() throws {
        let socketDescriptor = closeOnExecSocket()
        guard socketDescriptor >= 0, withLoopbackAddress(port: 0, { bind(socketDescriptor, $0, $1) }) == 0 else {
            let reason = String(cString: strerror(errno))
            if socketDescriptor >= 0 { close(socketDescriptor) }
            throw TestFailure("cannot bind a loopback port: \(reason)")
        }
        port = boundPort(of: socketDescriptor)
        descriptor = Mutex(socketDescriptor)
    }

    /// Hands the bound socket over, for a server to listen on: the port never becomes free, so nothing else
    /// (another test's outgoing connection, given it as its local port) can take it in between. Nil once
    /// released or taken.
    package func takeSocket() -> Int32? {
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return nil }
            defer { descriptor = -1 }
            return descriptor
        }
    }

    /// Gives the port up.
    package func release() {
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            close(descriptor)
            descriptor = -1
        }
    }

    deinit { release() }
}
