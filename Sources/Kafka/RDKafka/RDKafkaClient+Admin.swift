// Creating topics through librdkafka's admin API (CreateTopics), on any client's handle: for tools that
// run against a broker they set up themselves (`bench pipeline --kafka-brokers`), never for the worker,
// whose topics are the operator's.

internal import CRdKafka

extension RDKafkaClient {
    /// Creates each topic with its partition count and replication factor, waiting at most `milliseconds`
    /// for the controller's answer. Blocking: call it from a thread of its own.
    /// - Returns: one line per topic the broker refused (`name: reason`); empty when all were created.
    /// - Throws: ``KafkaError/Code/query`` when the request itself failed, ``KafkaError/Code/timeout`` when no
    ///   answer came.
    func createTopics(_ topics: [(name: String, partitions: Int, replicationFactor: Int)], milliseconds: Int32)
        throws(KafkaError) -> [String]
    {
        var newTopics: [OpaquePointer?] = []
        defer { for topic in newTopics { rd_kafka_NewTopic_destroy(topic) } }
        for topic in topics {
            let (newTopic, reason) = withErrorBuffer { buffer, size in
                rd_kafka_NewTopic_new(
                    topic.name, Int32(clamping: topic.partitions), Int32(clamping: topic.replicationFactor), buffer,
                    size)
            }
            guard let newTopic else {
                throw KafkaError(code: .query, message: "topic '\(topic.name)' cannot be created: \(reason)")
            }
            newTopics.append(newTopic)
        }
        guard let queue = rd_kafka_queue_new(handle) else {
            throw KafkaError(code: .query, message: "creating topics: librdkafka gave no result queue")
        }
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        _ = withErrorBuffer { buffer, size in
            rd_kafka_AdminOptions_set_request_timeout(options, milliseconds, buffer, size)
        }
        _ = withErrorBuffer { buffer, size in
            rd_kafka_AdminOptions_set_operation_timeout(options, milliseconds, buffer, size)
        }
        newTopics.withUnsafeMutableBufferPointer { pointers in
            rd_kafka_CreateTopics(handle, pointers.baseAddress, pointers.count, options, queue)
        }
        // The request timeout bounds the answer; the extra second covers librdkafka's own scheduling.
        guard let event = rd_kafka_queue_poll(queue, milliseconds + 1000) else {
            throw KafkaError(code: .timeout, message: "creating topics: no answer within \(milliseconds) ms")
        }
        defer { rd_kafka_event_destroy(event) }
        let failure = rd_kafka_event_error(event)
        guard failure == RD_KAFKA_RESP_ERR_NO_ERROR else {
            let text = rd_kafka_event_error_string(event).map { String(cString: $0) } ?? ""
            throw KafkaError(
                code: .query, message: "creating topics: \(text)", librdkafkaCode: failure.rawValue,
                librdkafkaName: RDKafkaResponse(failure).name)
        }
        guard let result = rd_kafka_event_CreateTopics_result(event) else { return [] }
        var count = 0
        guard let answers = rd_kafka_CreateTopics_result_topics(result, &count) else { return [] }
        var refused: [String] = []
        for index in 0..<count {
            guard let answer = answers[index], rd_kafka_topic_result_error(answer) != RD_KAFKA_RESP_ERR_NO_ERROR
            else { continue }
            let name = String(cString: rd_kafka_topic_result_name(answer))
            let reason =
                rd_kafka_topic_result_error_string(answer).map { String(cString: $0) }
                ?? RDKafkaResponse(rd_kafka_topic_result_error(answer)).text
            refused.append("\(name): \(reason)")
        }
        return refused
    }
}
