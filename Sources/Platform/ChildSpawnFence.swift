// A process-wide fence between starting a child process and closing a listening socket that must be closed
// at once: to bind its port again (librdkafka's mock cluster does that to take a broker down), or to find
// the port refusing connections (a test of a server's stop).
//
// Between its fork and its exec, a child holds a copy of every descriptor of this process, close-on-exec
// or not. A listening socket closed in that window stays open in the child until the exec, so binding its
// port again fails with "Address already in use"; librdkafka's mock cluster asserts on that failure and
// aborts the whole process. A test process that starts tools (openssl, h2o) while another test takes a
// mock broker down hit it: with a thread spawning /bin/true, the mock aborted within seconds.

import Synchronization

/// Keeps child processes from starting while a listener is closed and its port must be free at once.
///
/// Starting children is serialized too (one lock serves both sides); a start holds the fence only until
/// posix_spawn returns, which is after the child's exec.
public enum ChildSpawnFence {
    private static let fence = Mutex<Void>(())

    /// Runs `start`, which starts a child process, while no listener is being closed under the fence.
    public static func starting<Result, Failure: Error>(_ start: () throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        try withFence(start)
    }

    /// Runs `close`, which closes a listening socket and needs its port free at once (to bind it again, or
    /// to see connections refused), while no child is starting.
    public static func closingListener<Result, Failure: Error>(_ close: () throws(Failure) -> Result)
        throws(Failure) -> Result
    {
        try withFence(close)
    }

    private static func withFence<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        try fence.withLock { _ throws(Failure) in try body() }
    }
}
