// Dead letters, as schemas/dlq-headers.schema.json describes them: an input record that cannot be
// processed, with headers saying why, and (when Kafka refuses a record as too large) the smaller forms
// that take its place so that its partition still moves on.

import APNs
import JSON
import Platform

/// Header names a dead letter carries beside the original record's own headers.
public enum DeadLetterHeader {
    /// Reserved for the worker's own headers. An input record's headers under it are carried renamed
    /// (under ``originalPrefix``), so a producer cannot forge the ones below.
    public static let reservedPrefix = "apns-worker."
    /// Where an input record's own `apns-worker.` headers go: `apns-worker.error.class` becomes
    /// `apns-worker.original.error.class`.
    public static let originalPrefix = "apns-worker.original."

    public static let errorClass = "apns-worker.error.class"
    public static let errorMessage = "apns-worker.error.message"
    public static let sourceTopic = "apns-worker.source.topic"
    public static let sourcePartition = "apns-worker.source.partition"
    public static let sourceOffset = "apns-worker.source.offset"
    /// The input record's Kafka timestamp in UNIX milliseconds, when it had one.
    public static let sourceTimestamp = "apns-worker.source.timestamp"
    /// When the worker gave up on the record (RFC 3339).
    public static let failedAt = "apns-worker.failed-at"
    /// Why the record could not be published whole (Kafka's refusal: the size, the limit, the topic).
    public static let publishError = "apns-worker.publish.error"
    /// `prefix`: the value is the original value's first bytes; `omitted`: the dead letter has no value.
    public static let valueTruncated = "apns-worker.value.truncated"
    /// The original value's size in bytes and its SHA-256 (hex), when the value is not carried whole.
    public static let valueSize = "apns-worker.value.size"
    public static let valueSHA256 = "apns-worker.value.sha256"
    /// The original key's size and SHA-256, when even the key had to be left out.
    public static let keySize = "apns-worker.key.size"
    public static let keySHA256 = "apns-worker.key.sha256"
    /// How many of the original record's headers were left out (only the worker's own remain).
    public static let headersOmitted = "apns-worker.headers.omitted"
    /// For a result too large to publish (`result_too_large`): the topic it was for.
    public static let resultTopic = "apns-worker.result.topic"

    /// The dead-letter class of a result (an outcome, an invalid-token event) too large for Kafka.
    public static let resultTooLargeClass = "result_too_large"

    /// The original record, unchanged, with headers naming why it could not be processed.
    public static func record(for source: SourceRecord, errorClass: String, message: String, topic: String)
        -> OutboundRecord
    {
        DeadLetter(source, errorClass: errorClass, message: message).record(topic: topic)
    }

    /// Whether `record` is already a smaller form of another record (a dead letter Kafka refused whole, or
    /// one standing for a result): its refusal is not the first for its source record.
    public static func isReducedDeadLetter(_ record: OutboundRecord) -> Bool {
        record.headers.contains { $0.name == publishError }
    }

    /// " (source push.requests[3] offset 17)" for a dead letter, "" for other records: for log lines.
    public static func sourceText(of record: OutboundRecord) -> String {
        guard let topic = record.header(sourceTopic), let partition = record.header(sourcePartition),
            let offset = record.header(sourceOffset)
        else { return "" }
        return " (source \(topic)[\(partition)] offset \(offset))"
    }
}

/// A dead letter before it is encoded: which record, why, and how much of it the dead letter carries.
struct DeadLetter: Sendable {
    /// How much of the original record a dead letter carries, from all of it to none.
    enum Content: Sendable, Equatable {
        /// The key, the value and the headers as they were.
        case whole
        /// The value's first `bytes` bytes; the key and the headers whole.
        case valuePrefix(bytes: Int)
        /// No value; the key and the headers whole.
        case withoutValue
        /// Neither the value, nor the key, nor the original headers: the worker's own headers alone.
        case workerHeadersOnly
    }

    /// The value prefix a truncated dead letter keeps, unless Kafka's limit leaves less room.
    static let defaultValuePrefixBytes = 64 * 1024
    /// Room left beside the key, the headers and the value prefix for Kafka's own framing of a record.
    static let framingAllowance = 512
    /// Longest error message carried, in Unicode scalars (the schema's `maxLength`).
    static let maximumMessageLength = 1000

