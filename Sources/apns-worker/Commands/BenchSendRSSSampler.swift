// Memory as a run progresses, sampled by the senders themselves rather than a timer thread.

import Synchronization

/// Samples the resident set size every 10% of the run, from the sender that completes that notification.
final class BenchSendRSSSampler: Sendable {
    private let total: Int
    private let done = Atomic<Int>(0)
    private let samples = Mutex<[(Int, Int)]>([])

    init(total: Int) { self.total = total }

    func completed() {
        let finished = done.wrappingAdd(1, ordering: .relaxed).newValue
        let step = max(1, total / 10)
        if finished % step == 0 || finished == total {
            let percent = Int((Double(finished) / Double(total) * 100).rounded())
            let rss = ProcessReadings.currentRSSKiB()
            samples.withLock { $0.append((percent, rss)) }
        }
    }

    func stop() {}

    var checkpoints: [(Int, Int)] {
        samples.withLock { samples in
            var seen = Set<Int>()
            return samples.sorted { $0.0 < $1.0 }.filter { seen.insert($0.0).inserted }
        }
    }
}
