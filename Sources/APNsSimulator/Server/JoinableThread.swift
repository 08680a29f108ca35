// A POSIX thread that can be joined: the simulator's accept loop and connection loops block in poll(2),
// so they run on their own threads, never on Swift's cooperative pool, and stop() waits for them to end.
import APNs
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A dedicated OS thread running one closure. `join()` waits for it to return.
/// - Important: `join()` must be called exactly once, or `detach()` instead.
final class JoinableThread: @unchecked Sendable {
    // Written once by start(), read by join()/detach() on another thread after start() returned.
    private var handle: pthread_t?

    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Starts a thread running `body`; `name` is for error messages. Throws when the system refuses to
    /// create a thread.
    init(name: String, _ body: @escaping @Sendable () -> Void) throws(SimulatorError) {
        let context = Unmanaged.passRetained(Body {
            CurrentThread.setName(name)
            body()
        }).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { raw in
            let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
            JoinableThread.blockSIGPIPE()
            body.run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw SimulatorError(.system, "cannot start thread \(name): \(String(cString: strerror(result)))")
        }
        handle = thread
    }

    /// OpenSSL's socket BIO writes with write(2), which cannot pass MSG_NOSIGNAL: a write to a socket
    /// the peer reset raises SIGPIPE, whose default action kills the process. A library must not change
    /// the process's signal dispositions, so the simulator's threads block SIGPIPE instead; the write
    /// then fails with EPIPE and the signal stays pending on the thread, harmless.
    static func blockSIGPIPE() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Waits until the thread's closure returned.
    func join() {
        guard let thread = handle else { return }
        handle = nil
        pthread_join(thread, nil)
    }

    /// Lets the thread end on its own; its resources are freed when it returns.
    func detach() {
        guard let thread = handle else { return }
        handle = nil
        pthread_detach(thread)
    }
}
