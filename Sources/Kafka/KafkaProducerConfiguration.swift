// Settings of the idempotent producer.

/// Settings of a ``KafkaProducer``.
///
/// The producer is idempotent by default (`enable.idempotence=true`, which implies `acks=all` and
/// ordered, duplicate-free retries per partition).
public struct KafkaProducerConfiguration: Sendable {
    /// Brokers, client id and pass-through properties.
    public var client: KafkaConfiguration
    /// Exactly-once per partition within a producer session (`enable.idempotence`). Default: `true`.
    public var enableIdempotence: Bool = true
    /// How long a message may wait to be batched (`linger.ms`). Default: 5 ms.
    public var linger: Duration = .milliseconds(5)
    /// How long librdkafka keeps retrying a message before its delivery report fails
    /// (`message.timeout.ms`). Default: 120 seconds.
    public var deliveryTimeout: Duration = .seconds(120)
    /// How many messages the local queue holds (`queue.buffering.max.messages`). Default: 100 000.
    public var queueCapacity: Int = 100_000
    /// How long a send waits for room when the local queue is full before failing with
    /// ``KafkaError/Code/queueFull``. Default: 10 seconds.
    public var enqueueTimeout: Duration = .seconds(10)
    /// How often librdkafka emits statistics JSON as ``KafkaEvent/statistics(_:)``. Default: `nil` (off).
    public var statisticsInterval: Duration?

    public init(client: KafkaConfiguration) {
        self.client = client
    }

    /// The full librdkafka property list, in the order it is applied (later wins).
    func librdkafkaProperties() -> [(String, String)] {
        var own: [(String, String)] = [
            ("enable.idempotence", enableIdempotence ? "true" : "false"),
            ("linger.ms", String(linger.wholeMilliseconds)),
            ("message.timeout.ms", String(deliveryTimeout.wholeMilliseconds)),
            ("queue.buffering.max.messages", String(queueCapacity)),
        ]
        if let statisticsInterval {
            own.append(("statistics.interval.ms", String(statisticsInterval.wholeMilliseconds)))
        }
        return client.librdkafkaProperties(with: own)
    }
}
