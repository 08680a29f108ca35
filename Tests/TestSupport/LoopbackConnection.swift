// A plain TCP connection to a server the test started on 127.0.0.1, for tests that speak to it byte by
// byte or only need it to see a client. Free ports come from ChildProcesses' `freeLoopbackPort()`.

import ChildProcesses
import Glibc

/// Opens a TCP connection to 127.0.0.1:`port`; returns the descriptor, or -1 with `errno` set.
package func connectLoopback(port: Int) -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return -1 }
    guard withLoopbackAddress(port: port, { connect(descriptor, $0, $1) }) == 0 else {
        let saved = errno
        close(descriptor)
        errno = saved
        return -1
    }
    return descriptor
}
