// One HTTP/2 client connection: a non-blocking TCP socket, an OpenSSL TLS session (ALPN h2) and an
// nghttp2 client session, driven by one EventLoop thread. This file holds its state; the facets are in
// HTTP2Connection+*.swift.

import CNghttp2
import Synchronization

/// What a connection tells its pool. Called on the connection's loop thread.
protocol HTTP2ConnectionDelegate: AnyObject, Sendable {
    /// TLS and the server's first SETTINGS are done; `streamLimit` streams may be open at once.
    func connectionDidBecomeReady(_ connection: HTTP2Connection, streamLimit: Int)
    /// The server changed SETTINGS_MAX_CONCURRENT_STREAMS (already capped by the pool's maximum).
    func connection(_ connection: HTTP2Connection, streamLimitChangedTo limit: Int)
    /// GOAWAY arrived (or the connection retired itself): no new streams; open streams may finish.
    func connectionIsGoingAway(_ connection: HTTP2Connection)
    /// `count` streams the pool dispatched here have ended (or were never opened).
    func connection(_ connection: HTTP2Connection, didFinishStreams count: Int)
    /// The connection is closed; `error` is nil for an orderly close. `wasReady` tells a failed
    /// connect from a connection that died after working.
    func connectionDidClose(_ connection: HTTP2Connection, error: HTTP2ClientError?, wasReady: Bool)
}

