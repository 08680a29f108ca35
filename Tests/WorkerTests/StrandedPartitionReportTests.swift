// What an operator sees when the consumer finds partitions librdkafka stopped fetching: one warning naming
// them, /readyz not ready with the reason, the gauge; and one line, ready again and 0 once they move.

import JSON
import Kafka
import Testing

@testable import Worker

@Suite struct StrandedPartitionReportTests {
    static let up = {
        var status = KafkaConsumerStatus.initial
        status.brokersUp = 3
        status.brokersKnown = 3
        status.brokersReachable = true
        status.brokersCause = nil
        status.isGroupMember = true
        status.membershipCause = nil
        status.partitionsAssigned = 6
        return status
    }()

    static func stranded(_ partitions: [Int32]) -> KafkaConsumerStatus {
        var status = up
        status.strandedPartitions = partitions.map { KafkaTopicPartition(topic: "push.requests", partition: $0) }
        return status
    }

    @Test func strandedPartitionsAreLoggedOnceShownInReadyzAndCountedUntilTheyMove() throws {
        let captured = CapturedLog()
        let writer = LogWriter(output: captured.output, startsWriterThread: false)
        let logger = Logger(writer: writer)
        let metrics = try WorkerMetrics()
        let readiness = Readiness(conditions: [Readiness.Condition.kafkaFetching])
        readiness.setReady(Readiness.Condition.kafkaFetching)
        func report(_ previous: KafkaConsumerStatus, _ current: KafkaConsumerStatus) {
            WorkerRuntime.report(
                KafkaConsumerStatusChange(previous: previous, current: current), readiness: readiness,
                metrics: metrics, logger: logger, progress: ShutdownProgress())
        }
        func gauge() -> String? {
            String(decoding: metrics.registry.exposition(), as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix("apns_worker_kafka_partitions_stranded ") }.map(String.init)
        }
        #expect(gauge() == "apns_worker_kafka_partitions_stranded 0")

        report(Self.up, Self.stranded([3]))
        report(Self.stranded([3]), Self.stranded([3, 5]))
        #expect(gauge() == "apns_worker_kafka_partitions_stranded 2")
        #expect(!readiness.isReady)
        let reason = readiness.report().body["conditions"]?.arrayValue?.first?["reason"]?.stringValue
        #expect(reason?.contains("push.requests[3], push.requests[5]") == true)

        report(Self.stranded([3, 5]), Self.stranded([5]))
        report(Self.stranded([5]), Self.up)
        #expect(gauge() == "apns_worker_kafka_partitions_stranded 0")
        #expect(readiness.isReady)

        writer.flush()
        let lines = try captured.lines()
        let warnings = lines.filter { $0["level"] == "warning" }
        // One line per partition found: [3], then [5] alone.
        #expect(warnings.map { $0["fields"]?["partitions"] } == [["push.requests[3]"], ["push.requests[5]"]])
        #expect(warnings.allSatisfy { $0["message"]?.stringValue?.contains("fetched none") == true })
        let again = lines.filter { $0["message"] == "kafka partitions fetching again" }
        #expect(again.map { $0["fields"]?["partitions"] } == [["push.requests[3]"], ["push.requests[5]"]])
        // Nothing else changed: no broker or membership lines.
        #expect(lines.count == 4)
    }
}
