// Exactly-once mode's state machine: the ledger that holds results until their partition's committable
// offset passes them, and the pipeline with an in-memory transactional sink (commits on demand, aborts,
// revokes): a committed offset never passes a record whose results the committed transactions lack, and
// every result is committed once.

import APNs
import Foundation
import JSON
import Synchronization
import TestSupport
import Testing

@testable import Worker

@Suite struct TransactionLedgerTests {
    let partition = TopicPartition(topic: "push.requests", partition: 0)
    let other = TopicPartition(topic: "push.requests", partition: 1)

    func result(_ offset: Int64) -> [OutboundRecord] {
        [OutboundRecord(topic: "push.outcomes", key: nil, value: Array("r\(offset)".utf8))]
    }

    func texts(_ batch: TransactionLedger<Int64>.Batch) -> [String] {
        batch.records.map { String(decoding: $0.value ?? [], as: UTF8.self) }
    }

    @Test func aBatchCarriesExactlyTheRecordsBeforeTheCommittableOffsetInOffsetOrder() throws {
        var ledger = TransactionLedger<Int64>()
        for offset in [Int64(12), 10, 11, 14] {
            ledger.hold(result(offset), partition: partition, offset: offset, token: offset)
        }
        #expect(ledger.nextBatch() == nil, "no committable offset yet")
        ledger.committable(partition, nextOffset: 13)
        #expect(ledger.readyRecords == 3)
        let batch = try #require(ledger.nextBatch())
        #expect(texts(batch) == ["r10", "r11", "r12"])
        #expect(batch.nextOffsets == [partition: 13])
        #expect(ledger.committed(batch) == [10, 11, 12])
        #expect(ledger.heldRecords == 1)
        #expect(ledger.readyRecords == 0)
        #expect(ledger.nextBatch() == nil, "offset 13 is committed; 14 waits for its offset")
    }

    @Test func anAbortedBatchIsTakenAgainWithWhatBecameCommittableMeanwhile() throws {
        var ledger = TransactionLedger<Int64>()
        ledger.hold(result(0), partition: partition, offset: 0, token: 0)
        ledger.committable(partition, nextOffset: 1)
        let aborted = try #require(ledger.nextBatch())
        // Nothing is committed for the aborted one; more finishes meanwhile, on two partitions.
        ledger.hold(result(1), partition: partition, offset: 1, token: 1)
        ledger.committable(partition, nextOffset: 2)
        ledger.hold(result(7), partition: other, offset: 7, token: 7)
        ledger.committable(other, nextOffset: 8)
        let retry = try #require(ledger.nextBatch())
        #expect(texts(aborted) == ["r0"])
        #expect(Set(texts(retry)) == ["r0", "r1", "r7"], "the same results again, and the new ones")
        #expect(retry.nextOffsets == [partition: 2, other: 8])
        #expect(Set(ledger.committed(retry)) == [0, 1, 7])
        #expect(ledger.heldRecords == 0)
    }

    @Test func aCommittableOffsetWithoutResultsStillCommits() throws {
        var ledger = TransactionLedger<Int64>()
        ledger.committable(partition, nextOffset: 5)
        let batch = try #require(ledger.nextBatch())
        #expect(batch.records.isEmpty)
        #expect(batch.nextOffsets == [partition: 5])
        _ = ledger.committed(batch)
        ledger.committable(partition, nextOffset: 4)
        #expect(ledger.nextBatch() == nil, "offsets only move forward")
    }

    @Test func releasingAPartitionDropsItsResultsAndAnInFlightBatchOfItCommitsNothingOfIt() throws {
        var ledger = TransactionLedger<Int64>()
        ledger.hold(result(0), partition: partition, offset: 0, token: 0)
        ledger.hold(result(2), partition: partition, offset: 2, token: 2)
        ledger.committable(partition, nextOffset: 1)
        ledger.hold(result(5), partition: other, offset: 5, token: 5)
        ledger.committable(other, nextOffset: 6)
        let batch = try #require(ledger.nextBatch())
        #expect(Set(ledger.release([partition])) == [0, 2])
        #expect(ledger.committed(batch) == [5], "a released partition's results are settled by the release only")
        #expect(ledger.heldRecords == 0)
        #expect(ledger.readyRecords == 0)
    }
}

