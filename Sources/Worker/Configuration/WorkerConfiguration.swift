// worker.yaml as typed settings. Decoding collects every problem at once, each with the key path
// where it is, so that a bad config stops start-up with one complete list (see ConfigurationLoader).

public import APNs
import Foundation

/// Everything the worker is configured with. Defaults are the documented ones (schemas/worker.schema.json).
public struct WorkerConfiguration: Sendable {
    public struct Kafka: Sendable {
        /// `bootstrap.servers`, host:port each.
        public var brokers: [String]
        /// `group.id`. Default: `apns-worker`.
        public var group = "apns-worker"
        /// `group.instance.id` for static membership; empty means dynamic membership.
        public var groupInstanceID = ""
        /// Seconds between the worker's own commits of stored offsets (when some were stored since the
        /// last); 0 leaves committing to librdkafka's auto-commit (every second). Default: `0.25`.
        public var commitInterval = 0.25
        /// Finished records after which the worker commits without waiting for `commitInterval`; nil: 5 %
        /// of `pipeline.max_in_flight_records` (see `effectiveCommitAfterRecords`).
        public var commitAfterRecords: Int?
        /// Results (outcomes, invalid tokens, dead letters, retry-topic records) are produced in Kafka
        /// transactions together with the input offsets (see README's "Exactly-once results"). Default: `false`.
        public var exactlyOnce = false
        /// Seconds between transactions in exactly-once mode (one starts sooner once `commitAfterRecords`
        /// records are ready). Default: `0.25`.
        public var transactionInterval = 0.25
        /// Seconds an assigned, unpaused partition may stand still while Kafka holds records for it before
        /// the worker counts it stranded (found after two looks this far apart) and restarts its fetching;
        /// 0 turns the watch off. Default: `60`.
        public var strandedPartitionAfter = 60.0
        public var requestsTopic = "push.requests"
        public var outcomesTopic = "push.outcomes"
        public var invalidTokensTopic = "push.invalid-tokens"
        public var deadLetterTopic = "push.dlq"
        /// Records whose pushes wait for a credential APNs refused; consumed by the worker too.
        public var retryTopic = "push.retry"
        /// librdkafka properties for both clients (security.protocol, sasl.*, ssl.*, ...); never secrets.
        public var properties: [String: String] = [:]
        /// librdkafka properties whose values are read from files (sasl.password, ...): name → path.
        public var propertyFiles: [String: String] = [:]
    }

    /// How to authenticate to APNs; apps name one. A password (of an encrypted `.p8`, of a `.p12` or of an
    /// encrypted PEM key) is read from its file, or else from `APNS_KEY_PASSWORD` / `APNS_CERT_PASSWORD`.
    public enum Credential: Sendable, Equatable {
        case token(keyFile: String, keyID: String, teamID: String, keyPasswordFile: String? = nil)
        case certificate(certFile: String, passwordFile: String?, keyFile: String?)
    }

    public struct App: Sendable {
        public var bundleID: String
        /// A key of `credentials`.
        public var credential: String
        /// The credential for the sandbox environment; default `credential`.
        public var sandboxCredential: String?

        public func credentialName(for environment: APNsEnvironment) -> String {
            environment == .sandbox ? sandboxCredential ?? credential : credential
        }
    }

    public struct Retry: Sendable {
        /// Attempts in all, the first included. Default: `5`.
        public var maxAttempts = 5
        /// Seconds. Default: `0.25`.
        public var baseBackoff = 0.25
        /// Seconds. Default: `30`.
        public var maxBackoff = 30.0
        /// Seconds from the first attempt after which no new attempt starts. Default: `300`. Time spent
        /// waiting for an APNs pool that is down is not counted.
        public var maxTotalTime = 300.0
        /// Seconds a push without an expiration waits while its APNs pool is down (its circuit breaker
        /// open) before its outcome is `expired`. Default: `3600`.
        public var maxHold = 3600.0
        /// Seconds a record parked on the retry topic (its credential refused) waits before it is tried
        /// again. Default: `30`.
        public var parkDelay = 30.0
    }