    var key: [UInt8]?
    var value: [UInt8]?
    /// The original record's headers (for a result: its own), before any renaming.
    var headers: [RecordHeader]
    var source: RecordSource
    /// The input record's timestamp, UNIX seconds.
    var sourceTimestamp: Double?
    var errorClass: String
    var message: String
    /// UNIX seconds.
    var failedAt: Double
    /// Set when the dead letter stands for a result (an outcome, an invalid-token event) that Kafka refused,
    /// rather than for the input record: the topic the result was for.
    var resultTopic: String?
    /// Kafka's refusal of the record this dead letter replaces.
    var publishError: String?
    var content = Content.whole
    /// SHA-256 of the value and of the key, computed once for all the smaller forms (a value may be
    /// megabytes, and this may run on the producer's delivery-report thread).
    private var valueDigest: String?
    private var keyDigest: String?

    /// The dead letter of an input record that cannot be processed.
    init(_ source: SourceRecord, errorClass: String, message: String, failedAt: Double = WallClockTime.seconds()) {
        key = source.key
        value = source.value
        headers = source.headers
        self.source = RecordSource(topic: source.topic, partition: source.partition, offset: source.offset)
        sourceTimestamp = source.timestamp
        self.errorClass = errorClass
        self.message = message
        self.failedAt = failedAt
    }

    /// The dead letter that replaces a result Kafka refused as too large; its value is the result's.
    init(
        result: OutboundRecord, of source: SourceRecord, refusal: RecordTooLargeError,
        failedAt: Double = WallClockTime.seconds()
    ) {
        self.init(
            source, errorClass: DeadLetterHeader.resultTooLargeClass,
            message: "a result for \(result.topic) of \(result.byteCount) bytes is too large for Kafka; "
                + "the dead letter carries what fits of it", failedAt: failedAt)
        key = result.key
        value = result.value
        headers = result.headers
        resultTopic = result.topic
        publishError = refusal.detail
    }

    /// The record as published to `topic`: the worker's headers first, then the original record's.
    func record(topic: String) -> OutboundRecord {
        var own: [RecordHeader] = []
        own.reserveCapacity(12)
        own.append(RecordHeader(DeadLetterHeader.errorClass, errorClass))
        // Bounded: a message quoting hostile input must not make the dead letter itself too large.
        own.append(RecordHeader(DeadLetterHeader.errorMessage, Self.bounded(message)))
        own.append(RecordHeader(DeadLetterHeader.sourceTopic, source.topic))
        own.append(RecordHeader(DeadLetterHeader.sourcePartition, String(source.partition)))
        own.append(RecordHeader(DeadLetterHeader.sourceOffset, String(source.offset)))
        if let sourceTimestamp, sourceTimestamp >= 0 {
            let milliseconds = Int64((sourceTimestamp * 1000).rounded())
            own.append(RecordHeader(DeadLetterHeader.sourceTimestamp, String(milliseconds)))
        }
        own.append(RecordHeader(DeadLetterHeader.failedAt, RFC3339.format(failedAt)))
        if let resultTopic { own.append(RecordHeader(DeadLetterHeader.resultTopic, resultTopic)) }
        if let publishError { own.append(RecordHeader(DeadLetterHeader.publishError, Self.bounded(publishError))) }
        var carriedValue = value
        if let value, content != .whole {
            switch content {
            case .valuePrefix(let bytes):
                carriedValue = Array(value.prefix(bytes))
                own.append(RecordHeader(DeadLetterHeader.valueTruncated, "prefix"))
            default:
                carriedValue = nil
                own.append(RecordHeader(DeadLetterHeader.valueTruncated, "omitted"))
            }
            own.append(RecordHeader(DeadLetterHeader.valueSize, String(value.count)))
            own.append(RecordHeader(DeadLetterHeader.valueSHA256, valueDigest ?? SHA256Digest.hex(value)))
        }
        guard content != .workerHeadersOnly else {
            if let key {
                own.append(RecordHeader(DeadLetterHeader.keySize, String(key.count)))
                own.append(RecordHeader(DeadLetterHeader.keySHA256, keyDigest ?? SHA256Digest.hex(key)))
            }
            if !headers.isEmpty { own.append(RecordHeader(DeadLetterHeader.headersOmitted, String(headers.count))) }
            return OutboundRecord(topic: topic, key: nil, value: nil, headers: own)
        }
        own.reserveCapacity(own.count + headers.count)
        for header in headers { own.append(Self.carried(header)) }
        return OutboundRecord(topic: topic, key: key, value: carriedValue, headers: own)
    }

