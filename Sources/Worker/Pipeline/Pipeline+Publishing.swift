// A record's results go to the sink; once the sink has acknowledged every one, the record is finished:
// its offset may be stored, and the in-flight cap and fetch stops are updated.

import APNs
import Synchronization

extension Pipeline {
    /// Never inlined into `process`, whose async frame would hold its locals for every record in flight.
    @inline(never)
    func publish(
        _ outputs: [OutboundRecord], of record: SourceRecord, generation: UInt64, outcomes: PublishedOutcomes,
        eventTime: Double?
    ) {
        if let transactions {
            publishHeld(
                outputs, of: record, generation: generation, outcomes: outcomes, eventTime: eventTime,
                into: transactions)
            return
        }
        let invalidTokens = outputs.reduce(0) { $0 + ($1.topic == configuration.invalidTokensTopic ? 1 : 0) }
        let publication = RecordPublication(
            pipeline: self, record: record, generation: generation, outputCount: outputs.count, outcomes: outcomes,
            invalidTokens: invalidTokens, parked: outputs.last?.topic == configuration.retryTopic,
            eventTime: eventTime)
        if outputs.isEmpty {
            publication.finish(succeeded: true)
            return
        }
        // One closure for all of the record's outputs (the sink tells which one answered).
        sink.publish(outputs) { index, result in publication.acknowledged(index, result) }
    }

    /// Keeps the first reason a record's results could not be published, for the log: the worker stops on
    /// it, and the operator needs the real cause.
    func notePublishFailure(of record: SourceRecord, _ error: any Error) {
        let cause = "results of \(record.topicPartition) offset \(record.offset) could not be published: \(error)"
        state.withLock { $0.fatalError = $0.fatalError ?? cause }
    }

    func finishRecord(
        _ record: SourceRecord, generation: UInt64, published: Bool, outcomes: PublishedOutcomes, invalidTokens: Int,
        parked: Bool = false, eventTime: Double?
    ) {
        let partition = record.topicPartition
        let (resizeDue, appliesSteps) = state.withLock { state -> (Bool, Bool) in
            guard published else {
                // The record's results are not safely written: its offset must never be stored,
                // so it stays unfinished and holds its partition back until the worker restarts.
                state.counters.publishFailures += 1
                state.fatalError =
                    state.fatalError
                    ?? "results of \(partition) offset \(record.offset) could not be published"
                return (false, false)
            }
            let resizeDue = state.countFinished(outcomes: outcomes, invalidTokens: invalidTokens, parked: parked)
            // The in-flight cap counts this record until now; the records it releases (itself and those
            // finished behind it) stop counting towards its partition's limit of held records.
            let (committable, released) = state.tracker.finishReleasing(
                partition, offset: record.offset, generation: generation)
            // Stored under the lock: two finishes storing outside it could reach the source in the
            // opposite order and move the stored offset back. Storing is a non-blocking librdkafka call.
            if let committable { source.store(partition, nextOffset: committable) }
            var running = state.fetchAgainIfRoom(
                partition, released: released, limit: resumeHolding(partition, state.flow))
            let resumed = state.recordStoppedCounting()
            if !resumed.isEmpty { running = resumed }
            state.reportRunning(running)
            return (resizeDue, state.hasFlowSteps)
        }
        if appliesSteps { applyFlowSteps() }
        if published { observer?.outcomesPublished(outcomes, eventTime: eventTime) }
        if resizeDue { resizeInFlightCap() }
    }
}

/// One source record's results on their way to the sink, with all that their acknowledgements need: one
/// object per record, where a closure per step (finish, acknowledge, replace) each held its own copy of
/// the source record.
final class RecordPublication: Sendable {
    let pipeline: Pipeline
    let record: SourceRecord
    let generation: UInt64
    let outcomes: PublishedOutcomes
    let invalidTokens: Int
    let parked: Bool
    let eventTime: Double?
    private let remaining: Atomic<Int>
    private let failed = Atomic<Bool>(false)

    init(
        pipeline: Pipeline, record: SourceRecord, generation: UInt64, outputCount: Int, outcomes: PublishedOutcomes,
        invalidTokens: Int, parked: Bool, eventTime: Double?
    ) {
        self.pipeline = pipeline
        self.record = record
        self.generation = generation
        self.outcomes = outcomes
        self.invalidTokens = invalidTokens
        self.parked = parked
        self.eventTime = eventTime
        remaining = Atomic(outputCount)
    }

    /// The sink's answer for the record's output number `index`. A record Kafka can never take (too large)
    /// is replaced by a smaller dead letter, so that the partition moves on instead of stopping the worker for
    /// good. The refusal hands the output back: this object keeps no copy of the outputs, which are freed
    /// on the event loop that made them rather than on the producer's poll thread.
    func acknowledged(_ index: Int, _ result: Result<Void, any Error>) {
        guard case .failure(let refusal as RecordTooLargeError) = result else {
            acknowledge(result)
            return
        }
        let deadLetters = DeadLetterReplacement(
            sink: pipeline.sink, topic: pipeline.configuration.deadLetterTopic)
        deadLetters.publish(replacing: refusal.record, of: record, after: refusal) { [self] replaced in
            switch replaced {
            case .success(let letter):
                if letter.resultTopic != nil {
                    pipeline.observer?.deadLettered(record, errorClass: letter.errorClass, message: letter.message)
                }
                acknowledge(.success(()))
            case .failure(let error):
                acknowledge(.failure(error))
            }
        }
    }

    /// Counts one output's final answer; the last one finishes the record.
    private func acknowledge(_ result: Result<Void, any Error>) {
        if case .failure(let error) = result {
            pipeline.notePublishFailure(of: record, error)
            failed.store(true, ordering: .relaxed)
        }
        guard remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        finish(succeeded: !failed.load(ordering: .relaxed))
    }

    func finish(succeeded: Bool) {
        pipeline.finishRecord(
            record, generation: generation, published: succeeded, outcomes: outcomes, invalidTokens: invalidTokens,
            parked: parked, eventTime: eventTime)
    }
}

extension Pipeline.State {
    /// Counts a record whose results are safely in Kafka, and its pushes for the in-flight sizing; true
    /// when the cap is due to be computed again.
    mutating func countFinished(outcomes: PublishedOutcomes, invalidTokens: Int, parked: Bool) -> Bool {
        counters.recordsFinished += 1
        counters.outcomes += outcomes.count
        if outcomes.count > 0 { sizing.recordFinished(pushes: outcomes.count) }
        counters.invalidTokens += invalidTokens
        outcomes.forEachStatus { status, count in counters.byStatus[status, default: 0] += count }
        if parked {
            counters.parked += 1
        } else if outcomes.count == 0 {
            counters.deadLettered += 1
        }
        return sizing.tick()
    }
}
