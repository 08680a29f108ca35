// The pipeline's pause, kept in front of the consumer rather than in librdkafka: pausing a partition
// in librdkafka drops what it prefetched, and after the resume the next records arrive only once a new
// fetch returns, an idle gap in every pause cycle that cut a backlog's throughput sharply at the
// default cap (docs/performance.md). Closing this gate instead stops handing
// records over; librdkafka keeps its prefetched records (bounded by `queued.max.messages.kbytes`), and
// the consumer's own stall guard pauses partitions in librdkafka when the gate stays closed for longer
// than its `stallTimeout`, so a long pause still stops fetching and frees the prefetched memory.

import Synchronization

/// Holds the reader of a source while any partition the pipeline paused has a record to hand over.
///
/// - Important: one reader waits at a time (the source's reader task); pause, resume and revoke come
///   from any thread.
final class DeliveryGate: Sendable {
    private struct State {
        var closed: Set<TopicPartition> = []
        /// Counts revocations per partition, so that a record held at the gate while its partition was
        /// revoked is dropped (its new owner reads it again) rather than processed by a non-owner.
        var revocations: [TopicPartition: Int] = [:]
        var waiter: (partition: TopicPartition, continuation: CheckedContinuation<Void, Never>)?
        var isShutDown = false
    }

    private let state = Mutex(State())

    func close(_ partitions: [TopicPartition]) {
        state.withLock { $0.closed.formUnion(partitions) }
    }

    func open(_ partitions: [TopicPartition]) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.closed.subtract(partitions)
            return Self.releasableWaiter(&state)
        }
        waiter?.resume()
    }

    /// The partitions were revoked: a record of theirs held at the gate is not to be handed over, and a
    /// partition assigned again later starts open unless the pipeline closes it.
    func revoked(_ partitions: [TopicPartition]) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            for partition in partitions {
                state.revocations[partition, default: 0] += 1
                state.closed.remove(partition)
            }
            return Self.releasableWaiter(&state)
        }
        waiter?.resume()
    }

    /// Opens for good: the reader stops waiting (stopping or closing the source).
    func shutDown() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.isShutDown = true
            defer { state.waiter = nil }
            return state.waiter?.continuation
        }
        waiter?.resume()
    }

    /// Waits while `partition` is closed. Returns false when the record must not be handed over: its
    /// partition was revoked meanwhile, or the gate was shut down.
    func admit(_ partition: TopicPartition) async -> Bool {
        enum Arrival {
            case open, shutDown
            case closed(revocationsBefore: Int)
        }
        // Open (the common case): admitted under one lock, without suspending the reader.
        let arrival = state.withLock { state -> Arrival in
            if state.isShutDown { return .shutDown }
            if !state.closed.contains(partition) { return .open }
            return .closed(revocationsBefore: state.revocations[partition, default: 0])
        }
        let revocationsBefore: Int
        switch arrival {
        case .open: return true
        case .shutDown: return false
        case .closed(let count): revocationsBefore = count
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLock { state -> Bool in
                if state.isShutDown || !state.closed.contains(partition) { return true }
                state.waiter = (partition, continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
        return state.withLock { state in
            !state.isShutDown && state.revocations[partition, default: 0] == revocationsBefore
        }
    }

    private static func releasableWaiter(_ state: inout State) -> CheckedContinuation<Void, Never>? {
        guard let waiter = state.waiter, !state.closed.contains(waiter.partition) else { return nil }
        state.waiter = nil
        return waiter.continuation
    }
}
