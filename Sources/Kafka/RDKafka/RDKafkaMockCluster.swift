// Owns librdkafka's mock cluster and the client handle that hosts it; MockKafkaCluster puts the
// checks and the Swift API on top.

internal import CRdKafka

/// Owns one `rd_kafka_mock_cluster_t` and its hosting `rd_kafka_t`. Its methods are thread-safe and do
/// not block, except ``destroy()``.
final class RDKafkaMockCluster: @unchecked Sendable {
    private let client: OpaquePointer
    private let cluster: OpaquePointer

    /// Starts a cluster of `brokers` brokers.
    /// - Throws: ``KafkaError/Code/mockCluster`` if librdkafka cannot start it.
    init(brokers: Int) throws(KafkaError) {
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
        self.client = client
        self.cluster = cluster
    }

    /// `host:port,host:port,...` of the brokers.
    var bootstrapServers: String { String(cString: rd_kafka_mock_cluster_bootstraps(cluster)) }

    func createTopic(_ name: String, partitions: Int, replicationFactor: Int) -> RDKafkaResponse {
        RDKafkaResponse(
            rd_kafka_mock_topic_create(
                cluster, name, Int32(clamping: partitions), Int32(clamping: replicationFactor)))
    }

    func setBroker(_ id: Int32, up: Bool) -> RDKafkaResponse {
        RDKafkaResponse(up ? rd_kafka_mock_broker_set_up(cluster, id) : rd_kafka_mock_broker_set_down(cluster, id))
    }

    /// Delays every answer of broker `id` by `milliseconds` (0: answers at once). Requests are still taken
    /// and applied at once; only their answers wait.
    func setBroker(_ id: Int32, roundTripMilliseconds milliseconds: Int32) -> RDKafkaResponse {
        RDKafkaResponse(rd_kafka_mock_broker_set_rtt(cluster, id, milliseconds))
    }

    /// Makes the cluster answer its next `count` produce requests with `MSG_SIZE_TOO_LARGE`.
    func refuseNextProduceRequestsAsTooLarge(_ count: Int) -> RDKafkaResponse {
        let errors = [rd_kafka_resp_err_t](repeating: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, count: max(0, count))
        // 0 is the Kafka protocol's ApiKey of Produce.
        rd_kafka_mock_push_request_errors_array(cluster, 0, errors.count, errors)
        return .noError
    }

    /// Destroys the cluster, then its hosting handle. Blocks while librdkafka joins its threads
    /// (up to about a second), so it runs on a thread of its own.
    func destroy() {
        rd_kafka_mock_cluster_destroy(cluster)
        rd_kafka_destroy(client)
    }
}
