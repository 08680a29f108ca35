// worker.yaml as typed settings. Decoding collects every problem at once, each with the key path
// where it is, so that a bad config stops start-up with one complete list (see ConfigurationLoader).
public import APNs

/// Everything the worker is configured with. Defaults are the documented ones (schemas/worker.schema.json).
public struct WorkerConfiguration: Sendable {
    public struct Kafka: Sendable {
        /// `bootstrap.servers`.
        public var brokers: String
        /// `group.id`. Default: `apns-worker`.
        public var groupID = "apns-worker"
        public var requestsTopic = "push.requests"
        public var outcomesTopic = "push.outcomes"
        public var invalidTokensTopic = "push.invalid-tokens"
        public var deadLetterTopic = "push.dlq"
        /// librdkafka properties for both clients (security.protocol, sasl.*, ssl.*, ...).
        public var properties: [String: String] = [:]
        public var consumerProperties: [String: String] = [:]
        public var producerProperties: [String: String] = [:]
    }

    /// How one app authenticates to APNs.
    public enum Credential: Sendable, Equatable {
        case token(keyFile: String, keyID: String, teamID: String)
        case certificate(certFile: String, passwordFile: String?)
    }

    public struct App: Sendable {
        public var bundleID: String
        public var credential: Credential
        /// Environments this app sends to; default both.
        public var environments: [APNsEnvironment] = [.production, .sandbox]
    }

    public struct Retry: Sendable {
        /// Attempts in all, the first included. Default: `5`.
        public var maxAttempts = 5
        /// Seconds. Default: `0.2`.
        public var baseBackoff = 0.2
        /// Seconds. Default: `30`.
        public var maxBackoff = 30.0
        /// Seconds from the first attempt after which no new attempt starts. Default: `300`.
        public var maxTotalTime = 300.0
    }

    public struct APNs: Sendable {
        /// Base URLs. Defaults: Apple's.
        public var productionURL = "https://api.push.apple.com"
        public var sandboxURL = "https://api.sandbox.push.apple.com"
        /// Trust this CA instead of the system store (test servers only).
        public var caFile: String?
        /// Connections per (environment, credential) pool. Default: `4`.
        public var connectionsPerPool = 4
        /// Requests waiting for a free stream, per pool, before callers are pushed back. Default: `10000`.
        public var maxQueuedRequests = 10_000
        /// Seconds. Default: `10`.
        public var requestTimeout = 10.0
        /// Seconds. Default: `5`.
        public var connectTimeout = 5.0
        public var retry = Retry()
    }

    public struct Pipeline: Sendable {
        /// Default: `1000`.
        public var maxRecordsInFlight = 1000
        /// Default: half of `maxRecordsInFlight`.
        public var resumeBelow: Int?
        /// Seconds. Default: `10`.
        public var revokeTimeout = 10.0
        /// Seconds a SIGTERM waits for in-flight work before committing and exiting. Default: `25`.
        public var drainTimeout = 25.0
    }

    public struct Rules: Sendable {
        public var file: String
        /// Reload when the file changes (checked every few seconds) and on SIGHUP. Default: `true`.
        public var watch = true
    }

    public struct Observability: Sendable {
        /// `host:port` of /metrics, /healthz and /readyz. Default: `0.0.0.0:9090`.
        public var listen = "0.0.0.0:9090"
        /// debug, info, warning or error. Default: `info`.
        public var logLevel = "info"
    }

    public var kafka: Kafka
    public var apps: [App]
    public var apns = APNs()
    public var pipeline = Pipeline()
    public var rules: Rules
    public var observability = Observability()

    public func app(bundleID: String) -> App? { apps.first { $0.bundleID == bundleID } }
}
