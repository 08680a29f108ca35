// The bounded hand-off between the poll thread and the readers: the poll thread delivers and waits
// for room, readers take records, and a hand-off that stays full pauses fetching until it drains.

import Dispatch

/// Received records waiting to be handed out, oldest first.
struct MessageQueue {
    private var storage: [KafkaConsumerMessage] = []
    private var head = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ message: KafkaConsumerMessage) { storage.append(message) }

    mutating func popFirst() -> KafkaConsumerMessage? {
        guard head < storage.count else { return nil }
        let message = storage[head]
        head += 1
        if head >= 64, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return message
    }

    mutating func removeAll(where shouldRemove: (KafkaConsumerMessage) -> Bool) {
        storage = storage[head...].filter { !shouldRemove($0) }
        head = 0
    }
}

extension ConsumerCore {
    // MARK: Poll-thread side

    /// Hands a received record to a waiting reader or buffers it. Returns whether the hand-off still has
    /// room, so that the poll thread need not take the lock again to ask before its next poll.
    func deliver(_ received: KafkaConsumerMessage) -> Bool {
        state.withLock { state in
            handOutIfAssigned(received, &state)
            return state.buffer.count < capacity
        }
    }

    private func handOutIfAssigned(_ received: KafkaConsumerMessage, _ state: inout State) {
        // A record of a partition revoked meanwhile is dropped: it is redelivered to its new owner.
        let partition = received.topicPartition
        guard var assigned = state.assigned[partition] else { return }
        var message = received
        message.assignment = assigned.number
        if !assigned.hasFetched {
            // Its fetch start has run: the pauses held back for it can be applied now.
            assigned.hasFetched = true
            state.assigned[partition] = assigned
            applyPauses([partition], &state)
            if state.isPaused(partition) {
                // Paused before it fetched (by the owner, or by a full hand-off). librdkafka, paused
                // now, drops whatever else it fetched and starts again after this record on resume:
                // the record waits for that resume here (one per partition at most).
                state.assigned[partition]?.heldFirstRecord = message
                return
            }
        }
        handOut(message, &state)
    }

    /// Gives `message` to a waiting reader, or buffers it.
    func handOut(_ message: KafkaConsumerMessage, _ state: inout State) {
        if !state.waiters.isEmpty {
            state.waiters.removeFirst().continuation.resume(returning: message)
            return
        }
        state.buffer.append(message)
    }

    /// Waits (on the poll thread) until the hand-off has room, at most `stallTimeout`.
    /// Returns `false` if it is still full: the caller then throttles so it can keep polling.
    func waitForRoom() -> Bool {
        // The deadline is read from the clock only once the hand-off is full: this runs before every poll.
        var deadline: DispatchTime?
        while true {
            let hasRoom = state.withLock { state in
                if state.buffer.count < capacity || state.isThrottled || state.lifecycle != .running { return true }
                state.pollerIsWaiting = true
                return false
            }
            if hasRoom { return true }
            let waitUntil =
                deadline ?? DispatchTime.now() + .milliseconds(Int(clamping: stallTimeout.wholeMilliseconds))
            deadline = waitUntil
            if roomAvailable.wait(timeout: waitUntil) == .timedOut {
                return state.withLock { state in
                    state.pollerIsWaiting = false
                    return state.buffer.count < capacity || state.lifecycle != .running
                }
            }
        }
    }

    /// Pauses every assigned partition the owner has not paused, because the hand-off stayed full.
    /// librdkafka drops what it prefetched for them and refetches from the next undelivered offset.
    func throttle() {
        state.withLock { state in
            guard !state.isThrottled, state.buffer.count >= capacity else { return }
            state.pausedForBuffer = state.assignment.subtracting(state.pausedByOwner)
            state.isThrottled = true
            applyPauses(state.pausedForBuffer, &state)
        }
    }

    /// Wakes the poll thread if it waits for room (called with the lock held).
    func wakePoller(_ state: inout State) {
        guard state.pollerIsWaiting else { return }
        state.pollerIsWaiting = false
        roomAvailable.signal()
    }

    // MARK: Async side

    func next() async throws -> KafkaConsumerMessage? {
        // A buffered record is taken without suspending (the common case under load): a continuation
        // and a cancellation handler per record cost a task switch each.
        let taken = state.withLock { state -> (KafkaConsumerMessage?, id: UInt64) in
            if let message = takeBuffered(&state) { return (message, 0) }
            state.nextWaiterID += 1
            return (nil, state.nextWaiterID)
        }
        if let message = taken.0 { return message }
        let id = taken.id
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                state.withLock { state in
                    if let message = takeBuffered(&state) {
                        continuation.resume(returning: message)
                    } else if let failure = state.failure {
                        continuation.resume(throwing: failure)
                    } else if state.lifecycle == .closed || Task.isCancelled {
                        continuation.resume(returning: nil)
                    } else {
                        state.waiters.append((id, continuation))
                    }
                }
            }
        } onCancel: {
            state.withLock { state in
                if let index = state.waiters.firstIndex(where: { $0.id == id }) {
                    state.waiters.remove(at: index).continuation.resume(returning: nil)
                }
            }
        }
    }

    /// The oldest buffered record, if any; taking it may resume throttled partitions and wake the poller.
    private func takeBuffered(_ state: inout State) -> KafkaConsumerMessage? {
        guard let message = state.buffer.popFirst() else { return nil }
        resumeIfDrained(&state)
        if state.buffer.count < capacity { wakePoller(&state) }
        return message
    }

    /// Resumes the partitions the hand-off paused once it has drained below the threshold.
    func resumeIfDrained(_ state: inout State) {
        guard state.isThrottled, state.buffer.count <= resumeThreshold else { return }
        let pausedForBuffer = state.pausedForBuffer
        state.pausedForBuffer = []
        state.isThrottled = false
        applyPauses(pausedForBuffer, &state)
    }

    var bufferedCount: Int { state.withLock { $0.buffer.count } }
}
