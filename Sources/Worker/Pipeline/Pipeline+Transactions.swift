// Exactly-once mode (`kafka.exactly_once`): a record's results are held by the transactional sink instead
// of being published at once. Finishing then has two steps: held (the record is finished for its partition's
// offset, which the sink commits with the results of every record before it) and settled (its transaction
// committed, or its partition was released): only then does it stop counting against the in-flight cap.

import Synchronization

extension Pipeline {
    func publishHeld(
        _ outputs: [OutboundRecord], of record: SourceRecord, generation: UInt64, outcomes: PublishedOutcomes,
        eventTime: Double?, into transactions: any TransactionalResultSink
    ) {
        // A result Kafka could never take is replaced by a smaller dead letter, as in the default mode; the
        // collector answers at once, so every output is settled when the loop ends.
        let collector = HeldOutputs(limitBytes: transactions.maximumRecordBytes)
        let deadLetters = DeadLetterReplacement(sink: collector, topic: configuration.deadLetterTopic)
        var published = true
        for output in outputs {
            guard let limit = collector.limitBytes, output.byteCount > limit else {
                collector.keep(output)
                continue
            }
            let refusal = RecordTooLargeError(
                record: output, limitBytes: limit,
                detail: "\(output.byteCount) bytes, more than message.max.bytes (\(limit))")
            let replaced = Mutex<Result<DeadLetter, any Error>?>(nil)
            deadLetters.publish(replacing: output, of: record, after: refusal) { result in
                replaced.withLock { $0 = result }
            }
            switch replaced.withLock({ $0 }) {
            case .success(let letter)?:
                if letter.resultTopic != nil {
                    observer?.deadLettered(record, errorClass: letter.errorClass, message: letter.message)
                }
            case .failure(let error)?:
                published = false
                notePublishFailure(of: record, error)
            case nil:
                published = false
            }
        }
        let invalidTokens = outputs.reduce(0) { $0 + ($1.topic == configuration.invalidTokensTopic ? 1 : 0) }
        let parked = outputs.last?.topic == configuration.retryTopic
        let partition = record.topicPartition
        let settle: @Sendable (Bool) -> Void = { [self] committed in
            settleHeld(
                committed: committed, outcomes: outcomes, invalidTokens: invalidTokens, parked: parked,
                eventTime: eventTime)
        }
        let appliesSteps = state.withLock { state -> Bool? in
            guard published else {
                // Never held: its offset is never committed, and it holds its partition back until the restart.
                state.counters.publishFailures += 1
                return false
            }
            // A record of a partition revoked since it was taken: the next owner does it again.
            guard state.tracker.isCurrent(partition, generation: generation) else { return nil }
            // Held before its offset can become committable, both under the pipeline's lock: a transaction
            // never takes an offset past a record whose results it does not carry.
            transactions.hold(collector.records, partition: partition, offset: record.offset, settled: settle)
            let (committable, released) = state.tracker.finishReleasing(
                partition, offset: record.offset, generation: generation)
            if let committable { transactions.committable(partition, nextOffset: committable) }
            state.reportRunning(
                state.fetchAgainIfRoom(partition, released: released, limit: resumeHolding(partition, state.flow)))
            return state.hasFlowSteps
        }
        guard let appliesSteps else {
            settle(false)
            return
        }
        if appliesSteps { applyFlowSteps() }
    }

    /// A held record's transaction committed (`committed`), or its partition was released: it stops counting
    /// against the in-flight cap, and a committed one is counted and observed as published.
    func settleHeld(committed: Bool, outcomes: PublishedOutcomes, invalidTokens: Int, parked: Bool, eventTime: Double?)
    {
        let (resizeDue, appliesSteps) = state.withLock { state -> (Bool, Bool) in
            var resizeDue = false
            if committed {
                resizeDue = state.countFinished(outcomes: outcomes, invalidTokens: invalidTokens, parked: parked)
            }
            state.reportRunning(state.recordStoppedCounting())
            return (resizeDue, state.hasFlowSteps)
        }
        if appliesSteps { applyFlowSteps() }
        if committed { observer?.outcomesPublished(outcomes, eventTime: eventTime) }
        if resizeDue { resizeInFlightCap() }
    }
}

/// Collects one record's results for the transactional sink: a record within the size limit is kept and
/// acknowledged at once; a larger one is refused as too large, as Kafka would refuse it.
final class HeldOutputs: ResultSink {
    let limitBytes: Int?
    private let kept = Mutex<[OutboundRecord]>([])

    init(limitBytes: Int?) { self.limitBytes = limitBytes }

    var records: [OutboundRecord] { kept.withLock { $0 } }

    func keep(_ record: OutboundRecord) { kept.withLock { $0.append(record) } }

    func publish(_ record: OutboundRecord, acknowledged: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        if let limitBytes, record.byteCount > limitBytes {
            acknowledged(
                .failure(
                    RecordTooLargeError(
                        record: record, limitBytes: limitBytes,
                        detail: "\(record.byteCount) bytes, more than message.max.bytes (\(limitBytes))")))
            return
        }
        keep(record)
        acknowledged(.success(()))
    }

    func flush(timeout: Double) async -> Bool { true }
}
