// The small value types under the pool: back-off ceilings and jitter, the bounded wait queue, header fields.

import Testing

@testable import HTTP2

@Suite("Back-off, bounded queues and header fields")
struct HTTP2SupportTypesTests {
    @Test func backoffCeilingsDoubleUpToTheMaximum() {
        let backoff = ExponentialBackoff(initial: .milliseconds(100), maximum: .seconds(1))
        #expect(backoff.ceiling(afterFailures: 0) == .zero)
        #expect(backoff.ceiling(afterFailures: 1) == .milliseconds(100))
        #expect(backoff.ceiling(afterFailures: 2) == .milliseconds(200))
        #expect(backoff.ceiling(afterFailures: 4) == .milliseconds(800))
        #expect(backoff.ceiling(afterFailures: 5) == .seconds(1))
        #expect(backoff.ceiling(afterFailures: 500) == .seconds(1))
    }

    @Test func boundedQueueKeepsOrderAndRefusesPastCapacity() {
        var queue = BoundedQueue<Int>(capacity: 3)
        let accepted = [queue.append(1), queue.append(2), queue.append(3), queue.append(4)]
        #expect(accepted == [true, true, true, false])
        let first = queue.popFirst()
        #expect(first == 1)
        let appended = queue.append(5)
        #expect(appended)
        let removed = queue.removeAll { $0 == 3 }
        #expect(removed == [3])
        let rest = [queue.popFirst(), queue.popFirst(), queue.popFirst()]
        #expect(rest == [2, 5, nil])
    }

    @Test func headerFieldsFindNamesIgnoringCaseAndIterateInOrder() {
        var fields = HTTP2HeaderFields()
        fields.append(name: Array("apns-id".utf8), value: Array("A-1".utf8))
        fields.append(name: Array("retry-after".utf8), value: Array("30".utf8))
        fields.append(name: Array("apns-id".utf8), value: Array("second".utf8))
        #expect(fields.count == 3)
        #expect(fields.first(named: "APNS-ID") == "A-1")
        #expect(fields.first(named: "retry-after") == "30")
        #expect(fields.first(named: "apns-unique-id") == nil)
        #expect(fields.map(\.value) == ["A-1", "30", "second"])
    }
}
