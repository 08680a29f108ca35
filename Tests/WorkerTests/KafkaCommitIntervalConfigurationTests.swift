// kafka.commit_interval: its documented default, a value with its unit, 0s to turn the worker's own
// commits off, and a bare number refused; kafka.commit_after_records taken.

import JSON
import Testing

@testable import Worker

@Suite struct KafkaCommitIntervalConfigurationTests {
    func configuration(commitInterval: JSONValue? = nil, commitAfterRecords: JSONValue? = nil) throws
        -> WorkerConfiguration
    {
        var kafka: JSONObject = [:]
        kafka["commit_interval"] = commitInterval
        kafka["commit_after_records"] = commitAfterRecords
        return try KafkaSectionConfiguration.decode(kafka: kafka)
    }

    @Test func defaultsToAQuarterSecondAndTakesADurationWithItsUnit() throws {
        #expect(try configuration(commitInterval: nil).kafka.commitInterval == 0.25)
        #expect(try configuration(commitInterval: "100ms").kafka.commitInterval == 0.1)
        #expect(try configuration(commitInterval: "0s").kafka.commitInterval == 0)
        #expect(try configuration(commitInterval: nil).kafka.commitAfterRecords == nil)  // 5 % of the cap
    }

    /// It was decoded but missing from the section's known keys, so a config that set it was refused.
    @Test func takesCommitAfterRecords() throws {
        #expect(try configuration(commitAfterRecords: 40).kafka.commitAfterRecords == 40)
    }

    @Test func refusesABareNumberSayingWhichUnitIsMeant() {
        let error = #expect(throws: ConfigurationError.self) { try configuration(commitInterval: 250) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("kafka.commit_interval"))
    }
}
