// The faults a simulator injects: failures, stalls, dropped connections, GOAWAY, latency and
// SETTINGS_MAX_CONCURRENT_STREAMS, by rate or by a script of actions for the Nth request or stream.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error response the simulator sends instead of processing a request.
public struct InjectedFailure: Sendable, Hashable {
    /// HTTP status, e.g. 503.
    public var status: Int
    /// Apple's reason string for the `{"reason": ...}` body, e.g. "ServiceUnavailable".
    public var reason: String
    /// Seconds for the `retry-after` header; nil sends none.
    public var retryAfterSeconds: Int?

    public init(status: Int, reason: String, retryAfterSeconds: Int? = nil) {
        self.status = status
        self.reason = reason
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// 429 TooManyRequests (too many pushes to one device).
    public static func tooManyRequests(retryAfterSeconds: Int? = nil) -> InjectedFailure {
        InjectedFailure(status: 429, reason: "TooManyRequests", retryAfterSeconds: retryAfterSeconds)
    }
    /// 500 InternalServerError.
    public static func internalServerError(retryAfterSeconds: Int? = nil) -> InjectedFailure {
        InjectedFailure(status: 500, reason: "InternalServerError", retryAfterSeconds: retryAfterSeconds)
    }
    /// 503 ServiceUnavailable.
    public static func serviceUnavailable(retryAfterSeconds: Int? = nil) -> InjectedFailure {
        InjectedFailure(status: 503, reason: "ServiceUnavailable", retryAfterSeconds: retryAfterSeconds)
    }

    /// The failure Apple sends with `status`: 429, 500 and 503 are the statuses a fault may use.
    public static func forStatus(_ status: Int, retryAfterSeconds: Int? = nil) -> InjectedFailure? {
        switch status {
        case 429: return .tooManyRequests(retryAfterSeconds: retryAfterSeconds)
        case 500: return .internalServerError(retryAfterSeconds: retryAfterSeconds)
        case 503: return .serviceUnavailable(retryAfterSeconds: retryAfterSeconds)
        default: return nil
        }
    }
}

/// How long the simulator waits before answering a stream: `fixed` plus a random jitter.
/// Delayed answers are timers; they never hold up other streams or connections.
public struct LatencyDistribution: Sendable, Hashable {
    /// The random part of the latency.
    public enum Jitter: Sendable, Hashable {
        case none
        /// Uniform between 0 and the given milliseconds.
        case uniform(maximumMilliseconds: Double)
        /// Exponential with the given mean in milliseconds (capped at 20 means to stay bounded).
        case exponential(meanMilliseconds: Double)
    }

    /// Milliseconds every answer waits. Default: 0.
    public var fixedMilliseconds: Double
    /// Default: `.none`.
    public var jitter: Jitter

    public init(fixedMilliseconds: Double = 0, jitter: Jitter = .none) {
        self.fixedMilliseconds = fixedMilliseconds
        self.jitter = jitter
    }

    /// No latency: answers go out as soon as the request is complete.
    public static let none = LatencyDistribution()

    /// True when every sample is 0.
    public var isZero: Bool { fixedMilliseconds <= 0 && jitter == .none }

    /// The mean of the samples in milliseconds (the exponential's cap at 20 means moves it by a
    /// negligible e^-20).
    public var meanMilliseconds: Double {
        let fixed = max(0, fixedMilliseconds)
        switch jitter {
        case .none: return fixed
        case .uniform(let maximum): return fixed + max(0, maximum) / 2
        case .exponential(let mean): return fixed + max(0, mean)
        }
    }

    /// One latency sample in milliseconds, drawn from `random` (a value in [0, 1) per call).
    func sampleMilliseconds(_ random: () -> Double) -> Double {
        var total = max(0, fixedMilliseconds)
        switch jitter {
        case .none:
            break
        case .uniform(let maximum):
            total += max(0, maximum) * random()
        case .exponential(let mean):
            // Inverse CDF of the exponential distribution.
            let draw = -max(0, mean) * log(1 - min(random(), 0.999_999_999))
            total += min(draw, 20 * max(0, mean))
        }
        return total
    }
}

/// What a scripted fault or a rate does to one stream.
public enum FaultAction: Sendable, Hashable {
    /// Answer with this failure instead of processing the request.
    case fail(InjectedFailure)
    /// Never answer the stream (the client's timeout must fire).
    case stall
    /// Close the TCP connection at once, without GOAWAY: every stream on it is lost.
    case dropConnection
    /// Send GOAWAY (NO_ERROR, debug data `{"reason":"Shutdown"}`) and close the connection once
    /// the streams at or below last-stream-id are answered. With `processThisStream` the
    /// last-stream-id is this stream, which is answered normally; without it the last-stream-id is
    /// the stream before, so this stream and every later one on the connection stay unprocessed.
    case goAway(processThisStream: Bool)
    /// Delay this stream's answer by extra milliseconds on top of the latency distribution.
    case delay(milliseconds: Int)
    /// Announce a new SETTINGS_MAX_CONCURRENT_STREAMS on this connection, then process the stream.
    case setMaxConcurrentStreams(UInt32)
}

/// One entry of a fault script: an action applied to the Nth request overall or to the Nth
/// stream of every connection.
public struct ScriptedFault: Sendable, Hashable {
    /// Which stream the action applies to.
    public enum Trigger: Sendable, Hashable {
        /// The Nth request (1-based) the simulator receives on any connection after `setFaults`.
        case request(Int)
        /// The Nth stream (1-based) of each connection.
        case stream(Int)
    }
    public var trigger: Trigger
    public var action: FaultAction