/// A transactional sink in memory: `commit()` commits what is committable, as one transaction; `abortNext`
/// makes the next transaction fail (nothing is written, everything stays held).
final class InMemoryTransactionalSink: TransactionalResultSink {
    struct Committed {
        var records: [OutboundRecord] = []
        var offsets: [TopicPartition: Int64] = [:]
        var transactions = 0
        var aborts = 0
    }
    private let ledger = Mutex(TransactionLedger<@Sendable (Bool) -> Void>())
    let committed = Mutex(Committed())
    let abortNext = Atomic<Bool>(false)

    var maximumRecordBytes: Int? { nil }
    var failure: String? { nil }
    var heldRecords: Int { ledger.withLock { $0.heldRecords } }

    func hold(
        _ outputs: [OutboundRecord], partition: TopicPartition, offset: Int64,
        settled: @escaping @Sendable (Bool) -> Void
    ) {
        ledger.withLock { $0.hold(outputs, partition: partition, offset: offset, token: settled) }
    }

    func committable(_ partition: TopicPartition, nextOffset: Int64) {
        ledger.withLock { $0.committable(partition, nextOffset: nextOffset) }
    }

    func commit(until deadline: ContinuousClock.Instant) async -> Bool { commitNow() }

    @discardableResult
    func commitNow() -> Bool {
        guard let batch = ledger.withLock({ $0.nextBatch() }) else { return true }
        if abortNext.exchange(false, ordering: .relaxed) {
            committed.withLock { $0.aborts += 1 }
            return false
        }
        let settled = ledger.withLock { $0.committed(batch) }
        committed.withLock { state in
            state.records += batch.records
            state.offsets.merge(batch.nextOffsets) { max($0, $1) }
            state.transactions += 1
        }
        for settle in settled { settle(true) }
        return true
    }

    func release(_ partitions: [TopicPartition], waitingUntil deadline: ContinuousClock.Instant) async {
        for settle in ledger.withLock({ $0.release(partitions) }) { settle(false) }
    }
}

@Suite struct ExactlyOncePipelineTests {
    static let tokens = (0..<2).map { String(format: "%064x", $0 + 1) }

    func sources(_ outcomes: [OutboundRecord]) -> [(Int32, Int64)] {
        outcomes.compactMap { record in
            guard let value = record.value, let json = try? JSONValue(parsing: value),
                let source = json["source"], let partition = source["partition"]?.intValue,
                let offset = source["offset"]?.intValue
            else { return nil }
            return (Int32(partition), offset)
        }
    }

