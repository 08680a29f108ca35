// A record's results go to the sink; once the sink has acknowledged every one, the record is finished:
// its offset may be stored, and the in-flight cap and fetch stops are updated.

import APNs
import Synchronization

extension Pipeline {
    func publish(
        _ outputs: [OutboundRecord], of record: SourceRecord, generation: UInt64, outcomes: [OutcomeRecord],
        eventTime: Double?
    ) {
        if let transactions {
            publishHeld(
                outputs, of: record, generation: generation, outcomes: outcomes, eventTime: eventTime,
                into: transactions)
            return
        }
        let countdown = AcknowledgementCountdown(count: outputs.count)
        let invalidTokens = outputs.reduce(0) { $0 + ($1.topic == configuration.invalidTokensTopic ? 1 : 0) }
        let parked = outputs.last?.topic == configuration.retryTopic
        let finish: @Sendable (Bool) -> Void = { [self] succeeded in
            finishRecord(
                record, generation: generation, published: succeeded, outcomes: outcomes,
                invalidTokens: invalidTokens, parked: parked, eventTime: eventTime)
        }
        if outputs.isEmpty {
            finish(true)
            return
        }
        let acknowledge: @Sendable (Result<Void, any Error>) -> Void = { [self] result in
            if case .failure(let error) = result {
                // Kept for the log: the worker stops on it, and the operator needs the real cause.
                let cause =
                    "results of \(record.topicPartition) offset \(record.offset) could not be published: "
                    + "\(error)"
                state.withLock { $0.fatalError = $0.fatalError ?? cause }
            }
            if let allSucceeded = countdown.acknowledge(succeeded: (try? result.get()) != nil) {
                finish(allSucceeded)
            }
        }
        let deadLetters = DeadLetterReplacement(sink: sink, topic: configuration.deadLetterTopic)
        // One closure for all of the record's outputs (the sink tells which one answered).
        sink.publish(outputs) { [observer] index, result in
            guard case .failure(let refusal as RecordTooLargeError) = result else {
                acknowledge(result)
                return
            }
            // Kafka can never take this record: a smaller dead letter stands in for it, so that the
            // partition moves on instead of stopping the worker for good.
            deadLetters.publish(replacing: outputs[index], of: record, after: refusal) { replaced in
                switch replaced {
                case .success(let letter):
                    if letter.resultTopic != nil {
                        observer?.deadLettered(record, errorClass: letter.errorClass, message: letter.message)
                    }
                    acknowledge(.success(()))
                case .failure(let error):
                    acknowledge(.failure(error))
                }
            }
        }
    }

    func finishRecord(
        _ record: SourceRecord, generation: UInt64, published: Bool, outcomes: [OutcomeRecord], invalidTokens: Int,
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

/// Counts acknowledgements of one record's outputs; the last one reports whether all succeeded.
final class AcknowledgementCountdown: Sendable {
    private let remaining: Atomic<Int>
    private let failed = Atomic<Bool>(false)

    init(count: Int) { remaining = Atomic(count) }

    /// Returns nil until the last acknowledgement, then whether every one succeeded.
    func acknowledge(succeeded: Bool) -> Bool? {
        if !succeeded { failed.store(true, ordering: .relaxed) }
        let left = remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue
        guard left == 0 else { return nil }
        return !failed.load(ordering: .relaxed)
    }
}

extension Pipeline.State {
    /// Counts a record whose results are safely in Kafka, and its pushes for the in-flight sizing; true
    /// when the cap is due to be computed again.
    mutating func countFinished(outcomes: [OutcomeRecord], invalidTokens: Int, parked: Bool) -> Bool {
        counters.recordsFinished += 1
        counters.outcomes += outcomes.count
        if !outcomes.isEmpty { sizing.recordFinished(pushes: outcomes.count) }
        counters.invalidTokens += invalidTokens
        // By index: `for outcome in` copies each record (a dozen references) just to read its status.
        for index in outcomes.indices { counters.byStatus[outcomes[index].status, default: 0] += 1 }
        if parked {
            counters.parked += 1
        } else if outcomes.isEmpty {
            counters.deadLettered += 1
        }
        return sizing.tick()
    }
}
