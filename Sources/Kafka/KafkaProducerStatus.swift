// Whether a producer's records wait for the brokers: the value readiness probes and logs read, and
// the handler told of each change.

/// What a producer's records are doing: how many wait for their delivery report, and whether they
/// wait for the brokers (none acknowledged for longer than the configured threshold).
public struct KafkaProducerStatus: Sendable, Equatable, CustomStringConvertible {
    /// Records handed to the producer (enqueued) whose delivery report has not come yet.
    public var unacknowledged: Int
    /// Whether records have gone unacknowledged, with none acknowledged, for longer than the
    /// producer's `acknowledgementWaitThreshold`.
    public var isWaitingForBrokers: Bool
    /// While waiting: how long since the last acknowledgement (or since the first of the waiting
    /// records was enqueued, if later).
    public var waitingFor: Duration?
    /// librdkafka's last connection error since the last acknowledgement, if any.
    public var cause: String?

    public var description: String {
        guard isWaitingForBrokers else { return "\(unacknowledged) records unacknowledged" }
        let seconds = Double((waitingFor ?? .zero).wholeMilliseconds) / 1000
        return "\(unacknowledged) records unacknowledged for \(seconds) s" + (cause.map { " (\($0))" } ?? "")
    }
}

/// Receives a producer's status when its records start waiting for the brokers and when they are
/// acknowledged again, on the producer's poll thread. It must return quickly.
public typealias KafkaProducerStatusHandler = @Sendable (KafkaProducerStatus) -> Void