    /// The next smaller form after Kafka refused this one as too large, or nil when none is left.
    ///
    /// The value goes first (to a prefix that fits beside the key and headers, then altogether), then the
    /// key and the original headers; a form that would not be smaller than this one is skipped.
    func smaller(after refusal: RecordTooLargeError) -> DeadLetter? {
        var next = self
        next.publishError = publishError ?? refusal.detail
        if let value, next.valueDigest == nil { next.valueDigest = SHA256Digest.hex(value) }
        switch content {
        case .whole:
            let room = next.valuePrefixRoom(limit: refusal.limitBytes)
            if let value, room > 0, room < value.count {
                next.content = .valuePrefix(bytes: room)
                return next
            }
            fallthrough
        case .valuePrefix:
            if value != nil {
                next.content = .withoutValue
                return next
            }
            fallthrough
        case .withoutValue:
            guard key != nil || !headers.isEmpty else { return nil }
            if let key { next.keyDigest = SHA256Digest.hex(key) }
            next.content = .workerHeadersOnly
            return next
        case .workerHeadersOnly:
            return nil
        }
    }

    /// The value prefix that fits beside the key and the headers within `limit` (Kafka's message.max.bytes).
    func valuePrefixRoom(limit: Int?) -> Int {
        guard let limit else { return Self.defaultValuePrefixBytes }
        var withoutValue = self
        withoutValue.content = .withoutValue
        let rest = withoutValue.record(topic: "").byteCount + Self.framingAllowance
        return min(Self.defaultValuePrefixBytes, limit - rest)
    }

    /// The first `maximumMessageLength` Unicode scalars of `text`.
    static func bounded(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard scalars.count > maximumMessageLength else { return text }
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars.prefix(maximumMessageLength))
        return String(view)
    }

    /// An original header as the dead letter carries it: renamed when it claims the worker's prefix (in any
    /// case of letters), so that the worker's own headers are the only ones under it.
    static func carried(_ header: RecordHeader) -> RecordHeader {
        let prefix = DeadLetterHeader.reservedPrefix
        let name = header.name.utf8
        guard name.count >= prefix.utf8.count,
            String(decoding: name.prefix(prefix.utf8.count), as: UTF8.self).lowercased() == prefix
        else { return header }
        let rest = String(decoding: name.dropFirst(prefix.utf8.count), as: UTF8.self)
        return RecordHeader(name: DeadLetterHeader.originalPrefix + rest, value: header.value)
    }
}

/// Publishes the dead letters that replace a record Kafka refused as too large: ever smaller forms, until
/// one is taken or none is left.
struct DeadLetterReplacement: Sendable {
    let sink: any ResultSink
    let topic: String

    /// Replaces `refused` (the input's dead letter, or a result of it) after `refusal`. `acknowledged` runs
    /// once: with the dead letter that was published, or with the error that stopped the last form.
    func publish(
        replacing refused: OutboundRecord, of source: SourceRecord, after refusal: RecordTooLargeError,
        acknowledged: @escaping @Sendable (Result<DeadLetter, any Error>) -> Void
    ) {
        let letter: DeadLetter?
        if refused.topic == topic {
            let errorClass = refused.header(DeadLetterHeader.errorClass) ?? "internal"
            let message = refused.header(DeadLetterHeader.errorMessage) ?? "a dead letter without an error message"
            letter = DeadLetter(source, errorClass: errorClass, message: message).smaller(after: refusal)
        } else {
            letter = DeadLetter(result: refused, of: source, refusal: refusal).smaller(after: refusal)
        }
        guard let letter else {
            acknowledged(.failure(refusal))
            return
        }
        publish(letter, acknowledged: acknowledged)
    }

    private func publish(
        _ letter: DeadLetter, acknowledged: @escaping @Sendable (Result<DeadLetter, any Error>) -> Void
    ) {
        sink.publish(letter.record(topic: topic)) { result in
            switch result {
            case .success:
                acknowledged(.success(letter))
            case .failure(let refusal as RecordTooLargeError):
                guard let smaller = letter.smaller(after: refusal) else {
                    acknowledged(.failure(refusal))
                    return
                }
                publish(smaller, acknowledged: acknowledged)
            case .failure(let error):
                acknowledged(.failure(error))
            }
        }
    }
}

extension OutboundRecord {
    /// The first header named `name`, as text.
    func header(_ name: String) -> String? {
        headers.first { $0.name == name }.map { String(decoding: $0.value ?? [], as: UTF8.self) }
    }

    /// The key, the value and the headers' names and values: what counts against Kafka's message.max.bytes.
    var byteCount: Int {
        let headerBytes = headers.reduce(0) { $0 + $1.name.utf8.count + ($1.value?.count ?? 0) }
        return (key?.count ?? 0) + (value?.count ?? 0) + headerBytes
    }
}
