// The consumer's librdkafka calls: subscribing, polling for records, the assignment and positions,
// storing and committing offsets, pausing partitions and closing.

internal import CRdKafka

/// What one consumer poll returned, copied out of the C message (which is freed before this is seen).
enum RDKafkaConsumerEvent {
    case message(KafkaConsumerMessage)
    /// The end of a partition was reached; nothing to do.
    case partitionEnd
    /// The client hit a fatal error.
    case fatal
    /// A consumer error; `context` is librdkafka's text, prefixed with the partition when it has one.
    case error(RDKafkaResponse, context: String)
}

extension RDKafkaClient {
    /// Routes the main queue (errors, statistics, rebalances) through ``consumerPoll(milliseconds:)``.
    func redirectMainQueueToConsumerPoll() {
        rd_kafka_poll_set_consumer(handle)
    }

    /// Subscribes to `topics`, replacing any earlier subscription. Waits only for librdkafka's main thread.
    func subscribe(topics: [String]) throws(KafkaError) {
        let list = RDKafkaTopicPartitionList(
            topics.map { KafkaTopicPartition(topic: $0, partition: RD_KAFKA_PARTITION_UA) }
        )
        let response = rd_kafka_subscribe(handle, list.pointer)
        guard response == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.subscription, "subscribing to \(topics.joined(separator: ", "))", response: response)
        }
    }

    /// Waits at most `milliseconds` for a record or a consumer event, serving callbacks meanwhile.
    func consumerPoll(milliseconds: Int32) -> RDKafkaConsumerEvent? {
        guard let message = rd_kafka_consumer_poll(handle, milliseconds) else { return nil }
        defer { rd_kafka_message_destroy(message) }
        let response = message.pointee.err
        if response == RD_KAFKA_RESP_ERR_NO_ERROR { return .message(KafkaConsumerMessage(copying: message)) }
        if response == RD_KAFKA_RESP_ERR__FATAL { return .fatal }
        if response == RD_KAFKA_RESP_ERR__PARTITION_EOF { return .partitionEnd }
        var context = String(cString: rd_kafka_message_errstr(message))
        if let topic = message.pointee.rkt {
            let name = String(cString: rd_kafka_topic_name(topic))
            context = "\(name)[\(message.pointee.partition)]: " + context
        }
        return .error(RDKafkaResponse(response), context: context)
    }

    /// How many records and events wait in the consumer's queue: fetched, not yet polled.
    func consumerQueueLength() -> Int {
        guard let queue = rd_kafka_queue_get_consumer(handle) else { return 0 }
        defer { rd_kafka_queue_destroy(queue) }
        return rd_kafka_queue_length(queue)
    }

    /// Like ``consumerPoll(milliseconds:)``, but drops what it receives without reading it.
    func consumerPollDiscarding(milliseconds: Int32) {
        if let message = rd_kafka_consumer_poll(handle, milliseconds) { rd_kafka_message_destroy(message) }
    }

    /// Serves the final revoke, commits and leaves the group. Blocking, and unbounded while the
    /// cluster is away.
    func closeConsumer() -> RDKafkaResponse {
        RDKafkaResponse(rd_kafka_consumer_close(handle))
    }

    /// The assigned partitions with librdkafka's current position (next offset to hand out; negative
    /// when unknown). Waits only for librdkafka's main thread.
    func assignment(withPositions: Bool = false) throws(KafkaError) -> [RDKafkaPartitionEntry] {
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        let response = rd_kafka_assignment(handle, &list)
        guard response == RD_KAFKA_RESP_ERR_NO_ERROR, let list else {
            throw KafkaError(.query, "reading the assignment", response: response)
        }
        let assignment = RDKafkaTopicPartitionList(taking: list)
        if withPositions {
            let positionResponse = rd_kafka_position(handle, assignment.pointer)
            guard positionResponse == RD_KAFKA_RESP_ERR_NO_ERROR else {
                throw KafkaError(.query, "reading positions", response: positionResponse)
            }
        }
        return assignment.entries
    }

    /// The high watermark of `partition` as of the last fetch (no broker call), if known.
    func cachedHighWatermark(of partition: KafkaTopicPartition) -> Int64? {
        var low: Int64 = 0
        var high: Int64 = 0
        let known =
            rd_kafka_get_watermark_offsets(
                handle, partition.topic, partition.partition, &low, &high
            ) == RD_KAFKA_RESP_ERR_NO_ERROR
        return known && high >= 0 ? high : nil
    }

    /// The offsets the brokers give for `partitions` at `logicalOffset`: `RDKafkaClient.latestOffset` is the
    /// next offset a reader can get (the high watermark, or the last stable offset under `read_committed`),
    /// `RDKafkaClient.earliestOffset` the first one still kept. One ListOffsets request per leader (librdkafka's
    /// `offsets_for_times` with the protocol's logical timestamps); blocking, at most `timeoutMilliseconds`.
    /// Partitions the brokers did not answer for are absent.
    func listOffsets(
        _ partitions: [KafkaTopicPartition], at logicalOffset: Int64, timeoutMilliseconds: Int32
    ) -> [KafkaTopicPartition: Int64] {
        guard !partitions.isEmpty else { return [:] }
        let list = RDKafkaTopicPartitionList(partitions, offset: logicalOffset)
        guard rd_kafka_offsets_for_times(handle, list.pointer, timeoutMilliseconds) == RD_KAFKA_RESP_ERR_NO_ERROR
        else { return [:] }
        var offsets: [KafkaTopicPartition: Int64] = [:]
        for entry in list.entries where entry.error == RD_KAFKA_RESP_ERR_NO_ERROR && entry.offset >= 0 {
            offsets[entry.topicPartition] = entry.offset
        }
        return offsets
    }

    /// ListOffsets' logical timestamps (KIP-79): the latest offset and the earliest one.
    static let latestOffset = Int64(RD_KAFKA_OFFSET_END)
    static let earliestOffset = Int64(RD_KAFKA_OFFSET_BEGINNING)
    /// The position of a partition that has handed over nothing since its assignment.
    static let invalidOffset = Int64(RD_KAFKA_OFFSET_INVALID)

    /// Moves the fetch positions of assigned partitions to `offsets`, dropping what was prefetched for
    /// them, and waits (at most `timeoutMilliseconds`) until the fetcher has taken the new positions, so
    /// that nothing fetched from the old one reaches the reader. Returns the partitions moved.
    func seek(_ offsets: [(KafkaTopicPartition, Int64)], timeoutMilliseconds: Int32) -> [KafkaTopicPartition] {
        let list = RDKafkaTopicPartitionList(offsets: offsets)
        if let error = rd_kafka_seek_partitions(handle, list.pointer, timeoutMilliseconds) {
            rd_kafka_error_destroy(error)
            return []
        }
        return list.entries.filter { $0.error == RD_KAFKA_RESP_ERR_NO_ERROR }.map(\.topicPartition)
    }

    /// Stores next-to-read offsets for librdkafka to commit. Non-blocking.
    /// - Throws: ``KafkaError/Code/offsetStore``, naming the first partition refused.
    func storeOffsets(_ nextOffsets: [KafkaTopicPartition: Int64]) throws(KafkaError) {
        let list = RDKafkaTopicPartitionList(offsets: nextOffsets.map { ($0.key, $0.value) })
        let response = rd_kafka_offsets_store(handle, list.pointer)
        if let error = list.firstError(.offsetStore, "storing the offset of") { throw error }
        guard response == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.offsetStore, "storing offsets", response: response)
        }
    }

    /// See ``RDKafkaHandle/commitStoredOffsets(blocking:)``.
    func commitStoredOffsets(blocking: Bool) -> RDKafkaResponse? {
        borrowed.commitStoredOffsets(blocking: blocking)
    }

    /// The group's committed offsets (next offset to read) for `partitions`, asked of the group
    /// coordinator; partitions without one are absent. Blocking, at most `timeout`.
    func committedOffsets(
        for partitions: [KafkaTopicPartition], timeout: Duration
    ) throws(KafkaError) -> [KafkaTopicPartition: Int64] {
        guard !partitions.isEmpty else { return [:] }
        let list = RDKafkaTopicPartitionList(partitions)
        let milliseconds = Int32(clamping: timeout.wholeMilliseconds)
        let response = rd_kafka_committed(handle, list.pointer, milliseconds)
        guard response == RD_KAFKA_RESP_ERR_NO_ERROR else {
            throw KafkaError(.query, "reading committed offsets", response: response)
        }
        if let error = list.firstError(.query, "reading the committed offset of") { throw error }
        var offsets: [KafkaTopicPartition: Int64] = [:]
        for entry in list.entries where entry.offset >= 0 {
            offsets[entry.topicPartition] = entry.offset
        }
        return offsets
    }
}