    @Test func resultsAreCommittedOnceWithTheirOffsetsAndCountInFlightUntilThen() async throws {
        var records: [SourceRecord] = []
        for partition in Int32(0)..<2 {
            for offset in Int64(0)..<100 {
                records.append(makeRecord(partition: partition, offset: offset, devices: Self.tokens))
            }
        }
        let random = Mutex(SeededGenerator.replayable("exactlyOnceResultsCommittedOnce"))
        let source = InMemoryEventSource(records: records)
        let sink = InMemoryResultSink()
        let transactions = InMemoryTransactionalSink()
        let transport = ClosureTransport { push in
            // Records finish out of order.
            let pause = random.withLock { Int.random(in: 0...2000, using: &$0) }
            try? await Task.sleep(for: .microseconds(pause))
            return apnsAnswer(push, status: 200)
        }
        var configuration = PipelineConfiguration()
        configuration.maxRecordsInFlight = 32
        let pipeline = Pipeline(
            configuration: configuration, source: source, sink: sink, planner: OnePushPerDevicePlanner(),
            transport: transport, transactions: transactions)
        try pipeline.start()
        // Nothing commits until asked: the in-flight cap fills with held records and holds there.
        #expect(await eventually(timeout: .seconds(10)) { transactions.heldRecords == 32 })
        #expect(pipeline.recordsInFlight == 32)
        #expect(sink.json(on: "push.outcomes").isEmpty, "the default sink is not used")
        // One transaction aborts; its results stay held and go in the next.
        transactions.abortNext.store(true, ordering: .relaxed)
        #expect(!transactions.commitNow())
        #expect(transactions.heldRecords == 32)
        var checked = 0
        while pipeline.counters.recordsFinished < 200 {
            transactions.commitNow()
            // After every transaction: the committed offsets never pass a record whose results are missing.
            let committed = transactions.committed.withLock { $0 }
            let sourced = Set(sources(committed.records).map { "\($0.0)/\($0.1)" })
            for (partition, next) in committed.offsets where next > 0 {
                for offset in Int64(0)..<next {
                    #expect(
                        sourced.contains("\(partition.partition)/\(offset)"),
                        "offset \(offset) committed without its results")
                }
            }
            checked += 1
            try await Task.sleep(for: .milliseconds(2))
            if checked > 20_000 { break }
        }
        let committed = transactions.committed.withLock { $0 }
        #expect(committed.aborts == 1)
        #expect(committed.records.count == 400, "one outcome per (event, device), committed once")
        #expect(Set(committed.records.map { String(decoding: $0.value ?? [], as: UTF8.self) }).count == 400)
        #expect(committed.offsets[TopicPartition(topic: "push.requests", partition: 0)] == 100)
        #expect(committed.offsets[TopicPartition(topic: "push.requests", partition: 1)] == 100)
        #expect(source.log.withLock { $0.stored }.isEmpty, "offsets go only through the transactions")
        #expect(transactions.heldRecords == 0)
        #expect(pipeline.recordsInFlight == 0)
        await pipeline.drain(timeout: 1)
    }

    @Test func aRevokeCommitsWhatFinishedAndDropsWhatWaitsBehindAnUnfinishedRecord() async throws {
        let partition = TopicPartition(topic: "push.requests", partition: 0)
        // Offset 1's device is the one the transport never answers: 2 and 3 finish behind it.
        let records = (Int64(0)..<4).map {
            makeRecord(partition: 0, offset: $0, devices: [$0 == 1 ? SlowDeviceTransport.slowToken : Self.tokens[0]])
        }
        let source = InMemoryEventSource(records: records)
        let transactions = InMemoryTransactionalSink()
        let pipeline = Pipeline(
            configuration: PipelineConfiguration(), source: source, sink: InMemoryResultSink(),
            planner: OnePushPerDevicePlanner(), transport: SlowDeviceTransport(), transactions: transactions)
        try pipeline.start()
        #expect(await eventually(timeout: .seconds(10)) { transactions.heldRecords == 3 })
        await pipeline.revoking([partition], deadline: .now + .seconds(1.5))
        let committed = transactions.committed.withLock { $0 }
        #expect(committed.offsets[partition] == 1, "only offset 0 is committable")
        #expect(committed.records.count == 1)
        #expect(transactions.heldRecords == 0, "2 and 3 are dropped: the next owner does them again")
        #expect(await eventually(timeout: .seconds(10)) { pipeline.recordsInFlight == 1 }, "the slow one still runs")
        await pipeline.drain(timeout: 0.1)
    }
}

/// Answers every push at once except those to `slowToken`, which never answer.
struct SlowDeviceTransport: PushTransport {
    static let slowToken = String(repeating: "ab", count: 32)

    func deliver(_ push: PlannedPush) async -> DeliveryResult {
        if push.request.deviceToken?.hex == Self.slowToken { try? await Task.sleep(for: .seconds(3600)) }
        return apnsAnswer(push, status: 200)
    }
}