    public struct APNs: Sendable {
        /// Base URLs. Defaults: Apple's.
        public var productionURL = "https://api.push.apple.com"
        public var sandboxURL = "https://api.sandbox.push.apple.com"
        /// Trust this CA instead of the system store (test servers only).
        public var caFile: String?
        /// Connections per (environment, credential) pool, opened on first use and kept. Default: `2`.
        public var connections = 2
        /// A pool opens more connections, up to this many, while its pushes wait for a free stream (a long
        /// round trip to APNs needs more streams for the same rate): as many at once as the waiting pushes need
        /// beyond the connections still connecting, so that their handshakes overlap; it gives a grown connection
        /// back once its streams have fitted in one fewer for 60 s. Default: `24`, what a
        /// 300 ms round trip takes at full rate (docs/performance.md).
        public var maxConnections = 24
        /// Streams per connection at most (the server's setting may lower it). Default: `1000`.
        public var maxStreams = 1000
        /// Seconds. Default: `10`.
        public var requestTimeout = 10.0
        /// `apns.proxy`: an HTTP proxy (CONNECT tunnel) to reach APNs through. Default: the environment's
        /// `HTTPS_PROXY` / `NO_PROXY`.
        public var proxySetting = ProxySetting.fromEnvironment
        /// `apns.proxy_credentials_file`: a file holding `user:password` for the proxy's Basic auth.
        public var proxyCredentialsFile: String?

        public func url(for environment: APNsEnvironment) -> String {
            environment == .sandbox ? sandboxURL : productionURL
        }
    }

    public struct Pipeline: Sendable {
        /// The most records in flight. Below it the cap follows what the APNs pools can carry (their
        /// connections × the server's stream limit, ÷ the pushes per record seen), so that a long round
        /// trip still fills them; this bound is what limits memory and the work a crash redoes. At the
        /// default a 300 ms round trip still runs close to the rate of a 1 ms one (docs/performance.md).
        /// Default: `12000`.
        public var maxInFlightRecords = 12000
        /// Records in flight at or below which paused partitions resume; a partition stopped behind a
        /// slow record fetches again when it holds no more than this. Default: an eighth below the cap in
        /// force for the first, half of it for the second.
        public var resumeBelow: Int?
        /// Seconds a revoke waits for in-flight records of the revoked partitions. Default: `10`.
        public var revokeTimeout = 10.0
        /// Threads that process records and run the APNs connections (event loops). Default: the CPUs
        /// the process may use (those it may run on, capped by its cgroup's CPU quota, the pod's CPU
        /// limit), at most 8.
        public var threads: Int?

        /// `threads`, or its default.
        public var effectiveThreads: Int { threads ?? Self.defaultThreads }

        static var defaultThreads: Int { min(8, CPUAllowance.current()) }
    }

    public var kafka: Kafka
    /// By name.
    public var credentials: [String: Credential]
    /// By bundle id.
    public var apps: [String: App]
    public var apns = APNs()
    public var pipeline = Pipeline()
    public var retry = Retry()
    /// Seconds a SIGTERM waits for in-flight work before committing and exiting. Default: `25`.
    public var drainTimeout = 25.0
    /// Default: `/etc/apns-worker/rules.yaml`.
    public var rulesFile = "/etc/apns-worker/rules.yaml"
    /// `host:port` of /metrics, /healthz and /readyz. Default: `0.0.0.0:9090`.
    public var metricsListen = "0.0.0.0:9090"
    /// trace, debug, info, notice, warning, error or critical. Default: `info`.
    public var logLevel = "info"

    /// `kafka.commitAfterRecords`, or 5 % of `pipeline.maxInFlightRecords` when it is not set: the finished
    /// records after which the worker commits (or, in exactly-once mode, starts a transaction) early.
    public var effectiveCommitAfterRecords: Int {
        kafka.commitAfterRecords ?? max(1, pipeline.maxInFlightRecords / 20)
    }
}
