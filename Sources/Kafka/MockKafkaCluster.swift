// librdkafka's built-in mock cluster: in-process brokers on loopback ports, for tests and `apns-worker dev`.
internal import CRdKafka
import Synchronization

/// A Kafka cluster simulated in this process by librdkafka (`rd_kafka_mock_cluster_new`).
///
/// Its brokers listen on 127.0.0.1 on ports the OS picks; point clients at ``bootstrapServers``.
/// It supports producing (also idempotent), consumer groups with offset commits, and fault
/// injection such as taking brokers down. Broker ids run from 1 to the broker count.
///
/// - Important: librdkafka calls this API experimental. Methods are thread-safe and do not block;
///   ``stop()`` waits for the teardown without blocking a thread of the cooperative pool.
public final class MockKafkaCluster: Sendable {
    /// Owns the mock cluster and the client handle librdkafka needs to host it.
    private final class Handles: @unchecked Sendable {
        let client: OpaquePointer
        let cluster: OpaquePointer

        init(client: OpaquePointer, cluster: OpaquePointer) {
            self.client = client
            self.cluster = cluster
        }

        /// Destroys the cluster, then its hosting handle. Blocks while librdkafka joins its threads
        /// (up to about a second), so it runs on a thread of its own.
        func destroy() {
            rd_kafka_mock_cluster_destroy(cluster)
            rd_kafka_destroy(client)
        }
    }

    /// `host:port,host:port,...` of the brokers, for `bootstrap.servers`.
    public let bootstrapServers: String
    /// How many brokers the cluster has (ids 1...brokerCount).
    public let brokerCount: Int
    private let handles: Mutex<Handles?>

    /// Starts a cluster of `brokers` brokers.
    /// - Throws: ``KafkaError/Code/mockCluster`` if librdkafka cannot start it.
    public init(brokers: Int = 3) throws(KafkaError) {
        guard (1...64).contains(brokers) else {
            throw KafkaError(code: .mockCluster, message: "a mock cluster needs 1 to 64 brokers, got \(brokers)")
        }
        // The hosting handle never connects anywhere; it only runs the cluster, so keep it quiet.
        let properties = [("log_level", "3")]
        let conf = try RDKafkaClient.makeConf(properties: properties, redactor: SecretRedactor(properties: []))
        let (client, reason) = withErrorBuffer { buffer, size in rd_kafka_new(RD_KAFKA_PRODUCER, conf, buffer, size) }
        guard let client else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(
                code: .mockCluster, message: "could not create the mock cluster's client handle: \(reason)"
            )
        }
        guard let cluster = rd_kafka_mock_cluster_new(client, Int32(brokers)) else {
            rd_kafka_destroy(client)
            throw KafkaError(
                code: .mockCluster, message: "librdkafka could not start a mock cluster of \(brokers) brokers"
            )
        }
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
        brokerCount = brokers
        handles = Mutex(Handles(client: client, cluster: cluster))
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
            rd_kafka_mock_topic_create(cluster, name, Int32(clamping: partitions), Int32(clamping: replicationFactor))
        }
    }

    /// Disconnects broker `id` (1...brokerCount) and refuses new connections until ``setBrokerUp(_:)``.
    /// Its partitions keep it as leader, so clients wait and retry.
    public func setBrokerDown(_ id: Int32) throws(KafkaError) {
        try checkBroker(id)
        try withCluster("taking broker \(id) down") { rd_kafka_mock_broker_set_down($0, id) }
    }

    /// Lets broker `id` accept connections again.
    public func setBrokerUp(_ id: Int32) throws(KafkaError) {
        try checkBroker(id)
        try withCluster("bringing broker \(id) up") { rd_kafka_mock_broker_set_up($0, id) }
    }

    /// Makes the cluster answer its next `count` produce requests with `MSG_SIZE_TOO_LARGE`, as a broker
    /// whose `message.max.bytes` is below the producer's does: the records of those requests fail in their
    /// delivery reports.
    public func refuseNextProduceRequestsAsTooLarge(_ count: Int) throws(KafkaError) {
        let errors = [rd_kafka_resp_err_t](repeating: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, count: max(0, count))
        try withCluster("refusing produce requests") { cluster in
            // 0 is the Kafka protocol's ApiKey of Produce.
            rd_kafka_mock_push_request_errors_array(cluster, 0, errors.count, errors)
            return RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    deinit {
        if let handles = handles.withLock({ $0.take() }) {
            DedicatedThread.start(name: "kafka-mock-destroy") { handles.destroy() }
        }
    }

    /// Shuts the cluster down and closes its ports; returns when they are closed. The blocking
    /// teardown runs on a dedicated thread. Later calls of other methods throw
    /// ``KafkaError/Code/closed``. Safe to call more than once.
    public func stop() async {
        guard let handles = handles.withLock({ $0.take() }) else { return }
        try? await DedicatedThread.run(name: "kafka-mock-destroy") { handles.destroy() }
    }

    private func checkBroker(_ id: Int32) throws(KafkaError) {
        guard id >= 1, id <= brokerCount else {
            throw KafkaError(code: .mockCluster, message: "no broker \(id); broker ids are 1...\(brokerCount)")
        }
    }

    private func withCluster(
        _ context: String, _ body: (OpaquePointer) -> rd_kafka_resp_err_t
    ) throws(KafkaError) {
        let response: rd_kafka_resp_err_t? = handles.withLock { handles in
            handles.map { body($0.cluster) }
        }
        guard let response else {
            throw KafkaError(code: .closed, message: "\(context): the mock cluster was stopped")
        }
        guard response == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.mockCluster, context, response: response)
        }
    }
}
