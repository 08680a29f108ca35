// kafka.exactly_once and kafka.transaction_interval: off and 250 ms by default, taken when set, an interval
// out of range refused with its key, and kafka.properties.transactional.id refused (the worker derives it).

import JSON
import Testing

@testable import Worker

@Suite struct ExactlyOnceConfigurationTests {
    func configuration(_ settings: JSONObject) throws -> WorkerConfiguration {
        try KafkaSectionConfiguration.decode(kafka: settings)
    }

    @Test func isOffByDefaultWithAQuarterSecondInterval() throws {
        let kafka = try configuration([:]).kafka
        #expect(!kafka.exactlyOnce)
        #expect(kafka.transactionInterval == 0.25)
    }

    @Test func takesBothKeys() throws {
        let kafka = try configuration(["exactly_once": true, "transaction_interval": "100ms"]).kafka
        #expect(kafka.exactlyOnce)
        #expect(kafka.transactionInterval == 0.1)
    }

    @Test func refusesAnIntervalOutOfRangeAndATransactionalIDOfItsOwn() {
        let interval = #expect(throws: ConfigurationError.self) { try configuration(["transaction_interval": "0s"]) }
        #expect("\(interval.map { "\($0)" } ?? "")".contains("kafka.transaction_interval"))
        let property = #expect(throws: ConfigurationError.self) {
            try configuration(["properties": ["transactional.id": "mine"]])
        }
        #expect("\(property.map { "\($0)" } ?? "")".contains("kafka.properties.transactional.id"))
    }

    @Test func theStrandedPartitionWatchIsAMinuteByDefaultTakesADurationAndZeroTurnsItOff() throws {
        #expect(WorkerRuntime.strandedPartitionThreshold(try configuration([:]).kafka) == .seconds(60))
        let short = try configuration(["stranded_partition_after": "1500ms"]).kafka
        #expect(WorkerRuntime.strandedPartitionThreshold(short) == .milliseconds(1500))
        #expect(
            WorkerRuntime.strandedPartitionThreshold(try configuration(["stranded_partition_after": "0s"]).kafka) == nil
        )
        let bare = #expect(throws: ConfigurationError.self) { try configuration(["stranded_partition_after": 60]) }
        #expect("\(bare.map { "\($0)" } ?? "")".contains("kafka.stranded_partition_after"))
    }

    @Test func healthzAllowsAStrandedPartitionTenOfTheWatchsRestartsAndAtLeastAMinute() throws {
        func allowance(_ value: String) throws -> Duration? {
            WorkerProcess.strandedPartitionAllowance(
                threshold: WorkerRuntime.strandedPartitionThreshold(
                    try configuration(["stranded_partition_after": .string(value)]).kafka))
        }
        #expect(try allowance("60s") == .seconds(600))
        #expect(try allowance("15m") == .seconds(9000))
        #expect(try allowance("1s") == .seconds(60))
        // The watch off: nothing is watched, so /healthz has no kafka.fetching heartbeat to miss.
        #expect(try allowance("0s") == nil)
    }

    @Test func theTransactionalIDIsTheGroupAndTheInstance() throws {
        var kafka = try configuration(["group": "push", "group_instance_id": "apns-worker-3"]).kafka
        #expect(WorkerRuntime.transactionalID(kafka) == "apns-worker-push-apns-worker-3")
        kafka.groupInstanceID = ""
        #expect(WorkerRuntime.transactionalID(kafka).hasPrefix("apns-worker-push-"))
    }
}
