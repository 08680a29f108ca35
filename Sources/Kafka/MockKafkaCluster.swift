// librdkafka's built-in mock cluster: in-process brokers on loopback ports, for tests and `apns-worker dev`.

import Platform
import Synchronization

/// A Kafka cluster simulated in this process by librdkafka (its mock cluster).
///
/// Its brokers listen on 127.0.0.1 on ports the OS picks; point clients at ``bootstrapServers``.
/// It supports producing (also idempotent), consumer groups with offset commits, and fault
/// injection such as taking brokers down. Broker ids run from 1 to the broker count.
///
/// - Important: librdkafka calls this API experimental. Methods are thread-safe. Those that change the
///   cluster wait for librdkafka's mock thread to apply the change (up to a fraction of a second);
///   ``stop()`` waits for the teardown without blocking a thread of the cooperative pool.
public final class MockKafkaCluster: Sendable {
    /// `host:port,host:port,...` of the brokers, for `bootstrap.servers`.
    public let bootstrapServers: String
    /// How many brokers the cluster has (ids 1...brokerCount).
    public let brokerCount: Int
    private let cluster: Mutex<RDKafkaMockCluster?>

    /// Starts a cluster of `brokers` brokers.
    /// - Throws: ``KafkaError/Code/mockCluster`` if librdkafka cannot start it.
    public init(brokers: Int = 3) throws(KafkaError) {
        guard (1...64).contains(brokers) else {
            throw KafkaError(code: .mockCluster, message: "a mock cluster needs 1 to 64 brokers, got \(brokers)")
        }
        let cluster = try RDKafkaMockCluster(brokers: brokers)
        bootstrapServers = cluster.bootstrapServers
        brokerCount = brokers
        self.cluster = Mutex(cluster)
    }

    /// Creates `name` with `partitions` partitions, each with `replicationFactor` replicas
    /// (at most the broker count). Leaders are spread over the brokers.
    public func createTopic(_ name: String, partitions: Int, replicationFactor: Int = 1) throws(KafkaError) {
        guard partitions >= 1 else {
            throw KafkaError(
                code: .mockCluster, message: "topic '\(name)' needs at least 1 partition, got \(partitions)"
            )
        }
        guard (1...brokerCount).contains(replicationFactor) else {
            throw KafkaError(
                code: .mockCluster,
                message: "topic '\(name)': replication factor must be 1...\(brokerCount) (the broker count), "
                    + "got \(replicationFactor)"
            )
        }
        try withCluster("creating topic '\(name)'") { cluster in
            cluster.createTopic(name, partitions: partitions, replicationFactor: replicationFactor)
        }
    }

    /// Disconnects broker `id` (1...brokerCount) and refuses new connections until ``setBrokerUp(_:)``.
    /// Its partitions keep it as leader, so clients wait and retry.
    ///
    /// Waits, too, for a child process being started in this process to finish starting (see
    /// `ChildSpawnFence`): librdkafka re-binds the broker's port, and aborts if it cannot.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        try checkBroker(id)
        // The broker's listener is closed and its port bound again at once: no child may start meanwhile.
        try ChildSpawnFence.closingListener { () throws(KafkaError) in
            try withCluster("taking broker \(id) down") { $0.setBroker(id, up: false) }
        }
    }

    /// Lets broker `id` accept connections again.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        try checkBroker(id)
        try withCluster("bringing broker \(id) up") { $0.setBroker(id, up: true) }
    }

    /// Makes broker `id` answer every request `delay` late (`.zero`: at once), as a broker behind a path that
    /// went dark, or one stalled, does to its clients: connections stay up and nothing is refused, but
    /// nothing is answered. The requests themselves are applied at once (a produced record is appended).
    public func setBrokerAnswerDelay(_ id: Int32, _ delay: Duration) throws(KafkaError) {
        try checkBroker(id)
        let milliseconds = Int32(clamping: delay.wholeMilliseconds)
        try withCluster("delaying broker \(id)'s answers") { $0.setBroker(id, roundTripMilliseconds: milliseconds) }
    }

    /// Makes the cluster answer its next `count` produce requests with `MSG_SIZE_TOO_LARGE`, as a broker
    /// whose `message.max.bytes` is below the producer's does: the records of those requests fail in their
    /// delivery reports.
    public func refuseNextProduceRequestsAsTooLarge(_ count: Int) throws(KafkaError) {
        try withCluster("refusing produce requests") { $0.refuseNextProduceRequestsAsTooLarge(count) }
    }

    deinit {
        if let cluster = cluster.withLock({ $0.take() }) {
            DedicatedThread.start(name: "kafka-mock-destroy") { cluster.destroy() }
        }
    }

    /// Shuts the cluster down and closes its ports; returns when they are closed. The blocking
    /// teardown runs on a dedicated thread. Later calls of other methods throw
    /// ``KafkaError/Code/closed``. Safe to call more than once.
    public func stop() async {
        guard let cluster = cluster.withLock({ $0.take() }) else { return }
        try? await DedicatedThread.run(name: "kafka-mock-destroy") { cluster.destroy() }
    }

    private func checkBroker(_ id: Int32) throws(KafkaError) {
        guard id >= 1, id <= brokerCount else {
            throw KafkaError(code: .mockCluster, message: "no broker \(id); broker ids are 1...\(brokerCount)")
        }
    }

    private func withCluster(
        _ context: String, _ body: (RDKafkaMockCluster) -> RDKafkaResponse
    ) throws(KafkaError) {
        let response: RDKafkaResponse? = cluster.withLock { cluster in cluster.map(body) }
        guard let response else {
            throw KafkaError(code: .closed, message: "\(context): the mock cluster was stopped")
        }
        guard response.isSuccess else {
            throw KafkaError(.mockCluster, context, response: response)
        }
    }
}
