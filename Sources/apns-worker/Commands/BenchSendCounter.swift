// The senders' shared work queue: a relaxed atomic counter, so taking work costs the measured loop no lock.

import Synchronization

/// Hands out notification numbers to the senders.
final class BenchSendCounter: Sendable {
    private let value = Atomic<Int>(0)
    func take() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue }
}
