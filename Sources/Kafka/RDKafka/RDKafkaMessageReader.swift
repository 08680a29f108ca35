// Copies a received rd_kafka_message_t into a KafkaConsumerMessage (the C message is freed after).

internal import CRdKafka

extension KafkaConsumerMessage {
    /// Copies topic, partition, offset, key, value, headers and timestamp out of a message with `err == 0`.
    init(copying message: UnsafePointer<rd_kafka_message_t>) {
        let raw = message.pointee
        topic = String(cString: rd_kafka_topic_name(raw.rkt))
        partition = raw.partition
        offset = raw.offset
        key = raw.key.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.key_len)) }
        value = raw.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.len)) }

        var kind = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let milliseconds = rd_kafka_message_timestamp(message, &kind)
        if milliseconds >= 0, kind != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE {
            timestamp = KafkaTimestamp(
                millisecondsSince1970: milliseconds,
                kind: kind == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME ? .logAppendTime : .createTime
            )
        } else {
            timestamp = nil
        }

        headers = []
        var list: OpaquePointer?
        guard rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return }
        var index = 0
        var name: UnsafePointer<CChar>?
        var bytes: UnsafeRawPointer?
        var size = 0
        while rd_kafka_header_get_all(list, index, &name, &bytes, &size) == RD_KAFKA_RESP_ERR_NO_ERROR {
            headers.append(
                KafkaHeader(
                    name: name.map { String(cString: $0) } ?? "",
                    value: bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }
                ))
            index += 1
        }
    }
}
