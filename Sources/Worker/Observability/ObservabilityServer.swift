// The worker's small HTTP port: /metrics, /healthz and /readyz, served by libmicrohttpd on its own
// internal polling thread (never on Swift's cooperative pool).

import APNs
import CMicroHTTPD
import Glibc
import Synchronization

/// Why the observability server could not start.
public struct ObservabilityServerError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Serves `GET /metrics` (Prometheus text format 0.0.4), `GET /healthz` (200 when every loop beats, 503
/// otherwise) and `GET /readyz` (200 when every readiness condition holds, 503 with a JSON body naming
/// those that do not). HEAD works too; other methods get 405, other paths 404.
///
/// - Important: Requests are answered on libmicrohttpd's own thread: rendering takes the registry's and
///   the health states' locks briefly. `stop()` blocks until that thread has ended; it is also called on
///   deinit.
public final class ObservabilityServer: Sendable {
    /// The address actually listened on (with the real port when 0 was asked for).
    public let address: ListenAddress
    public var port: UInt16 { address.port }

    /// Reached from libmicrohttpd's thread through an unretained pointer; lives as long as the server, and
    /// the daemon is stopped (in `stop()` or deinit) before it is released.
    private let routes: Routes
    private let daemon: Mutex<DaemonHandle?>

    /// Limits that keep a misbehaving scraper from holding resources. Defaults suit a probe port.
    public struct Limits: Sendable {
        /// Connections served at once. Default: 32.
        public var maximumConnections: UInt32 = 32
        /// Seconds an idle connection is kept. Default: 15.
        public var idleTimeoutSeconds: UInt32 = 15
        public init() {}
    }

    /// Starts listening on `listen` (port 0 picks a free port; read it back from `port`).
    ///
    /// - Throws: `ObservabilityServerError` when the address cannot be bound (in use, not local).
    public init(
        listen: ListenAddress, metrics: MetricsRegistry, liveness: Liveness, readiness: Readiness,
        limits: Limits = Limits()
    ) throws(ObservabilityServerError) {
        let routes = Routes(metrics: metrics, liveness: liveness, readiness: readiness)
        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_AUTO.rawValue
        if listen.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        let started: OpaquePointer? = withSocketAddress(of: listen) { socketAddress in
            let context = Unmanaged.passUnretained(routes).toOpaque()
            let options: [any CVarArg] = [
                MHD_OPTION.SOCK_ADDR.rawValue, socketAddress,
                MHD_OPTION.CONNECTION_LIMIT.rawValue, limits.maximumConnections,
                MHD_OPTION.CONNECTION_TIMEOUT.rawValue, limits.idleTimeoutSeconds,
                MHD_OPTION.END.rawValue,
            ]
            return withVaList(options) { arguments in
                MHD_start_daemon_va(flags, listen.port, nil, nil, handleRequest, context, arguments)
            }
        }
        guard let started else {
            let cause = String(cString: strerror(errno))
            throw ObservabilityServerError(
                message: "cannot listen on \(listen) for /metrics, /healthz and /readyz: \(cause); "
                    + "choose a free port (or 0) on a local address")
        }
        let boundPort = apns_worker_mhd_bound_port(started)
        self.routes = routes
        daemon = Mutex(DaemonHandle(pointer: started))
        address = ListenAddress(host: listen.host, port: boundPort)
    }

    /// Stops listening and waits for the server thread to end. Idempotent.
    public func stop() {
        let handle = daemon.withLock { daemon -> DaemonHandle? in
            defer { daemon = nil }
            return daemon
        }
        if let handle { MHD_stop_daemon(handle.pointer) }
    }

    deinit {
        stop()
    }
}

/// The daemon pointer, owned by the server and handed to `MHD_stop_daemon` exactly once.
private struct DaemonHandle: @unchecked Sendable {
    // Safe to send: libmicrohttpd's daemon may be stopped from any thread.
    let pointer: OpaquePointer
}

/// What the request handler answers from; reached from C through an unretained pointer.
private final class Routes: Sendable {
    let metrics: MetricsRegistry
    let liveness: Liveness
    let readiness: Readiness

    init(metrics: MetricsRegistry, liveness: Liveness, readiness: Readiness) {
        self.metrics = metrics
        self.liveness = liveness
        self.readiness = readiness
    }

    func respond(method: String, path: String) -> (status: UInt32, contentType: String, body: [UInt8]) {
        let known = ["/metrics", "/healthz", "/readyz"]
        guard known.contains(path) else {
            return (404, "text/plain; charset=utf-8", Array("not found: try /metrics, /healthz or /readyz\n".utf8))
        }
        guard method == "GET" || method == "HEAD" else {
            return (405, "text/plain; charset=utf-8", Array("method \(method) not allowed: use GET\n".utf8))
        }
        switch path {
        case "/metrics":
            return (200, MetricsRegistry.contentType, metrics.exposition())
        case "/healthz":
            return Self.json(liveness.report())
        default:
            return Self.json(readiness.report())
        }
    }

    private static func json(_ report: HealthReport) -> (status: UInt32, contentType: String, body: [UInt8]) {
        (report.isPassing ? 200 : 503, "application/json", report.body.compactBytes + [UInt8(ascii: "\n")])
    }
}

/// libmicrohttpd's access handler: answers on the first call, since none of the routes reads a body.
private let handleRequest: MHD_AccessHandlerCallback = { context, connection, url, method, _, _, _, _ in
    guard let context, let connection else { return .NO }
    let routes = Unmanaged<Routes>.fromOpaque(context).takeUnretainedValue()
    let path = url.map { String(cString: $0) } ?? "/"
    let methodName = method.map { String(cString: $0) } ?? ""
    let answer = routes.respond(method: methodName, path: path)
    let response = answer.body.withUnsafeBytes { buffer in
        MHD_create_response_from_buffer(
            buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress),
            MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
    }
    guard let response else { return .NO }
    defer { MHD_destroy_response(response) }
    _ = MHD_add_response_header(response, "Content-Type", answer.contentType)
    _ = MHD_add_response_header(response, "Cache-Control", "no-store")
    if answer.status == 405 { _ = MHD_add_response_header(response, "Allow", "GET, HEAD") }
    return MHD_queue_response(connection, UInt32(answer.status), response)
}

/// Calls `body` with a `sockaddr_in` or `sockaddr_in6` for `address`, as libmicrohttpd's SOCK_ADDR option wants.
private func withSocketAddress<Result>(
    of address: ListenAddress, _ body: (UnsafeMutablePointer<sockaddr>) -> Result
) -> Result {
    if address.isIPv6 {
        var socketAddress = sockaddr_in6()
        socketAddress.sin6_family = sa_family_t(AF_INET6)
        socketAddress.sin6_port = address.port.bigEndian
        _ = inet_pton(AF_INET6, address.host, &socketAddress.sin6_addr)
        return withUnsafeMutablePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body)
        }
    }
    var socketAddress = sockaddr_in()
    socketAddress.sin_family = sa_family_t(AF_INET)
    socketAddress.sin_port = address.port.bigEndian
    _ = inet_pton(AF_INET, address.host, &socketAddress.sin_addr)
    return withUnsafeMutablePointer(to: &socketAddress) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body)
    }
}
