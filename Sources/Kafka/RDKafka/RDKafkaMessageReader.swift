// Copies a received rd_kafka_message_t into a KafkaConsumerMessage, and a produced one that failed into a
// KafkaUndeliveredRecord (librdkafka frees the C message after).

internal import CRdKafka

extension KafkaConsumerMessage {
    /// Copies topic, partition, offset, key, value, headers and timestamp out of a message with `err == 0`.
    init(copying message: UnsafePointer<rd_kafka_message_t>) {
        let raw = message.pointee
        topic = String(cString: rd_kafka_topic_name(raw.rkt))
        partition = raw.partition
        offset = raw.offset
        key = copiedBytes(raw.key, raw.key_len)
        value = copiedBytes(raw.payload, raw.len)

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

        headers = Self.headers(of: message)
    }

    /// The message's headers, copied: a consumed message's, or a produced one's in its delivery report.
    static func headers(of message: UnsafePointer<rd_kafka_message_t>) -> [KafkaHeader] {
        var headers: [KafkaHeader] = []
        var list: OpaquePointer?
        guard rd_kafka_message_headers(message, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return [] }
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
        return headers
    }
}

extension KafkaUndeliveredRecord {
    /// Copies the record out of a failed delivery report (librdkafka frees the message after the callback).
    init(copying message: UnsafePointer<rd_kafka_message_t>) {
        let raw = message.pointee
        self.init(
            topic: raw.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? "", partition: raw.partition,
            key: copiedBytes(raw.key, raw.key_len), value: copiedBytes(raw.payload, raw.len),
            headers: KafkaConsumerMessage.headers(of: message))
    }
}

/// A message's key or value, copied; nil when it has none.
private func copiedBytes(_ start: UnsafeMutableRawPointer?, _ count: Int) -> [UInt8]? {
    start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) }
}