extension RDKafkaHandle {
    /// Commits the stored offsets of the current assignment: `blocking`, waits for the broker's
    /// answer; otherwise starts the commit and returns at once.
    /// - Returns: nil when committed or when nothing new was stored; librdkafka's answer otherwise.
    func commitStoredOffsets(blocking: Bool) -> RDKafkaResponse? {
        let response = rd_kafka_commit(pointer, nil, blocking ? 0 : 1)
        if response == RD_KAFKA_RESP_ERR_NO_ERROR || response == RD_KAFKA_RESP_ERR__NO_OFFSET { return nil }
        return RDKafkaResponse(response)
    }

    /// Pauses or resumes fetching `partitions`. Non-blocking.
    /// - Returns: the first failure, as ``KafkaError/Code/partitionState``.
    func setPaused(_ pause: Bool, _ partitions: Set<KafkaTopicPartition>) -> KafkaError? {
        guard !partitions.isEmpty else { return nil }
        let list = RDKafkaTopicPartitionList(partitions)
        let response =
            pause
            ? rd_kafka_pause_partitions(pointer, list.pointer) : rd_kafka_resume_partitions(pointer, list.pointer)
        let action = pause ? "pausing" : "resuming"
        if response != RD_KAFKA_RESP_ERR_NO_ERROR { return KafkaError(.partitionState, action, response: response) }
        return list.firstError(.partitionState, action)
    }
}
