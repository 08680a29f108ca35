// The producer's librdkafka calls: enqueueing a record (the hot path), serving delivery reports,
// flushing and purging, and the metadata look-up that warms the topic cache.

internal import CRdKafka

/// What an enqueue came to.
enum RDKafkaEnqueueResult {
    /// librdkafka holds the record; its delivery callback will be called exactly once.
    case enqueued
    /// librdkafka's local queue is full; the delivery callback will not be called.
    case queueFull
    /// librdkafka refused the record; the delivery callback will not be called.
    case refused(RDKafkaResponse, reason: String)
}

/// A delivered (or failed) message as its delivery report tells it, copied out of the C message.
struct RDKafkaDelivery {
    var topic: String
    var partition: Int32
    var offset: Int64
    var response: RDKafkaResponse
    var keyBytes: Int
    var valueBytes: Int

    @inline(__always)
    init(_ message: UnsafePointer<rd_kafka_message_t>) {
        let raw = message.pointee
        topic = raw.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        partition = raw.partition
        offset = raw.offset
        response = RDKafkaResponse(raw.err)
        keyBytes = raw.key_len
        valueBytes = raw.len
    }
}

extension KafkaDelivery {
    /// Tells this object of librdkafka's report: where the record landed, or why it failed with its copy.
    func report(_ raw: RDKafkaDelivery, of message: UnsafePointer<rd_kafka_message_t>) {
        if raw.response.isSuccess {
            delivered(
                .success(
                    KafkaDeliveryReport(
                        topic: raw.topic, partition: raw.partition, offset: raw.offset >= 0 ? raw.offset : nil)))
        } else {
            failed(Self.error(of: raw), record: KafkaUndeliveredRecord(copying: message))
        }
    }
}

