// What the counters and metrics learn of a record's outcomes once Kafka has them: counts by status and the
// time they were written; the records themselves only for an observer that prints them.

import Testing

@testable import Worker

@Suite struct PublishedOutcomesTests {
    static func outcomes(keepingRecords: Bool) -> PublishedOutcomes {
        var published = PublishedOutcomes(completedAt: 1_795_953_602.5, keepingRecords: keepingRecords)
        // delivered, skipped, failed, delivered: every status of the encoding tests' records, and one twice.
        for record in ResultRecordEncodingTests.records + [ResultRecordEncodingTests.records[0]] {
            published.append(record)
        }
        return published
    }

    @Test func countsEachStatusAndKeepsNoRecordsUnlessAsked() {
        let published = Self.outcomes(keepingRecords: false)
        let records = ResultRecordEncodingTests.records + [ResultRecordEncodingTests.records[0]]
        #expect(published.count == records.count)
        #expect(published.records == nil)
        for status in OutcomeStatus.allCases {
            #expect(published[status] == records.count { $0.status == status }, "\(status)")
        }
        var seen: [OutcomeStatus: Int] = [:]
        published.forEachStatus { status, count in seen[status] = count }
        #expect(seen == Dictionary(grouping: records, by: \.status).mapValues(\.count))
        #expect(!seen.values.contains(0))
    }

    @Test func keepsTheRecordsInOrderForAnObserverThatAsks() {
        let published = Self.outcomes(keepingRecords: true)
        let kept = published.records ?? []
        let records = ResultRecordEncodingTests.records + [ResultRecordEncodingTests.records[0]]
        #expect(kept.map(\.eventID) == records.map(\.eventID))
        #expect(kept.map(\.status) == records.map(\.status))
    }

    /// The metrics count every outcome of a record by status, and observe the event → outcome time once
    /// per outcome, as they did when they read each record.
    @Test func metricsCountEveryOutcomeAndItsTimeFromTheEvent() throws {
        let metrics = try WorkerMetrics()
        let observer = MetricsObserver(metrics: metrics, next: nil)
        #expect(!observer.keepsOutcomeRecords)
        let published = Self.outcomes(keepingRecords: false)
        observer.outcomesPublished(published, eventTime: published.completedAt - 2)
        for status in OutcomeStatus.allCases {
            #expect(metrics.outcomes.labels(status.rawValue).value == UInt64(published[status]), "\(status)")
            let times = metrics.eventToOutcome.labels(status.rawValue).snapshot
            #expect(times.count == UInt64(published[status]), "\(status)")
            #expect(times.sum == 2 * Double(published[status]), "\(status)")
        }
    }
}
