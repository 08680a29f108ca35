// An accepted connection is close-on-exec from the moment it exists (and non-blocking when asked), so a child
// spawned by another thread never holds it open.

import ChildProcesses
import Glibc
import Platform
import Testing

@Suite struct AcceptCloseOnExecTests {
    @Test(arguments: [false, true])
    func anAcceptedConnectionIsCloseOnExecAndNonBlockingWhenAsked(nonBlocking: Bool) {
        let listener = closeOnExecSocket()
        defer { close(listener) }
        #expect(withLoopbackAddress(port: 0) { bind(listener, $0, $1) } == 0)
        #expect(listen(listener, 1) == 0)
        let port = boundPort(of: listener)
        let client = closeOnExecSocket()
        defer { close(client) }
        #expect(withLoopbackAddress(port: port) { connect(client, $0, $1) } == 0)

        let accepted = acceptCloseOnExec(listener, nonBlocking: nonBlocking)
        #expect(accepted >= 0, "accept4 failed: errno \(errno)")
        defer { close(accepted) }
        #expect(fcntl(accepted, F_GETFD) & FD_CLOEXEC != 0)
        #expect((fcntl(accepted, F_GETFL) & O_NONBLOCK != 0) == nonBlocking)
    }
}