    public init(_ trigger: Trigger, _ action: FaultAction) {
        self.trigger = trigger
        self.action = action
    }
}

/// Every fault the simulator injects. Change it at run time with `APNsSimulator.setFaults(_:)`.
/// Rates are probabilities in [0, 1], drawn per request from a per-connection seeded generator.
public struct SimulatorFaults: Sendable, Hashable {
    /// Fraction of requests answered with `failure`. Default: 0.
    public var failureRate: Double = 0
    /// The failure `failureRate` sends. Default: 503 ServiceUnavailable without Retry-After.
    public var failure: InjectedFailure = .serviceUnavailable()
    /// Fraction of requests never answered. Default: 0.
    public var stallRate: Double = 0
    /// Fraction of requests whose connection is closed at once. Default: 0.
    public var dropConnectionRate: Double = 0
    /// Latency of every answer. Default: none.
    public var latency: LatencyDistribution = .none
    /// How long a new connection's TLS handshake waits before the simulator answers its ClientHello, in
    /// milliseconds: what a far server's TCP and TLS round trips cost a real connection before its first
    /// request (a loopback connection costs nothing, which hides how a pool grows against Apple). Read when
    /// the connection is accepted. Default: 0.
    public var handshakeMilliseconds: Double = 0
    /// Per connection: after this many streams, send GOAWAY with the last stream's id; later streams
    /// stay unprocessed. Default: nil (never).
    public var goAwayAfterStreams: Int?
    /// SETTINGS_MAX_CONCURRENT_STREAMS announced to every connection; a change is sent to open
    /// connections at once. Default: 1000 (what APNs commonly announces).
    public var maxConcurrentStreams: UInt32 = 1000
    /// What a connection's SETTINGS_MAX_CONCURRENT_STREAMS drops to after APNs refuses a request's provider
    /// token on it (403 InvalidProviderToken, ExpiredProviderToken, MissingProviderToken), as APNs has been
    /// seen to drop it to 1; the connection's next accepted request announces `maxConcurrentStreams` again.
    /// Default: nil (the limit stays).
    public var streamLimitAfterRefusedToken: UInt32?
    /// Actions for particular requests or streams, applied before the rates. Default: none.
    public var script: [ScriptedFault] = []
    /// APNs' limit on pushes to one device: a device token that got this many requests within the
    /// window gets 429 TooManyRequests for the rest of it. Default: nil (no limit).
    public var deviceLimit: DeviceRequestLimit?

    public init() {}

    /// No faults, 1000 concurrent streams.
    public static let none = SimulatorFaults()

    /// Checks that rates are probabilities and counts are positive; says which value is wrong.
    public func validate() throws(SimulatorError) {
        for (name, rate) in [
            ("failureRate", failureRate), ("stallRate", stallRate),
            ("dropConnectionRate", dropConnectionRate),
        ]
        where !(rate >= 0 && rate <= 1) {
            throw SimulatorError(.configuration, "faults.\(name) must be between 0 and 1, got \(rate)")
        }
        if failureRate + stallRate + dropConnectionRate > 1 {
            throw SimulatorError(
                .configuration,
                "faults: failureRate + stallRate + dropConnectionRate must not exceed 1")
        }
        if let after = goAwayAfterStreams, after < 1 {
            throw SimulatorError(.configuration, "faults.goAwayAfterStreams must be at least 1, got \(after)")
        }
        if maxConcurrentStreams == 0 {
            throw SimulatorError(.configuration, "faults.maxConcurrentStreams must be at least 1")
        }
        if streamLimitAfterRefusedToken == 0 {
            throw SimulatorError(.configuration, "faults.streamLimitAfterRefusedToken must be at least 1")
        }
        if let deviceLimit, deviceLimit.requests < 1 || deviceLimit.windowMilliseconds < 1 {
            throw SimulatorError(
                .configuration,
                "faults.deviceLimit: requests and perMs must be at least 1, got "
                    + "\(deviceLimit.requests) and \(deviceLimit.windowMilliseconds)")
        }
        if !(handshakeMilliseconds >= 0 && handshakeMilliseconds.isFinite) {
            throw SimulatorError(.configuration, "faults.handshakeMs must be a number of milliseconds, 0 or more")
        }
        if !(latency.fixedMilliseconds >= 0) {
            throw SimulatorError(.configuration, "faults.latency.fixedMs must not be negative")
        }
        switch latency.jitter {
        case .none: break
        case .uniform(let value), .exponential(let value):
            if !(value >= 0) { throw SimulatorError(.configuration, "faults.latency jitter must not be negative") }
        }
        for (index, entry) in script.enumerated() {
            switch entry.trigger {
            case .request(let n), .stream(let n):
                if n < 1 {
                    throw SimulatorError(.configuration, "faults.script[\(index)]: request/stream numbers start at 1")
                }
            }
            switch entry.action {
            case .setMaxConcurrentStreams(0):
                throw SimulatorError(
                    .configuration, "faults.script[\(index)]: maxConcurrentStreams must be at least 1")
            case .delay(let ms) where ms < 0:
                throw SimulatorError(.configuration, "faults.script[\(index)]: delay must not be negative")
            default: break
            }
        }
    }
}

/// At most `requests` requests to one device token per window of `windowMilliseconds` (fixed windows that
/// start at a token's first request); requests beyond it are answered 429 TooManyRequests, and they
/// count too, so a client that keeps sending stays refused until the window ends.
public struct DeviceRequestLimit: Sendable, Hashable {
    public var requests: Int
    public var windowMilliseconds: Int

    public init(requests: Int, windowMilliseconds: Int) {
        self.requests = requests
        self.windowMilliseconds = windowMilliseconds
    }
}
