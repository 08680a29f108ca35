// What follows a record once librdkafka holds it: its delivery object (the message's opaque), the
// promise `send` awaits, and the size shown when a record is too large.

import Synchronization

/// One message's delivery report, told on the producer's poll thread.
///
/// Subclass it and pass the object to ``KafkaProducer/trySend(topic:key:value:headers:partition:delivery:)``:
/// librdkafka keeps it as the message's opaque (retained once) and the report consumes it, so a record on
/// the hot path costs this one object rather than a chain of closures built on a sender's thread and
/// freed on the poll thread.
///
/// A failed report comes to ``failed(_:record:)`` with librdkafka's copy of the record, so a sender need
/// not keep its own copy until the report: it is freed on the thread that made it, not the poll thread.
///
/// - Important: ``delivered(_:)`` (or ``failed(_:record:)``) runs on the poll thread, exactly once per
///   accepted send, and must return quickly. A subclass is shared between the sending thread and the poll
///   thread: keep its stored properties immutable (`let`) or otherwise safe to share.
open class KafkaDelivery: @unchecked Sendable {
    public init() {}

    /// Where the record landed, or why it failed.
    open func delivered(_ result: Result<KafkaDeliveryReport, KafkaError>) {}

    /// Why the record failed, with librdkafka's copy of it: a sender that keeps no copy of its own can send
    /// it again, or say what it was. Called instead of ``delivered(_:)`` for every failed report; the
    /// default passes the error on to ``delivered(_:)``.
    open func failed(_ error: KafkaError, record: KafkaUndeliveredRecord) { delivered(.failure(error)) }

    /// Why librdkafka could not deliver a record.
    static func error(of raw: RDKafkaDelivery) -> KafkaError {
        let topic = raw.topic
        if raw.response == .messageSizeTooLarge {
            // The broker's limit (its message.max.bytes, or the topic's max.message.bytes) is below the producer's.
            let size = RecordSize(keyBytes: raw.keyBytes, valueBytes: raw.valueBytes)
            return KafkaError(
                .messageTooLarge, "the broker refused a record of \(size) for \(place(topic, raw.partition))",
                response: raw.response)
        } else {
            return KafkaError(
                .delivery, "delivering a record to \(place(topic, raw.partition))", response: raw.response)
        }
    }

    private static func place(_ topic: String, _ partition: Int32) -> String {
        partition >= 0 ? "\(topic)[\(partition)]" : "topic '\(topic)'"
    }
}

/// A delivery that calls a closure: what the closure-taking sends wrap their `onDelivery` in.
final class ClosureDelivery: KafkaDelivery, @unchecked Sendable {
    private let onDelivery: @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void

    init(_ onDelivery: @escaping @Sendable (Result<KafkaDeliveryReport, KafkaError>) -> Void) {
        self.onDelivery = onDelivery
    }

    override func delivered(_ result: Result<KafkaDeliveryReport, KafkaError>) { onDelivery(result) }
}

/// How large a record is, for the messages of ``KafkaError/Code/messageTooLarge``.
struct RecordSize: CustomStringConvertible {
    var keyBytes: Int
    var valueBytes: Int
    var headerBytes: Int?

    init(keyBytes: Int, valueBytes: Int, headerBytes: Int? = nil) {
        self.keyBytes = keyBytes
        self.valueBytes = valueBytes
        self.headerBytes = headerBytes
    }

    init(key: [UInt8]?, value: [UInt8]?, headers: [KafkaHeader]) {
        self.init(
            keyBytes: key?.count ?? 0, valueBytes: value?.count ?? 0,
            headerBytes: headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) })
    }

    var description: String {
        let total = keyBytes + valueBytes + (headerBytes ?? 0)
        let parts = "key \(keyBytes), value \(valueBytes)" + (headerBytes.map { ", headers \($0)" } ?? "")
        return "\(total) bytes (\(parts))"
    }
}

/// A delivery result that may arrive before or after someone waits for it.
final class DeliveryPromise: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>?)
        case done(Result<KafkaDeliveryReport, KafkaError>)
    }
    private let state = Mutex(State.waiting(nil))

    func fulfill(_ result: Result<KafkaDeliveryReport, KafkaError>) {
        let waiter: CheckedContinuation<Result<KafkaDeliveryReport, KafkaError>, Never>? = state.withLock { state in
            guard case .waiting(let waiter) = state else { return nil }
            state = .done(result)
            return waiter
        }
        waiter?.resume(returning: result)
    }

    var result: Result<KafkaDeliveryReport, KafkaError> {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Result<KafkaDeliveryReport, KafkaError>? = state.withLock { state in
                    switch state {
                    case .done(let result): return result
                    case .waiting:
                        state = .waiting(continuation)
                        return nil
                    }
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