extension RDKafkaClient {
    /// Enqueues one record (key, value and headers are copied) with `delivery` as its message opaque,
    /// retained once; the delivery report releases it, and so does this call when librdkafka refuses.
    func produce(
        topic: String, partition: Int32?, key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader],
        delivery: KafkaDelivery
    ) -> RDKafkaEnqueueResult {
        let opaque = Unmanaged.passRetained(delivery).toOpaque()
        let failure = Self.produce(
            handle, topic: topic, partition: partition ?? RD_KAFKA_PARTITION_UA,
            key: key, value: value, headers: headers, opaque: opaque
        )
        guard let failure else { return .enqueued }
        Unmanaged<KafkaDelivery>.fromOpaque(opaque).release()
        if rd_kafka_error_code(failure) == RD_KAFKA_RESP_ERR__QUEUE_FULL {
            rd_kafka_error_destroy(failure)
            return .queueFull
        }
        let (response, reason) = RDKafkaResponse.consume(failure)
        return .refused(response, reason: reason)
    }

    /// Serves delivery reports and other callbacks on the calling thread, waiting at most `milliseconds`.
    @inline(__always)
    func poll(milliseconds: Int32) {
        rd_kafka_poll(handle, milliseconds)
    }

    /// Wakes a thread blocked in ``poll(milliseconds:)``.
    func wakePoll() {
        rd_kafka_yield(handle)
    }

    /// Waits until every enqueued record has a delivery report (serving them on this thread), at
    /// most `milliseconds`.
    func flush(milliseconds: Int32) -> RDKafkaResponse {
        RDKafkaResponse(rd_kafka_flush(handle, milliseconds))
    }

    /// Fails every record still queued or in flight; their reports come with the next polls.
    func purgeQueuedAndInFlight() {
        rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
    }

    /// Records enqueued or in flight, not yet reported.
    var outQueueLength: Int { Int(rd_kafka_outq_len(handle)) }

    /// A property's value as the client applied it (its default when not configured).
    func appliedProperty(_ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        var size = buffer.count
        guard rd_kafka_conf_get(rd_kafka_conf(handle), name, &buffer, &size) == RD_KAFKA_CONF_OK else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Asks for `topic`'s metadata (its partitions and leaders), waiting at most `milliseconds`, through
    /// a topic handle the client keeps knowing, so the answer fills the cache sends use. Blocking.
    /// - Returns: why the look-up failed, or nil when it succeeded.
    func lookUpTopic(_ topic: String, milliseconds: Int32) -> String? {
        guard let topicHandle = rd_kafka_topic_new(handle, topic, nil) else {
            return "cannot create a topic handle"
        }
        defer { rd_kafka_topic_destroy(topicHandle) }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let response = rd_kafka_metadata(handle, 0, topicHandle, &metadata, milliseconds)
        defer { if let metadata { rd_kafka_metadata_destroy(metadata) } }
        guard response == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            return "metadata request failed: \(RDKafkaResponse(response).text)"
        }
        guard metadata.pointee.topic_cnt == 1 else { return "not in the metadata answer" }
        let answer = metadata.pointee.topics[0]
        if answer.err != RD_KAFKA_RESP_ERR_NO_ERROR { return RDKafkaResponse(answer.err).text }
        return nil
    }

    /// Makes librdkafka raise a fabricated fatal error, reported like a real one (for tests).
    func raiseFatalErrorForTesting(reason: String) {
        rd_kafka_test_fatal_error(handle, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason)
    }

    /// Calls `rd_kafka_produceva`; returns its error, if any. Key, value and headers are copied.
    private static func produce(
        _ rk: OpaquePointer, topic: String, partition: Int32, key: [UInt8]?, value: [UInt8]?,
        headers: [KafkaHeader], opaque: UnsafeMutableRawPointer
    ) -> OpaquePointer? {
        // No copies to make for a record without headers (every outcome), and the argument list on the
        // stack: each was a heap allocation per record.
        let headerCopies = headers.isEmpty ? nil : CHeaderCopies(headers)
        return topic.withCString { topicName in
            withOptionalBytes(key) { keyBytes in
                withOptionalBytes(value) { valueBytes in
                    withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 6 + headers.count) { arguments in
                        var count = 0
                        func append(_ argument: rd_kafka_vu_t) {
                            arguments.initializeElement(at: count, to: argument)
                            count += 1
                        }
                        var argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_TOPIC
                        argument.u.cstr = topicName
                        append(argument)
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_PARTITION
                        argument.u.i32 = partition
                        append(argument)
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                        argument.u.i = RD_KAFKA_MSG_F_COPY
                        append(argument)
                        func append(_ type: rd_kafka_vtype_t, bytes: UnsafeRawBufferPointer?) {
                            guard let bytes else { return }
                            var argument = rd_kafka_vu_t()
                            argument.vtype = type
                            argument.u.mem.ptr = UnsafeMutableRawPointer(mutating: bytes.baseAddress)
                            argument.u.mem.size = bytes.count
                            append(argument)
                        }
                        append(RD_KAFKA_VTYPE_KEY, bytes: keyBytes)
                        append(RD_KAFKA_VTYPE_VALUE, bytes: valueBytes)
                        for header in headerCopies?.headers ?? [] {
                            argument = rd_kafka_vu_t()
                            argument.vtype = RD_KAFKA_VTYPE_HEADER
                            argument.u.header.name = UnsafePointer(header.name)
                            argument.u.header.val = header.value.map { UnsafeRawPointer($0) }
                            argument.u.header.size = header.size
                            append(argument)
                        }
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_OPAQUE
                        argument.u.ptr = opaque
                        append(argument)
                        // The C strings of the headers live until librdkafka has copied them, here.
                        return withExtendedLifetime(headerCopies) {
                            rd_kafka_produceva(rk, arguments.baseAddress, count)
                        }
                    }
                }
            }
        }
    }
}

/// Calls `body` with the bytes of `bytes` (a non-nil buffer even when empty), or with `nil`.
private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
    guard let bytes else { return body(nil) }
    if bytes.isEmpty {
        // An empty key or value is not the same as none: pass a valid pointer with size 0.
        return withUnsafeTemporaryAllocation(byteCount: 1, alignment: 1) { storage in
            body(UnsafeRawBufferPointer(start: storage.baseAddress, count: 0))
        }
    }
    return bytes.withUnsafeBytes { body($0) }
}

/// C copies of header names and values, alive for one produce call (librdkafka copies them again).
private final class CHeaderCopies {
    struct Header {
        var name: UnsafeMutablePointer<CChar>
        var value: UnsafeMutableRawPointer?
        var size: Int
    }
    let headers: [Header]

    init(_ headers: [KafkaHeader]) {
        self.headers = headers.map { header in
            let utf8 = header.name.utf8CString
            let name = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
            _ = UnsafeMutableBufferPointer(start: name, count: utf8.count).initialize(from: utf8)
            guard let bytes = header.value else { return Header(name: name, value: nil, size: 0) }
            let value = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
            bytes.withUnsafeBytes { source in
                value.copyMemory(from: source.baseAddress ?? UnsafeRawPointer(value), byteCount: source.count)
            }
            return Header(name: name, value: value, size: bytes.count)
        }
    }

    deinit {
        for header in headers {
            header.name.deallocate()
            header.value?.deallocate()
        }
    }
}
