// Dead letters as schemas/dlq-headers.schema.json documents them: the worker's headers cannot be
// forged by the input record, and a record Kafka refuses as too large is replaced by smaller forms
// (value prefix, no value, the worker's headers alone) so that its partition moves on.

import APNs
import Foundation
import TestSupport
import Testing

@testable import Worker

@Suite struct DeadLetterTests {
    static let token = String(repeating: "ab", count: 32)

    static func headers(_ record: OutboundRecord) -> [String: String] {
        Dictionary(
            record.headers.map { ($0.name, String(decoding: $0.value ?? [], as: UTF8.self)) },
            uniquingKeysWith: { first, _ in first })
    }

    static func source(value: [UInt8]?, key: [UInt8]? = Array("user-7".utf8), headers: [RecordHeader] = [])
        -> SourceRecord
    {
        SourceRecord(
            topic: "push.requests", partition: 3, offset: 41, key: key, value: value, headers: headers,
            timestamp: 1_795_953_600.123)
    }

    static func refusal(limit: Int?) -> RecordTooLargeError {
        RecordTooLargeError(
            record: OutboundRecord(topic: "push.dlq", key: nil, value: nil), limitBytes: limit,
            detail: "a record of many bytes is too large")
    }

    @Test func theWorkersHeadersComeFirstAndNameTheErrorTheSourceAndTheTime() {
        let record = DeadLetter(
            Self.source(value: Array("{oops".utf8), headers: [RecordHeader("traceparent", "00-aa-bb-01")]),
            errorClass: "undecodable", message: "not valid JSON", failedAt: 1_795_953_600.5
        ).record(topic: "push.dlq")

        #expect(record.key == Array("user-7".utf8))
        #expect(record.value == Array("{oops".utf8))
        #expect(
            record.headers.map(\.name) == [
                DeadLetterHeader.errorClass, DeadLetterHeader.errorMessage, DeadLetterHeader.sourceTopic,
                DeadLetterHeader.sourcePartition, DeadLetterHeader.sourceOffset, DeadLetterHeader.sourceTimestamp,
                DeadLetterHeader.failedAt, "traceparent",
            ])
        let headers = Self.headers(record)
        #expect(headers[DeadLetterHeader.sourceTimestamp] == "1795953600123")
        #expect(headers[DeadLetterHeader.failedAt] == "2026-11-29T12:00:00.500Z")
        #expect(headers[DeadLetterHeader.valueTruncated] == nil)
    }

    @Test func inputHeadersUnderTheWorkersPrefixAreCarriedRenamedInAnyCase() {
        let forged = [
            RecordHeader(DeadLetterHeader.errorClass, "internal"),
            RecordHeader("APNS-Worker.Source.Offset", "0"),
            RecordHeader("apns-worker.original.error.class", "x"),
            RecordHeader("apns-workers.other", "kept"),
        ]
        let record = DeadLetterHeader.record(
            for: Self.source(value: Array("{".utf8), headers: forged), errorClass: "undecodable", message: "bad",
            topic: "push.dlq")

        let names = record.headers.map(\.name)
        #expect(names.filter { $0 == DeadLetterHeader.errorClass }.count == 1)
        #expect(names.filter { $0.lowercased() == DeadLetterHeader.sourceOffset }.count == 1)
        let headers = Self.headers(record)
        #expect(headers[DeadLetterHeader.errorClass] == "undecodable")
        #expect(headers[DeadLetterHeader.sourceOffset] == "41")
        #expect(headers["apns-worker.original.error.class"] == "internal")
        #expect(headers["apns-worker.original.Source.Offset"] == "0")
        #expect(headers["apns-worker.original.original.error.class"] == "x")
        #expect(headers["apns-workers.other"] == "kept")
    }

    @Test func theErrorMessageIsBoundedToAThousandUnicodeScalars() {
        // Each flag is one Character of two scalars: bounding by Characters would let 2,000 scalars through.
        let message = String(repeating: "🇫🇷", count: 900)
        let headers = Self.headers(
            DeadLetterHeader.record(
                for: Self.source(value: nil), errorClass: "invalid_event", message: message, topic: "push.dlq"))
        #expect(headers[DeadLetterHeader.errorMessage]?.unicodeScalars.count == 1000)
    }

    @Test func aValueTooLargeKeepsAPrefixThatFitsBesideTheKeyAndHeadersWithItsSizeAndDigest() throws {
        let value = [UInt8](repeating: UInt8(ascii: "x"), count: 2_000_000)
        let letter = DeadLetter(Self.source(value: value), errorClass: "undecodable", message: "not valid JSON")
        let limit = 20_000

        let smaller = try #require(letter.smaller(after: Self.refusal(limit: limit)))
        let record = smaller.record(topic: "push.dlq")
        guard case .valuePrefix(let bytes) = smaller.content else {
            Issue.record("expected a value prefix, got \(smaller.content)")
            return
        }
        #expect(record.value == Array(value.prefix(bytes)))
        #expect(record.byteCount <= limit - DeadLetter.framingAllowance)
        #expect(bytes > limit / 2)
        #expect(record.key == Array("user-7".utf8))
        let headers = Self.headers(record)
        #expect(headers[DeadLetterHeader.valueTruncated] == "prefix")
        #expect(headers[DeadLetterHeader.valueSize] == "2000000")
        #expect(headers[DeadLetterHeader.valueSHA256] == SHA256Digest.hex(value))
        #expect(headers[DeadLetterHeader.publishError] == "a record of many bytes is too large")
        #expect(headers[DeadLetterHeader.errorClass] == "undecodable")
    }

    @Test func withoutAKnownLimitThePrefixIs64KiB() throws {
        let value = [UInt8](repeating: 0, count: 1_000_000)
        let letter = DeadLetter(Self.source(value: value), errorClass: "undecodable", message: "m")
        let smaller = try #require(letter.smaller(after: Self.refusal(limit: nil)))
        #expect(smaller.content == .valuePrefix(bytes: 64 * 1024))
        #expect(smaller.record(topic: "push.dlq").value?.count == 65_536)
        // A limit with more room than that still keeps 64 KiB.
        #expect(letter.smaller(after: Self.refusal(limit: 10_000_000))?.content == .valuePrefix(bytes: 65_536))
    }

    @Test func theFormsShrinkUntilOnlyTheWorkersHeadersAreLeftThenNoneRemains() throws {
        let key = [UInt8](repeating: UInt8(ascii: "k"), count: 50_000)
        let letter = DeadLetter(
            Self.source(
                value: [UInt8](repeating: 1, count: 100_000), key: key,
                headers: [RecordHeader("trace", "t"), RecordHeader(DeadLetterHeader.errorClass, "forged")]),
            errorClass: "invalid_event", message: "devices has 100000 entries")
        let refusal = Self.refusal(limit: 30_000)

        // The key alone exceeds the limit, so there is no room for a prefix: the value goes at once.
        let withoutValue = try #require(letter.smaller(after: refusal))
        #expect(withoutValue.content == .withoutValue)
        let withoutValueRecord = withoutValue.record(topic: "push.dlq")
        #expect(withoutValueRecord.value == nil)
        #expect(withoutValueRecord.key == key)
        #expect(Self.headers(withoutValueRecord)[DeadLetterHeader.valueTruncated] == "omitted")

        let bare = try #require(withoutValue.smaller(after: refusal))
        #expect(bare.content == .workerHeadersOnly)
        let bareRecord = bare.record(topic: "push.dlq")
        #expect(bareRecord.key == nil && bareRecord.value == nil)
        #expect(bareRecord.headers.allSatisfy { $0.name.hasPrefix(DeadLetterHeader.reservedPrefix) })
        #expect(!bareRecord.headers.contains { $0.name.hasPrefix(DeadLetterHeader.originalPrefix) })
        let headers = Self.headers(bareRecord)
        #expect(headers[DeadLetterHeader.keySize] == "50000")
        #expect(headers[DeadLetterHeader.keySHA256] == SHA256Digest.hex(key))
        #expect(headers[DeadLetterHeader.headersOmitted] == "2")
        #expect(headers[DeadLetterHeader.valueSize] == "100000")
        #expect(headers[DeadLetterHeader.errorClass] == "invalid_event")

        #expect(bare.smaller(after: refusal) == nil)
    }

    @Test func aResultTooLargeBecomesAResultTooLargeDeadLetterKeyedAndValuedWithTheResult() throws {
        let outcome = OutboundRecord(
            topic: "push.outcomes", key: Array("evt-1".utf8),
            value: [UInt8](repeating: UInt8(ascii: "a"), count: 300_000))
        let refusal = RecordTooLargeError(record: outcome, limitBytes: 100_000, detail: "refused: 300000 bytes")
        let letter = try #require(
            DeadLetter(result: outcome, of: Self.source(value: Array("{}".utf8)), refusal: refusal)
                .smaller(after: refusal))
        let record = letter.record(topic: "push.dlq")

        #expect(record.key == Array("evt-1".utf8))
        #expect(record.value.map { outcome.value!.starts(with: $0) } == true)
        let headers = Self.headers(record)
        #expect(headers[DeadLetterHeader.errorClass] == "result_too_large")
        #expect(headers[DeadLetterHeader.resultTopic] == "push.outcomes")
        #expect(headers[DeadLetterHeader.publishError] == "refused: 300000 bytes")
        #expect(headers[DeadLetterHeader.sourceOffset] == "41")
        #expect(headers[DeadLetterHeader.valueSize] == "300000")
        #expect(headers[DeadLetterHeader.errorMessage]?.contains("push.outcomes") == true)
    }

    @Test func sha256MatchesTheStandardTestVectors() {
        #expect(
            SHA256Digest.hex(Array("abc".utf8))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Digest.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }
}