/// The per-connection limits, in loop units (nanoseconds).
struct HTTP2ConnectionSettings: Sendable {
    var host: String
    var port: Int
    var connectTimeout: UInt64
    var pingInterval: UInt64
    var pingTimeout: UInt64
    var maximumResponseBodyBytes: Int
    /// Our own cap on concurrent streams, applied on top of the server's setting.
    var maximumConcurrentStreams: Int
    /// After this many streams the connection retires (stream ids are finite: 2^31 / 2).
    var maximumStreamsPerConnection: Int
    /// Tunnel through this HTTP proxy (CONNECT) before TLS; nil to connect directly.
    var proxy: HTTPProxy? = nil
    var endpoint: String {
        IPAddress.isLiteral(host) && host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// An HTTP/2 connection owned by one `EventLoop`.
///
/// The phase the connection is in (`state`) carries what only that phase needs: the connect deadline,
/// the addresses left to try, the GOAWAY details. What the per-frame paths touch (socket, TLS and nghttp2
/// handles, stream table, write buffer, read time) are plain stored properties, so that those paths read
/// them directly instead of switching over the state and copying its payload.
///
/// Lifetime: nghttp2 holds an unretained pointer to the connection; the loop's registry keeps it alive
/// from `start()` until `close()` has deleted the session, and `deinit` checks that it did. nghttp2 calls
/// back only from inside `receive` and `sendNextFrame` (HTTP2Connection+Session.swift); a `close()` asked
/// for meanwhile is deferred until that call has returned (`sessionCallDepth`, `deferredClose`).
///
/// - Important: apart from `loop`, `endpoint` and `id`, everything is confined to the loop thread.
///   Other threads reach it only through `loop.enqueue` / `loop.execute`.
final class HTTP2Connection: @unchecked Sendable {
    /// Where the connection is in its life, with the data of that phase.
    enum State {
        /// Created; `start()` has not run.
        case idle
        /// getaddrinfo runs off the loop.
        case resolving(connectDeadline: UInt64)
        /// A non-blocking TCP connect to one of the resolved addresses is under way.
        case connecting(ConnectAttempt)
        /// Connected to the proxy; asking it with CONNECT for a tunnel to the server.
        case tunneling(ProxyTunnel)
        case handshaking(connectDeadline: UInt64)
        /// TLS is up and our SETTINGS are queued; the server's first SETTINGS make the connection ready.
        case awaitingSettings(connectDeadline: UInt64)
        /// Takes new streams.
        case ready
        /// Takes no new streams; closes once the open ones have ended.
        case goingAway(GoingAway)
        case closed

        /// The phase's name, for error messages.
        var name: String {
            switch self {
            case .idle: "idle"
            case .resolving: "resolving"
            case .connecting: "connecting"
            case .tunneling: "tunneling"
            case .handshaking: "handshaking"
            case .awaitingSettings: "awaitingSettings"
            case .ready: "ready"
            case .goingAway: "goingAway"
            case .closed: "closed"
            }
        }
    }

    /// The addresses of one connect, tried in order until one accepts.
    struct ConnectAttempt {
        var connectDeadline: UInt64
        var addresses: [SocketAddress]
        /// The address to try next; the one being connected is just before it.
        var nextAddress = 0
        /// Why the last address failed, for the error once none is left.
        var lastError = ""
    }

    /// Why the connection takes no new streams.
    struct GoingAway {
        /// The last stream id of the server's GOAWAY; nil while only we retired the connection.
        var lastStreamID: Int32?
        /// The GOAWAY's details or our reason for retiring, for error messages.
        var reason: String
        /// Whether the connection had become ready (a GOAWAY may arrive before the first SETTINGS).
        var wasReady: Bool
    }

    /// A `close()` asked for while nghttp2 was calling back.
    struct DeferredClose {
        var error: HTTP2ClientError?
    }

    let loop: EventLoop
    let endpoint: String
    /// Unique in the process; reported on responses.
    let id: UInt64
    private static let nextID = Atomic<UInt64>(1)
    let settings: HTTP2ConnectionSettings
    let tls: TLSContext
    weak var delegate: (any HTTP2ConnectionDelegate)?

    // Mutable state below is loop-confined; `@exclusivity(unchecked)` drops the dynamic exclusivity checks
    // that would otherwise run on every access in the per-frame paths.
    @exclusivity(unchecked) var isQueuedForFlush = false
    @exclusivity(unchecked) var isQueuedForReport = false
    @exclusivity(unchecked) var state = State.idle
    /// The socket, or -1; watched by the loop's epoll whenever it is open.
    @exclusivity(unchecked) var fd: Int32 = -1
    @exclusivity(unchecked) var ssl: OpaquePointer?
    /// The nghttp2 session: present exactly in `awaitingSettings`, `ready` and `goingAway`.
    @exclusivity(unchecked) var session: OpaquePointer?
    /// Nesting of nghttp2 calls that may call back (mem_recv, mem_send); `close()` waits for zero.
    @exclusivity(unchecked) var sessionCallDepth = 0
    @exclusivity(unchecked) var deferredClose: DeferredClose?
    @exclusivity(unchecked) var registration: UInt64 = 0
    @exclusivity(unchecked) var watchingWritable = false
    @exclusivity(unchecked) var streams: [Int32: HTTP2StreamTicket] = [:]
    /// The stream the last callback was about: nghttp2 calls back several times in a row for one stream
    /// (each header, the frame, the close), and a comparison is cheaper than a dictionary lookup.
    @exclusivity(unchecked) var lastLookedUp: (streamID: Int32, ticket: HTTP2StreamTicket)?
    @exclusivity(unchecked) var outBuffer: [UInt8] = []
    @exclusivity(unchecked) var outOffset = 0
    @exclusivity(unchecked) var finishedSinceReport = 0
    @exclusivity(unchecked) var lastReadAt: UInt64 = 0
    @exclusivity(unchecked) var pingSentAt: UInt64 = 0
    @exclusivity(unchecked) var streamLimit = 0
    @exclusivity(unchecked) var streamsOpened = 0
    @exclusivity(unchecked) var headerFields: [nghttp2_nv] = []

    /// A request's header field as nghttp2 takes it: name and value not copied (see `submit`).
    let borrowedFlags = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
    /// The same, for a field HPACK must not index.
    var borrowedNoIndexFlags: UInt8 { borrowedFlags | UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) }

    /// Bytes of encoded frames gathered before one SSL_write; bounds memory per connection.
    static let outputBatchBytes = 64 * 1024

    init(loop: EventLoop, settings: HTTP2ConnectionSettings, tls: TLSContext, delegate: any HTTP2ConnectionDelegate) {
        self.loop = loop
        self.settings = settings
        self.tls = tls
        self.delegate = delegate
        self.endpoint = settings.endpoint
        self.id = Self.nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    deinit {
        // nghttp2 and the loop's epoll hold this object unretained; only close() lets go of them.
        precondition(
            session == nil && ssl == nil && fd < 0,
            "HTTP2Connection \(id) to \(endpoint) was released while open (\(state.name)); close() it first")
    }

    /// Number of streams open or queued in the session (loop thread).
    var openStreamCount: Int { streams.count }

    var isClosed: Bool {
        if case .closed = state { true } else { false }
    }

    var isReady: Bool {
        if case .ready = state { true } else { false }
    }
}
