// Settings of the idempotent producer.

/// Settings of a ``KafkaProducer``.
///
/// The producer is idempotent by default (`enable.idempotence=true`, which implies `acks=all` and
/// ordered, duplicate-free retries per partition).
///
/// By default it waits through broker outages instead of failing records: librdkafka retries a record
/// until a broker takes it (`message.timeout.ms=0`), and a send into a full local queue waits for room
/// until the producer closes. An outage is visible through ``KafkaProducer/status`` instead.
public struct KafkaProducerConfiguration: Sendable {
    /// Brokers, client id and pass-through properties. A `message.timeout.ms` (or `delivery.timeout.ms`)
    /// among the pass-through properties overrides ``deliveryTimeout``; so does a `transactional.id`,
    /// whose `transaction.timeout.ms` librdkafka then applies as the delivery timeout.
    public var client: KafkaConfiguration
    /// Exactly-once per partition within a producer session (`enable.idempotence`). Default: `true`.
    public var enableIdempotence: Bool = true
    /// How long a message may wait to be batched (`linger.ms`). Default: 5 ms.
    public var linger: Duration = .milliseconds(5)
    /// How long librdkafka keeps retrying a message before its delivery report fails with `_MSG_TIMED_OUT`
    /// (`message.timeout.ms`); `nil` retries until a broker takes it (`0`, infinite). Default: `nil`.
    ///
    /// Infinite is compatible with idempotence (librdkafka keeps the sequence numbers of retried
    /// messages); with a finite timeout an idempotent producer bumps its epoch after a timeout.
    public var deliveryTimeout: Duration?
    /// How many messages the local queue holds (`queue.buffering.max.messages`). Default: 100 000.
    public var queueCapacity: Int = 100_000
    /// How long a send waits for room when the local queue is full before failing with
    /// ``KafkaError/Code/queueFull``; `nil` waits until the producer closes. Default: `nil`.
    public var enqueueTimeout: Duration?
    /// How long records may go unacknowledged (none acknowledged meanwhile) before ``KafkaProducer/status``
    /// says that they wait for the brokers. Default: 5 seconds.
    public var acknowledgementWaitThreshold: Duration = .seconds(5)
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
            ("queue.buffering.max.messages", String(queueCapacity)),
        ]
        // A transactional producer must not set a delivery timeout beyond its transaction timeout:
        // leave it to librdkafka, which derives one from `transaction.timeout.ms`.
        let overridden = ["message.timeout.ms", "delivery.timeout.ms", "transactional.id"]
            .contains { client.properties[$0] != nil }
        if !overridden {
            own.append(("message.timeout.ms", String(deliveryTimeout?.wholeMilliseconds ?? 0)))
        }
        if let statisticsInterval {
            own.append(("statistics.interval.ms", String(statisticsInterval.wholeMilliseconds)))
        }
        return client.librdkafkaProperties(with: own)
    }
}
