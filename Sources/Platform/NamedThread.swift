// The one way this project starts an OS thread. Event loops, the simulator's accept and connection
// loops, and librdkafka's blocking calls all run on threads of their own, never on Swift's cooperative
// pool; every such thread is named (for top -H and the benches' per-thread CPU) and blocks SIGPIPE.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The system refused to create a thread (EAGAIN when the process is at its thread limit).
public struct ThreadStartError: Error, CustomStringConvertible {
    public let name: String
    public let code: Int32
    public var description: String { "cannot start thread \(name): \(String(cString: strerror(code)))" }
}

/// A dedicated OS thread running one closure.
/// - Important: a thread started with `init` must be `join()`ed or `detach()`ed exactly once.
public final class NamedThread: @unchecked Sendable {
    // Written once by init, read by join()/detach() on another thread after init returned.
    private var handle: pthread_t?

    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    /// Starts a thread named `name` running `body`; join or detach it. Throws when the system refuses.
    /// - Parameter stackSize: bytes of stack; nil takes the system's default (8 MiB on Linux).
    public init(
        name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void
    ) throws(ThreadStartError) {
        handle = try Self.create(name: name, stackSize: stackSize, body)
    }

    /// Starts a thread that ends on its own and is never joined (a poll loop, a one-off blocking call).
    public static func detached(
        name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void
    ) throws(ThreadStartError) {
        let thread = try create(name: name, stackSize: stackSize, body)
        pthread_detach(thread)
    }

    /// Waits until the thread's closure returned.
    public func join() {
        guard let thread = handle else { return }
        handle = nil
        pthread_join(thread, nil)
    }

    /// Lets the thread end on its own; its resources are freed when it returns.
    public func detach() {
        guard let thread = handle else { return }
        handle = nil
        pthread_detach(thread)
    }

    private static func create(
        name: String, stackSize: Int?, _ body: @escaping @Sendable () -> Void
    ) throws(ThreadStartError) -> pthread_t {
        let context = Unmanaged.passRetained(
            Body {
                CurrentThread.setName(name)
                CurrentThread.blockSIGPIPE()
                body()
            }
        ).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        var thread = pthread_t()
        let result = pthread_create(
            &thread, &attributes,
            { raw in
                Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw ThreadStartError(name: name, code: result)
        }
        return thread
    }
}