/// The pipeline with a sink that refuses records as Kafka would: the partition moves on, nothing stops.
@Suite struct DeadLetterPipelineTests {
    static let tokens = (0..<3).map { String(repeating: String(format: "%02x", $0 + 1), count: 32) }

    func run(
        _ records: [SourceRecord], sink: InMemoryResultSink,
        attempts: @escaping @Sendable (PlannedPush) -> Int = { _ in 1 }
    ) async
        -> (Pipeline, InMemoryEventSource)
    {
        let source = InMemoryEventSource(records: records)
        let pipeline = Pipeline(
            configuration: PipelineConfiguration(), source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: ClosureTransport { push in
                var result = apnsAnswer(push, status: 200)
                result.attempts = Array(repeating: result.attempts[0], count: attempts(push))
                return result
            })
        try? pipeline.start()
        #expect(
            await eventually(timeout: .seconds(20)) {
                pipeline.counters.recordsFinished + pipeline.counters.publishFailures == records.count
            })
        return (pipeline, source)
    }

    @Test(arguments: [false, true])
    func aDeadLetterTooLargeIsPublishedTruncatedAndThePartitionMovesOn(refusedAtEnqueue: Bool) async {
        let huge = SourceRecord(
            topic: "push.requests", partition: 0, offset: 1, key: Array("k".utf8),
            value: [UInt8](repeating: UInt8(ascii: "~"), count: 2_000_000),
            headers: [RecordHeader(DeadLetterHeader.errorClass, "internal")])
        let records = [
            makeRecord(partition: 0, offset: 0, devices: [Self.tokens[0]]), huge,
            makeRecord(partition: 0, offset: 2, devices: [Self.tokens[1]]),
        ]
        let sink = InMemoryResultSink(maximumBytes: 1_000_000, refusesAtOnce: refusedAtEnqueue)
        let (pipeline, source) = await run(records, sink: sink)

        #expect(pipeline.fatalError == nil)
        #expect(sink.refused.withLock { $0.count } == 1)
        let letters = sink.records(on: "push.dlq")
        #expect(letters.count == 1)
        let headers = DeadLetterTests.headers(letters[0])
        #expect(headers[DeadLetterHeader.errorClass] == "undecodable")
        #expect(headers[DeadLetterHeader.valueTruncated] == "prefix")
        #expect(headers[DeadLetterHeader.valueSize] == "2000000")
        #expect(headers["apns-worker.original.error.class"] == "internal")
        #expect(letters[0].value?.count == DeadLetter.defaultValuePrefixBytes)
        #expect(sink.records(on: "push.outcomes").count == 2)
        #expect(source.log.withLock { $0.stored[TopicPartition(topic: "push.requests", partition: 0)] } == 3)
    }

    @Test func anOutcomeTooLargeBecomesAResultTooLargeDeadLetterAndTheOthersArePublished() async {
        // Two thousand attempts make an outcome of about 300 KB, over this sink's limit; the third
        // device's outcome, of one attempt, is published as usual.
        let records = [makeRecord(partition: 0, offset: 0, devices: Self.tokens)]
        let sink = InMemoryResultSink(maximumBytes: 100_000)
        let (pipeline, source) = await run(records, sink: sink) { push in
            push.request.deviceToken?.hex == Self.tokens[2] ? 1 : 2000
        }

        #expect(pipeline.fatalError == nil)
        let letters = sink.records(on: "push.dlq")
        #expect(letters.count == 2)
        for letter in letters {
            let headers = DeadLetterTests.headers(letter)
            #expect(headers[DeadLetterHeader.errorClass] == "result_too_large")
            #expect(headers[DeadLetterHeader.resultTopic] == "push.outcomes")
            #expect(letter.key == Array("e0-0".utf8))
            #expect(letter.byteCount <= 100_000)
            #expect(Int(headers[DeadLetterHeader.valueSize] ?? "") ?? 0 > 100_000)
        }
        #expect(pipeline.counters.recordsFinished == 1)
        #expect(sink.json(on: "push.outcomes").map { $0["device_token"]?.stringValue } == [Self.tokens[2]])
        #expect(source.log.withLock { $0.stored[TopicPartition(topic: "push.requests", partition: 0)] } == 1)
    }

    @Test func whenNotEvenTheWorkersHeadersFitTheWorkerStopsNamingTheCauseAndStoresNothing() async {
        let records = [
            SourceRecord(
                topic: "push.requests", partition: 0, offset: 0, key: nil, value: Array("{oops".utf8))
        ]
        let sink = InMemoryResultSink(maximumBytes: 50)
        let (pipeline, source) = await run(records, sink: sink)

        #expect(pipeline.fatalError?.contains("push.requests[0] offset 0") == true)
        #expect(pipeline.fatalError?.contains("over 50 bytes") == true)
        #expect(sink.records(on: "push.dlq").isEmpty)
        #expect(source.log.withLock { $0.stored.isEmpty })
    }

    @Test func otherPublishFailuresStillStopTheWorkerWithTheirCause() async {
        let records = [makeRecord(partition: 0, offset: 0, devices: [Self.tokens[0]])]
        let sink = InMemoryResultSink(failTopic: "push.outcomes")
        let (pipeline, source) = await run(records, sink: sink)

        #expect(pipeline.fatalError?.contains("could not be published: ") == true)
        #expect(sink.records(on: "push.dlq").isEmpty)
        #expect(source.log.withLock { $0.stored.isEmpty })
    }
}
